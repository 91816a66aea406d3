"""Translating with a trained model: the `Translator`, its server pane and its command's answers.

`Translator` is the task's Python API object (``transformer_lab.api.Translator`` opens one
from a checkpoint); `TranslationHandler` answers the server's translation pane with it.

Shape legend: N decoder layers, H heads, T target length (``<bos>`` first), S source length.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Sequence, overload

import torch

from transformer_lab.data import TokenizerPair
from transformer_lab.data._checks import check_bool, text_of, texts_of
from transformer_lab.data.subword import token_labels
from transformer_lab.decoding import DecodeConfig
from transformer_lab.decoding.config import MAX_BEAM_SIZE as MAX_SEARCH_BEAMS
from transformer_lab.decoding.predictor import Seq2SeqHandler, Seq2SeqPredictor, Written
from transformer_lab.decoding.search_settings import SearchKeywords
from transformer_lab.decoding.sentences import (
    best_translations,
    check_sentences,
    sentence_names,
    translate_nbest,
    translate_sentences,
    warn_cut,
)
from transformer_lab.decoding.sources import Candidate, DecodedModel, check_batch_size
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.models.attention_maps import cross_attention
from transformer_lab.one_line import one_line
from transformer_lab.tasks.command import INPUT_NAMES, INPUTS_BEFORE, Answers, PredictCommand, input_name
from transformer_lab.tasks.evaluation import BEAM, DECODE_OPTIONS, TaskOption, search_keywords
from transformer_lab.tasks.task import ONLY_WHEN, Endpoint, Serving
from transformer_lab.tasks.translation.train import load_ensemble

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's from Python 3.11


class Translator(Seq2SeqPredictor):
    """A translation model on a device, ready to translate; ``tokenizers`` beside `Seq2SeqPredictor`'s attributes.

    ``transformer_lab.api.Translator`` opens one from a checkpoint and adds ``plot_attention``.
    """

    def __init__(
        self, model: DecodedModel, tokenizers: TokenizerPair, config: Any, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(model, config, device)
        self.tokenizers = tokenizers

    def ensembled(self, checkpoints: Sequence[str | os.PathLike[str]], name: str = "ensemble") -> Translator:
        """A translator decoding this model and each checkpoint's as one: their next-token probabilities averaged.

        Every checkpoint must have this one's vocabulary and languages (else an error starting
        with ``name``); the search settings stay this checkpoint's.
        """
        if not isinstance(self.model, Seq2SeqTransformer):
            raise ValueError(f"{name}: expected a translator of one model to add models to, got an ensemble")
        ensemble = load_ensemble(self.model, self.tokenizers, self.config, checkpoints, name)
        return Translator(ensemble, self.tokenizers, self.config, next(self.model.parameters()).device)

    @property
    def languages(self) -> tuple[str, str]:
        """(source language, target language) as recorded in the checkpoint."""
        return self.config.data.source_language, self.config.data.target_language

    def translate(
        self,
        sentences: str | Sequence[str],
        *,
        beam: int | None = None,
        nbest: int = 1,
        precision: str | None = None,
        length_penalty: float | None = None,
        beam_stop: str | None = None,
        batch_size: int = 64,
        names: Sequence[str] | None = None,
    ) -> Any:
        """The translation of each sentence (``nbest`` 1: a str; more: :meth:`candidates`' list, best first).

        ``beam`` 1 is greedy search; ``precision`` "fp32", "bf16", "auto" (bf16 where this
        machine runs it fast) or "int8" (CPU); ``beam_stop`` "exact" or "finished". A blank
        sentence gives "" (no candidates); one longer than the model's positional table is a
        ValueError naming it: ``names[i]`` where given (its file and line), else its index.
        """
        texts = texts_of(sentences, "sentences")
        # Checked here too: with nbest > 1 each sentence is searched alone and batch_size is never read.
        batch_size = check_batch_size(batch_size)
        if nbest == 1:
            model, decode = self.decoding(beam, nbest, precision, length_penalty, beam_stop)
            results: list[Any] = translate_sentences(model, self.tokenizers, texts, decode, batch_size, names)
        else:
            search = SearchKeywords(beam=beam, precision=precision, length_penalty=length_penalty, beam_stop=beam_stop)
            results = self.candidates(texts, nbest=nbest, names=names, **search)
        return results[0] if isinstance(sentences, str) else results

    @overload
    def candidates(  # type: ignore[overload-overlap]  # a str is a Sequence[str]; it matches first
        self,
        sentences: str,
        *,
        nbest: int = ...,
        names: Sequence[str] | None = ...,
        warn: bool = ...,
        **search: Unpack[SearchKeywords],
    ) -> list[Candidate]: ...

    @overload
    def candidates(
        self,
        sentences: Sequence[str],
        *,
        nbest: int = ...,
        names: Sequence[str] | None = ...,
        warn: bool = ...,
        **search: Unpack[SearchKeywords],
    ) -> list[list[Candidate]]: ...

    def candidates(
        self,
        sentences: str | Sequence[str],
        *,
        nbest: int = 1,
        beam: int | None = None,
        precision: str | None = None,
        length_penalty: float | None = None,
        beam_stop: str | None = None,
        names: Sequence[str] | None = None,
        warn: bool = True,
    ) -> list[Candidate] | list[list[Candidate]]:
        """The ``nbest`` best translations of each sentence as scored `Candidate` s, best first.

        Even one candidate comes with its ids, ``score`` (what beam search ranks by) and
        ``log_prob``. ``beam`` None is the checkpoint's search, widened to ``nbest`` beams;
        a ``beam`` below ``nbest`` is a `SettingError`. Each sentence is searched alone; a
        blank one gets no candidates; one too long is named as :meth:`translate` names it.
        ``warn``: log how many best candidates the search's length limit cut (their ``cut``).
        """
        texts = texts_of(sentences, "sentences")
        warn = check_bool("warn", warn)  # "no" is a true string
        model, decode = self.decoding(beam, nbest, precision, length_penalty, beam_stop)
        names = ["sentence"] if isinstance(sentences, str) and names is None else sentence_names(names, len(texts))
        # Searched one by one, said once: a cut translation of each sentence is counted in one warning.
        results = [
            translate_nbest(model, self.tokenizers, text, decode, name, warn=False) if text.strip() else []
            for text, name in zip(texts, names)
        ]
        if warn:
            warn_cut(results, names)
        return results[0] if isinstance(sentences, str) else results

    @overload
    def best(  # type: ignore[overload-overlap]  # a str is a Sequence[str]; it matches first
        self,
        sentences: str,
        *,
        batch_size: int = ...,
        names: Sequence[str] | None = ...,
        **search: Unpack[SearchKeywords],
    ) -> Candidate | None: ...

    @overload
    def best(
        self,
        sentences: Sequence[str],
        *,
        batch_size: int = ...,
        names: Sequence[str] | None = ...,
        **search: Unpack[SearchKeywords],
    ) -> list[Candidate | None]: ...

    def best(
        self,
        sentences: str | Sequence[str],
        *,
        beam: int | None = None,
        precision: str | None = None,
        length_penalty: float | None = None,
        beam_stop: str | None = None,
        batch_size: int = 64,
        names: Sequence[str] | None = None,
    ) -> Candidate | None | list[Candidate | None]:
        """Each sentence's translation as :meth:`translate` finds it (batched), a `Candidate` (None: a blank one).

        Nothing is logged: its ``cut`` says where the search's length limit ended a translation, for a
        caller that says so once for many calls (the command, a part at a time).
        """
        texts = texts_of(sentences, "sentences")
        model, decode = self.decoding(beam, 1, precision, length_penalty, beam_stop)
        found = best_translations(model, self.tokenizers, texts, decode, check_batch_size(batch_size), names)
        return found[0] if isinstance(sentences, str) else found

    def _plotted(self, sentence: object, name: str | None) -> str:
        text = text_of(sentence, "sentence")  # only the Python API gives other than a str: named by its keyword
        if not text.strip():
            raise ValueError(f"{name or 'sentence'}: expected a non-empty sentence to plot, got an empty one")
        return text

    def _written(self, model: DecodedModel, decode: DecodeConfig, sentence: str, name: str | None) -> Written:
        best = translate_nbest(model, self.tokenizers, sentence, decode, name or "sentence")[0]
        source_ids = self.tokenizers.source.encode(sentence)
        source_labels = token_labels(self.tokenizers.source, source_ids)
        return source_ids, best.ids, source_labels, token_labels(self.tokenizers.target, best.ids), ""


MAX_BEAM_SIZE = 8  # the n-best list the page shows; larger beams add time, not insight
WEIGHT_DECIMALS = 4  # attention weights sent to the page (a heat-map needs no more)


@dataclass(frozen=True)
class TranslateRequest:
    """``POST /api/translate``: a sentence and the search that translates it."""

    text: str
    strategy: Literal["greedy", "beam"] = "beam"
    # Given with greedy search it would be ignored, so it is refused there (a 422 naming it).
    beam_size: int = field(
        default=5,
        metadata={
            "ge": 1,
            "le": MAX_BEAM_SIZE,
            "description": "beam search only; also the n-best length",
            ONLY_WHEN: {"strategy": "beam"},
        },
    )


@dataclass(frozen=True)
class AttentionRequest:
    """``POST /api/translation/attention``: a sentence and one of its translations' ids."""

    text: str
    target_ids: list[int] = field(
        metadata={"max_length": 1024, "description": "a candidate's ids, from /api/translate"}
    )


class TranslationHandler(Seq2SeqHandler):
    """The translation pane over a `Translator`: the n-best translations of a sentence and their cross-attention."""

    predictor: Translator

    def describe(self) -> dict[str, Any]:
        decode = self.predictor.config.decode
        return {**super().describe(), "strategy": decode.strategy, "beam_size": min(decode.beam_size, MAX_BEAM_SIZE)}

    def tokenize(self, text: str) -> list[str]:
        """The subword tokens the model reads for ``text`` (for the masks view)."""
        source = self.predictor.tokenizers.source
        return token_labels(source, source.encode(text))

    def translate(self, request: TranslateRequest) -> dict[str, Any]:
        """The n-best list (one line for greedy) and the best candidate's cross-attention."""
        # The request's search as it asks, even beam search with one beam (the API's beam=1 is greedy).
        size = request.beam_size if request.strategy == "beam" else 1
        decode = dataclasses.replace(self._decode, strategy=request.strategy, beam_size=size, num_return=size)
        # Named as the request's field: "sentence" is no field of the API.
        candidates = translate_nbest(self._model, self.predictor.tokenizers, request.text, decode, "text")
        target = self.predictor.tokenizers.target
        return {
            "candidates": [
                {**dataclasses.asdict(candidate), "tokens": token_labels(target, candidate.ids)}
                for candidate in candidates
            ],
            "attention": self._attention(request.text, candidates[0].ids),
        }

    def attention(self, request: AttentionRequest) -> dict[str, Any]:
        """The cross-attention of any output (e.g. the n-best line the user picked)."""
        vocab_size = self.predictor.tokenizers.target.vocab_size
        outside = [token_id for token_id in request.target_ids if not 0 <= token_id < vocab_size]
        if outside:
            raise ValueError(f"target_ids: expected ids in [0, {vocab_size}), got {outside[:5]}")
        return self._attention(request.text, request.target_ids)

    def _attention(self, text: str, target_ids: Sequence[int]) -> dict[str, Any]:
        tokenizers, limit = self.predictor.tokenizers, self.predictor.model.max_len
        source_ids = tokenizers.source.encode(text)
        if len(source_ids) > limit:
            raise ValueError(f"text: expected at most {limit} tokens (the model's max_len), got {len(source_ids)}")
        # The decoder reads <bos> before the ids: one position of max_len is its.
        if len(target_ids) + 1 > limit:
            raise ValueError(
                f"target_ids: expected at most {limit - 1} ids (the model's max_len {limit}, less the <bos> the "
                f"decoder reads first), got {len(target_ids)}"
            )
        weights = cross_attention(self._model, source_ids, target_ids)
        return {
            "source_tokens": token_labels(tokenizers.source, source_ids),
            # Row t is the query that chose output token t; the last row chose <eos>.
            "target_tokens": [*token_labels(tokenizers.target, target_ids), "<eos>"],
            "weights": weights.float().round(decimals=WEIGHT_DECIMALS).tolist(),  # [N, H, T, S]
        }


SERVING = Serving(
    handler=TranslationHandler,
    endpoints=(
        Endpoint("/api/translate", TranslateRequest, TranslationHandler.translate),
        Endpoint("/api/translation/attention", AttentionRequest, TranslationHandler.attention),
    ),
)


NBEST = TaskOption(
    "--nbest",
    "print the K best translations of each sentence, one a line, tab-separated: the sentence's number "
    "(from 1), the rank (from 1), the score (log-probability / GNMT length penalty), the translation "
    "(beam search with at least K beams; default beam: max(K, the checkpoint's)); a blank sentence gets no line",
    int,
    metavar="K",
    bounds=(1, MAX_SEARCH_BEAMS),
)


ENSEMBLE = TaskOption(
    "--ensemble",
    "translate with this checkpoint (or run folder) too, averaging the models' next-token probabilities; "
    "repeatable; every model must have the --checkpoint's vocabulary and languages",
    metavar="CHECKPOINT",
    repeatable=True,
)


def with_ensemble(translator: Translator, options: Mapping[str, Any]) -> Translator:
    """The translator ``translate`` answers and draws with: ``--ensemble``'s checkpoints decoded beside the
    checkpoint's, and without ``--beam`` its search as wide as ``--nbest``'s list."""
    members = options.get(ENSEMBLE.flag)
    if members:
        translator = translator.ensembled(members, ENSEMBLE.flag)
    nbest = options.get(NBEST.flag)
    if nbest is None or nbest == 1 or options.get(BEAM.flag) is not None:
        return translator
    # The list widens the checkpoint's beam to nbest; so must the search --plot-attention draws,
    # else the heat map shows another translation than the list's first.
    decode = translator.config.decode
    width = max(nbest, decode.beam_size if decode.strategy == "beam" else 1)
    config = dataclasses.replace(
        translator.config, decode=dataclasses.replace(decode, strategy="beam", beam_size=width)
    )
    device = next(translator.model.parameters()).device
    return Translator(translator.model, translator.tokenizers, config, device)


def answer(translator: Translator, sentences: list[str], options: Mapping[str, Any]) -> Answers:
    """``transformer-lab translate``: one translation a line (even an empty one), or ``--nbest``'s ranked lines."""
    settings = search_keywords(options)
    names = sentence_names(options.get(INPUT_NAMES), len(sentences))  # a sentence too long: its file and line
    nbest = options.get(NBEST.flag)
    # A translation cut at the search's length limit is counted here and said once for the whole input
    # (`Answers.cut`), not once a part.
    if nbest is not None:
        # A blank sentence has no candidates, so no line; the numbers show the gap.
        found = translator.candidates(sentences, nbest=nbest, names=names, warn=False, **settings)
        lines = [
            f"{number}\t{rank}\t{candidate.score:.4f}\t{one_line(candidate.text)}"
            for number, candidates in enumerate(found, start=options.get(INPUTS_BEFORE, 0) + 1)
            for rank, candidate in enumerate(candidates, start=1)
        ]
        answers = Answers(lines)
        answers.count_line_breaks([candidate.text for candidates in found for candidate in candidates], "translations")
        answers.count_cut([candidates[0] if candidates else None for candidates in found], names)
        return answers
    best = translator.best(sentences, names=names, **settings)
    translations = [candidate.text if candidate else "" for candidate in best]
    decode = translator.config.decode
    width = settings["beam"] or (decode.beam_size if decode.strategy == "beam" else 1)  # the search that ran
    notes = [
        f"{input_name(options, number - 1)}: {_why_empty(sentence, width)}"
        for number, (sentence, translated) in enumerate(zip(sentences, translations), start=1)
        if not translated
    ]
    answers = Answers([one_line(text) for text in translations], notes)  # line i of the output stays sentence i's
    answers.count_line_breaks(translations, "translations")
    answers.count_cut(best, names)
    return answers


def check(translator: Translator, sentences: list[str], options: Mapping[str, Any]) -> None:
    """Refuse, before any is translated, the first sentence `answer` would stop at (too long, or unreadable)."""
    check_sentences(translator.model, translator.tokenizers, sentences, options[INPUT_NAMES])


def _why_empty(sentence: str, beam: int) -> str:
    if not sentence.strip():
        return "the sentence is blank, so its translation is the empty line"
    # The model chose <eos> first: typical of a model trained briefly, not a failure of the command.
    # A wider search may find a longer one; advised only where the search was narrower.
    wider = ", or try --beam 5" if beam < 5 else ""
    return f"the translation is empty (the model ended it at once: it may need more training{wider})"


COMMAND = PredictCommand(
    name="translate",
    help="translate sentences with a translation checkpoint",
    inputs="sentences",
    verb="translate",
    answer=answer,
    options=(*DECODE_OPTIONS, NBEST, ENSEMBLE),
    plots_attention=True,
    opened=with_ensemble,
    check=check,
)
