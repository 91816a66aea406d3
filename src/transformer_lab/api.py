"""The Python API: a checkpoint as an object that translates, classifies or writes couplets.

    from transformer_lab import Translator
    translator = Translator("runs/de-en")            # a checkpoint folder, or a run folder (its best/)
    translator.translate(["Ein Hund läuft.", "Zwei Männer."], beam=5)
    translator.translate("Ein Hund läuft.", nbest=3)  # [Candidate(text, ids, score, log_prob), ...]
    translator.candidates("Ein Hund läuft.")          # the best one as a Candidate, with its score
    translator.plot_attention("Ein Hund läuft.", "attention.png")

    from transformer_lab import Classifier
    Classifier("runs/news").classify(["Stocks rallied after the Fed cut rates"])[0].label_name

    from transformer_lab import CoupletWriter
    CoupletWriter("runs/couplet").write("晚风摇树树还挺").candidates[0].text

Each call batches its texts by length and uses the library's own functions
(``tasks.translation``, ``tasks.classification``, ``tasks.couplet``); the settings not given
are the checkpoint's (its ``decode`` section, its precision). A single str gives a single
result, a list a list. ``device=`` (default "cpu") places the model: "auto" (CUDA where
present, else the CPU), "cpu", "cuda", "cuda:N" or a ``torch.device``. The ``translate``,
``classify`` and ``couplet`` commands are these objects behind a command line, so both
give the same outputs.

A setting out of range is a `SettingError`, a ValueError whose message names the keyword
argument; a front end can have it name its own option instead (the command line's ``--beam``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, overload

import torch

from transformer_lab.data import SubwordTokenizer, TokenizerPair, Vocabulary
from transformer_lab.decoding import DecodeConfig, decoding_model
from transformer_lab.decoding.search_settings import with_search
from transformer_lab.devices import resolve_device
from transformer_lab.hardware import resolve_inference_precision
from transformer_lab.models import Seq2SeqTransformer, TransformerClassifier
from transformer_lab.setting_error import SettingError
from transformer_lab.tasks.classification.predict import Prediction, predict_each
from transformer_lab.tasks.classification.train import load_classifier
from transformer_lab.tasks.couplet import train as couplet_train
from transformer_lab.tasks.couplet.predict import CoupletConstraintConfig, CoupletResult, generate
from transformer_lab.tasks.seq2seq import Candidate
from transformer_lab.tasks.translation.predict import translate_nbest, translate_sentences
from transformer_lab.tasks.translation.train import load_translator


def _texts(texts: str | Sequence[str], name: str) -> list[str]:
    if isinstance(texts, str):
        return [texts]
    texts = list(texts)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"{name}[{index}]: expected a str, got {type(text).__name__}")
    return texts


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def decode_settings(
    decode: DecodeConfig,
    beam: int | None = None,
    nbest: int = 1,
    precision: str | None = None,
    length_penalty: float | None = None,
    device: str | torch.device = "cpu",
    beam_stop: str | None = None,
) -> DecodeConfig:
    """``decode`` (a checkpoint's) with a search of ``beam`` (1: greedy) returning ``nbest``; None keeps a field.

    ``nbest`` > 1 needs beam search with at least as many beams: a ``beam`` below it is a
    `SettingError`; with ``beam`` None the beam is widened to ``nbest``. ``precision`` (one of
    ``hardware.INFERENCE_PRECISIONS``) is resolved on ``device`` as the commands resolve
    it; "int8" decodes in fp32 around an int8 copy of the model. ``length_penalty`` is
    beam search's GNMT alpha; ``beam_stop`` one of ``decoding.beam.BEAM_STOPS``.
    """
    # The one resolution of the call: the model copy (Translator._model) and decode() take its result.
    precision = resolve_inference_precision(precision, decode.precision, device)
    if not _is_int(nbest) or nbest < 1:
        raise SettingError("{nbest}: expected an int >= 1, got {given!r}", ("nbest",), given=nbest)
    if beam is not None:
        if not _is_int(beam):
            raise SettingError("{beam}: expected an int >= 1 (1 is greedy), got {given!r}", ("beam",), given=beam)
        if beam < 1:
            raise SettingError("{beam} must be >= 1, got {given}", ("beam",), given=beam)
        if beam < nbest:
            raise SettingError(
                "{nbest} {count}: expected {beam} of at least {count}, got {beam} {given}",
                ("nbest", "beam"),
                count=nbest,
                given=beam,
            )
    # The search, its penalty, stop rule and precision as every command applies them; DecodeConfig checks each value.
    decode = with_search(decode, beam=beam, length_penalty=length_penalty, beam_stop=beam_stop, precision=precision)
    if nbest > 1:
        beam_size = max(nbest, decode.beam_size if decode.strategy == "beam" else 1)
        decode = dataclasses.replace(decode, strategy="beam", beam_size=beam_size)
    return dataclasses.replace(decode, num_return=nbest)


def _model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


class _Seq2SeqCheckpoint:
    """What `Translator` and `CoupletWriter` share: the model, its decoding settings and its int8 copy."""

    def __init__(self, model: Seq2SeqTransformer, decode: DecodeConfig, device: str | torch.device) -> None:
        self.model: Seq2SeqTransformer = model.to(device).eval()
        self._decode = decode  # the checkpoint's
        self._int8: Seq2SeqTransformer | None = None

    def decode_config(
        self,
        beam: int | None = None,
        nbest: int = 1,
        precision: str | None = None,
        length_penalty: float | None = None,
        beam_stop: str | None = None,
    ) -> DecodeConfig:
        """The checkpoint's decoding with these settings (None keeps the checkpoint's); see `decode_settings`."""
        device = _model_device(self.model)
        return decode_settings(self._decode, beam, nbest, precision, length_penalty, device, beam_stop)

    def _decoding(
        self,
        beam: int | None,
        nbest: int,
        precision: str | None,
        length_penalty: float | None,
        beam_stop: str | None,
    ) -> tuple[Seq2SeqTransformer, DecodeConfig]:
        """The model to decode with and its decoding, ``precision`` resolved once for both."""
        decode = self.decode_config(beam, nbest, precision, length_penalty, beam_stop)
        return self._model(decode.precision), decode

    def _model(self, precision: str) -> Seq2SeqTransformer:
        """The model to decode with at the resolved ``precision``; the int8 copy is made once."""
        if precision != "int8":
            return decoding_model(self.model, precision)
        if self._int8 is None:
            self._int8 = decoding_model(self.model, precision)
        return self._int8


class Translator(_Seq2SeqCheckpoint):
    """A translation checkpoint, ready to translate (see the module docstring).

    Attributes: ``model`` (in eval mode on ``device``), ``tokenizers``, ``config`` (the
    checkpoint's, whose ``decode`` section gives the defaults).
    """

    def __init__(self, checkpoint: str | os.PathLike[str], device: str | torch.device = "cpu") -> None:
        device = resolve_device(device)  # before the load: a device this machine lacks costs nothing
        model, tokenizers, config = load_translator(checkpoint)
        super().__init__(model, config.decode, device)
        self.tokenizers: TokenizerPair = tokenizers
        self.config = config

    @property
    def languages(self) -> tuple[str, str]:
        """(source language, target language) as recorded in the checkpoint."""
        return self.config.data.source_language, self.config.data.target_language

    @overload
    def translate(
        self,
        sentences: str,
        *,
        beam: int | None = ...,
        nbest: int = ...,
        precision: str | None = ...,
        length_penalty: float | None = ...,
        beam_stop: str | None = ...,
        batch_size: int = ...,
    ) -> Any: ...

    @overload
    def translate(
        self,
        sentences: Sequence[str],
        *,
        beam: int | None = ...,
        nbest: int = ...,
        precision: str | None = ...,
        length_penalty: float | None = ...,
        beam_stop: str | None = ...,
        batch_size: int = ...,
    ) -> list[Any]: ...

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
    ) -> Any:
        """The translation of each sentence (``nbest`` 1: a str; more: :meth:`candidates`' list, best first).

        ``beam`` 1 is greedy search; ``precision`` "fp32", "bf16", "auto" (bf16 where this
        machine runs it fast) or "int8" (CPU); ``beam_stop`` "exact" or "finished". A blank
        sentence gives "" (no candidates); one longer than the model's positional table is a
        ValueError naming its index.
        """
        texts = _texts(sentences, "sentences")
        if nbest == 1:
            model, decode = self._decoding(beam, nbest, precision, length_penalty, beam_stop)
            results: list[Any] = translate_sentences(model, self.tokenizers, texts, decode, batch_size)
        else:
            results = self.candidates(
                texts, nbest=nbest, beam=beam, precision=precision, length_penalty=length_penalty, beam_stop=beam_stop
            )
        return results[0] if isinstance(sentences, str) else results

    @overload
    def candidates(  # type: ignore[overload-overlap]  # a str is a Sequence[str]; it matches first
        self,
        sentences: str,
        *,
        nbest: int = ...,
        beam: int | None = ...,
        precision: str | None = ...,
        length_penalty: float | None = ...,
        beam_stop: str | None = ...,
    ) -> list[Candidate]: ...

    @overload
    def candidates(
        self,
        sentences: Sequence[str],
        *,
        nbest: int = ...,
        beam: int | None = ...,
        precision: str | None = ...,
        length_penalty: float | None = ...,
        beam_stop: str | None = ...,
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
    ) -> list[Candidate] | list[list[Candidate]]:
        """The ``nbest`` best translations of each sentence as scored `Candidate` s, best first.

        Even one candidate comes with its ids, ``score`` (what beam search ranks by) and
        ``log_prob``. ``beam`` None is the checkpoint's search, widened to ``nbest`` beams;
        a ``beam`` below ``nbest`` is a `SettingError`. Each sentence is searched alone; a
        blank one gets no candidates.
        """
        texts = _texts(sentences, "sentences")
        model, decode = self._decoding(beam, nbest, precision, length_penalty, beam_stop)
        # A list's sentences are named by their index in errors, as translate() names them.
        names = ["sentence"] if isinstance(sentences, str) else [f"sentences[{index}]" for index in range(len(texts))]
        results = [
            translate_nbest(model, self.tokenizers, text, decode, name) if text.strip() else []
            for text, name in zip(texts, names)
        ]
        return results[0] if isinstance(sentences, str) else results

    def plot_attention(
        self,
        sentence: str,
        path: str | os.PathLike[str],
        *,
        beam: int | None = None,
        precision: str | None = None,
        length_penalty: float | None = None,
        beam_stop: str | None = None,
    ) -> Path:
        """Translate ``sentence`` and draw its last decoder layer's cross-attention (mean of heads) to ``path``.

        Returns the image file written (matplotlib picks the format from the suffix). The
        rows are the ids the model generated with these settings; a blank sentence is a
        ValueError.
        """
        from transformer_lab.lab.translation_attention import plot_translation_attention

        model, decode = self._decoding(beam, 1, precision, length_penalty, beam_stop)
        return plot_translation_attention(model, self.tokenizers, sentence, decode, path)


class Classifier:
    """A classification checkpoint, ready to classify (see the module docstring).

    Attributes: ``model`` (in eval mode on ``device``), ``tokenizer``, ``config``, and
    ``class_names`` in the model's order.
    """

    def __init__(self, checkpoint: str | os.PathLike[str], device: str | torch.device = "cpu") -> None:
        device = resolve_device(device)  # before the load: a device this machine lacks costs nothing
        model, tokenizer, config = load_classifier(checkpoint)
        self.model: TransformerClassifier = model.to(device).eval()
        self.tokenizer: SubwordTokenizer = tokenizer
        self.config = config
        self.class_names: tuple[str, ...] = tuple(config.class_names)

    @property
    def max_len(self) -> int:
        """The most subword tokens the model reads of one text (``truncate`` reads a longer one's first)."""
        return self.model.positional_encoding.max_len

    @overload
    def classify(  # type: ignore[overload-overlap]  # a str is a Sequence[str]; it matches first
        self, texts: str, *, precision: str | None = ..., truncate: bool = ...
    ) -> Prediction: ...

    @overload
    def classify(
        self, texts: Sequence[str], *, precision: str | None = ..., truncate: bool = ...
    ) -> list[Prediction]: ...

    def classify(
        self, texts: str | Sequence[str], *, precision: str | None = None, truncate: bool = False
    ) -> Prediction | list[Prediction]:
        """The `Prediction` of each text: its class, class name and every class's probability.

        ``precision`` "fp32", "bf16" or "auto" (None: "auto", as ``transformer-lab classify``,
        so both print the same probabilities); ``truncate`` reads only the
        first ``max_len`` tokens of a longer text (else it is a ValueError naming its index,
        as is a blank text; :meth:`classify_each` answers the others instead).
        """
        predictions = []
        results = self.classify_each(_texts(texts, "texts"), precision=precision, truncate=truncate)
        for index, result in enumerate(results):
            if isinstance(result, str):
                raise ValueError(f"texts[{index}]: {result}")
            predictions.append(result)
        return predictions[0] if isinstance(texts, str) else predictions

    def classify_each(
        self, texts: Sequence[str], *, precision: str | None = None, truncate: bool = False
    ) -> list[Prediction | str]:
        """Each text's `Prediction`, or the reason (a str) it cannot be classified; one bad text costs only itself.

        Refused: a blank text, and one longer than :attr:`max_len` subword tokens unless
        ``truncate``. ``precision`` as in :meth:`classify`.
        """
        resolved = resolve_inference_precision(precision, "auto", _model_device(self.model), int8=False)
        batch = _texts(texts, "texts")
        return predict_each(self.model, self.tokenizer, self.class_names, batch, truncate=truncate, precision=resolved)


class CoupletWriter(_Seq2SeqCheckpoint):
    """A couplet checkpoint (对联), ready to answer upper lines with lower lines.

    ``write`` applies the checkpoint's decoding and form constraints (same length,
    punctuation in place, tones where the checkpoint asks for them), as the ``couplet``
    command does. Attributes: ``model``, ``vocabulary``, ``config`` (its ``constraints``
    are the rules ``write`` applies unless given others).
    """

    def __init__(self, checkpoint: str | os.PathLike[str], device: str | torch.device = "cpu") -> None:
        device = resolve_device(device)  # before the load: a device this machine lacks costs nothing
        model, vocabulary, config = couplet_train.load(checkpoint)
        super().__init__(model, config.decode, device)
        self.vocabulary: Vocabulary = vocabulary
        self.config = config

    @overload
    def write(  # type: ignore[overload-overlap]  # a str is a Sequence[str]; it matches first
        self,
        uppers: str,
        *,
        beam: int | None = ...,
        num_candidates: int = ...,
        precision: str | None = ...,
        length_penalty: float | None = ...,
        beam_stop: str | None = ...,
        constraints: CoupletConstraintConfig | None = ...,
    ) -> CoupletResult: ...

    @overload
    def write(
        self,
        uppers: Sequence[str],
        *,
        beam: int | None = ...,
        num_candidates: int = ...,
        precision: str | None = ...,
        length_penalty: float | None = ...,
        beam_stop: str | None = ...,
        constraints: CoupletConstraintConfig | None = ...,
    ) -> list[CoupletResult]: ...

    def write(
        self,
        uppers: str | Sequence[str],
        *,
        beam: int | None = None,
        num_candidates: int = 1,
        precision: str | None = None,
        length_penalty: float | None = None,
        beam_stop: str | None = None,
        constraints: CoupletConstraintConfig | None = None,
    ) -> CoupletResult | list[CoupletResult]:
        """The `CoupletResult` of each upper line: its candidates best first, or ``error`` saying why there are none.

        A line the model cannot answer (empty, Latin letters, too long) gets ``error`` and no
        candidates, not an exception, so that one bad line does not cost the others.
        ``num_candidates`` > 1 needs beam search with at least that many beams: with ``beam``
        None a checkpoint that searches by beam gets them, a greedy one is a ValueError.
        ``constraints`` replaces the checkpoint's rules for this call, e.g.
        ``dataclasses.replace(writer.config.constraints, mirror_repetition=False)``.
        """
        lines = _texts(uppers, "uppers")
        model, decode = self._decoding(beam, 1, precision, length_penalty, beam_stop)
        if _is_int(num_candidates) and num_candidates > 1 and beam is None and decode.strategy == "beam":
            decode = dataclasses.replace(decode, beam_size=max(decode.beam_size, num_candidates))
        rules = self.config.constraints if constraints is None else constraints
        results = generate(model, self.vocabulary, lines, decode, rules, num_candidates=num_candidates)
        return results[0] if isinstance(uppers, str) else results


__all__ = [
    "Candidate",
    "Classifier",
    "CoupletResult",
    "CoupletWriter",
    "Prediction",
    "SettingError",
    "Translator",
    "decode_settings",
]
