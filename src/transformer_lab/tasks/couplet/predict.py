"""Writing lower lines with a trained model: the rule options, the `CoupletWriter`, its pane and its command.

`CoupletWriter` is the task's Python API object (``transformer_lab.api.CoupletWriter`` opens
one from a checkpoint); `CoupletHandler` answers the server's couplet pane with it, and
`COMMAND` is ``transformer-lab couplet``: with one candidate each answer is one line (to
stdout or ``--output``, aligned with the input); with ``--num-candidates K`` each upper line
is followed by its K lower lines and their scores. A line that cannot be answered (empty,
Latin letters, undecodable bytes, too long) gets an empty output line and a message on
stderr, and the exit code is 2 after the rest are answered.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence, overload

import torch

from transformer_lab.data import Vocabulary
from transformer_lab.data._checks import text_of, texts_of
from transformer_lab.data.chinese import is_punctuation
from transformer_lab.data.couplet import (
    check_upper_line,
    encode_upper,
    punctuation_stand_in,
    restore_marks,
    split_characters,
)
from transformer_lab.decoding import DecodeConfig
from transformer_lab.decoding.config import MAX_BEAM_SIZE
from transformer_lab.decoding.couplet_constraints import CoupletConstraintConfig, build_constraints, check_penalty
from transformer_lab.decoding.predictor import Seq2SeqHandler, Seq2SeqPredictor, Written
from transformer_lab.decoding.search_settings import SearchKeywords, check_candidate_count, with_beam
from transformer_lab.decoding.sources import Candidate, DecodedModel, candidates_of, decode_sources
from transformer_lab.evaluation.couplet_antithesis import ranking_score, rerank_by_antithesis
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.one_line import one_line
from transformer_lab.setting_error import SettingError
from transformer_lab.tasks.command import Answers, PredictCommand, input_name
from transformer_lab.tasks.evaluation import BEAM, DECODE_OPTIONS, TaskOption, search_keywords
from transformer_lab.tasks.task import Endpoint, Serving

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's from Python 3.11


@dataclass(frozen=True)
class CoupletResult:
    """The answer to one upper line: candidates best first, or `error` saying why there are none.

    `note` names characters the vocabulary does not know (they were read as <unk>).
    """

    upper: str
    candidates: list[Candidate]
    error: str | None = None
    note: str | None = None


def generate(
    model: DecodedModel,
    vocabulary: Vocabulary,
    uppers: Sequence[str],
    decode_config: DecodeConfig,
    constraint_config: CoupletConstraintConfig,
    *,
    num_candidates: int = 1,
) -> list[CoupletResult]:
    """Write lower lines for `uppers` (batched by length); spaces in the input are ignored.

    A line that cannot be answered (empty, Latin letters, a lone surrogate, longer than
    the model's positional table) gets a result with `error` set and no candidates; the others are
    decoded. `num_candidates` > 1 needs beam search with at least that many beams.
    """
    if num_candidates < 1:
        raise ValueError(f"num_candidates must be >= 1, got {num_candidates}")
    if num_candidates > 1 and (decode_config.strategy != "beam" or decode_config.beam_size < num_candidates):
        raise ValueError(
            f"num_candidates={num_candidates} needs beam search with at least as many beams, got "
            f"strategy {decode_config.strategy!r} with beam_size {decode_config.beam_size}"
        )
    # Re-ranking looks at every beam's hypothesis, then keeps num_candidates of them; greedy
    # search has one candidate, which no re-ranking can change.
    reranks = constraint_config.reranks and decode_config.strategy == "beam"
    returned = decode_config.beam_size if reranks else num_candidates
    decode_config = dataclasses.replace(decode_config, num_return=returned if decode_config.strategy == "beam" else 1)
    lines = [split_characters(upper) for upper in uppers]
    checks = [check_upper_line(line, vocabulary, model.max_len, upper) for line, upper in zip(lines, uppers)]
    results: list[CoupletResult | None] = [
        CoupletResult(line, [], error=error) if error else None for line, (error, _) in zip(lines, checks)
    ]
    stand_in = punctuation_stand_in(vocabulary)
    encoded = [
        encode_upper(line, vocabulary, stand_in) if result is None else [] for line, result in zip(lines, results)
    ]
    found = decode_sources(
        model, encoded, decode_config, logits_processor=build_constraints(vocabulary, constraint_config)
    )
    for index, hypotheses in enumerate(found):
        if results[index] is None:

            def to_text(ids: list[int], upper: str = lines[index]) -> str:
                return restore_marks(upper, vocabulary.decode(ids), constraint_config.punctuation_mode)

            candidates = candidates_of(hypotheses, to_text)
            if reranks:
                candidates = rerank_by_antithesis(lines[index], candidates, constraint_config)[:num_candidates]
            results[index] = CoupletResult(lines[index], candidates, note=checks[index][1])
    return [result for result in results if result is not None]


def answer_pairs(
    model: Seq2SeqTransformer,
    vocabulary: Vocabulary,
    pairs: Sequence[tuple[str, str]],
    decode_config: DecodeConfig,
    constraint_config: CoupletConstraintConfig,
) -> list[str]:
    """The best lower line for each upper line of `pairs`; a refused upper line is an error naming it."""
    results = generate(model, vocabulary, [upper for upper, _ in pairs], decode_config, constraint_config)
    refused = [(index, result.error) for index, result in enumerate(results) if result.error]
    if refused:
        index, error = refused[0]
        raise ValueError(f"pairs[{index}]: {error} ({len(refused)} upper line(s) refused)")
    return [result.candidates[0].text for result in results]


# Each constraint field -> the option of `couplet` and `evaluate couplet` that changes it in a checkpoint's
# constraints for one call (an option left out keeps the checkpoint's choice); a switch turns its rule off.
_CONSTRAINT_OPTIONS = {
    "mirror_repetition": TaskOption("--no-mirror-repetition", "do not force the upper line's repetition pattern", bool),
    "avoid_source_characters": TaskOption(
        "--allow-upper-characters", "let the lower line reuse the upper line's characters", bool
    ),
    "oblique_final_penalty": TaskOption(
        "--oblique-final-penalty", "nats taken from oblique-tone final characters (0 = off)", float
    ),
    "tone_opposition_penalty": TaskOption(
        "--tone-opposition-penalty",
        "nats taken, at each position, from characters of the upper character's tone class (0 = off)",
        float,
    ),
    "part_of_speech_rerank": TaskOption(
        "--part-of-speech-rerank",
        "beam search: re-rank its candidates, nats per unit of part-of-speech agreement (0 = off)",
        float,
    ),
    "rhythm_rerank": TaskOption(
        "--rhythm-rerank", "beam search: re-rank its candidates, nats per unit of rhythm agreement (0 = off)", float
    ),
}
CONSTRAINT_TASK_OPTIONS = tuple(_CONSTRAINT_OPTIONS.values())
_RERANK_FIELDS = ("part_of_speech_rerank", "rhythm_rerank")


def with_constraint_options(
    config: CoupletConstraintConfig, values: Mapping[str, Any], decode: DecodeConfig
) -> CoupletConstraintConfig:
    """``config`` (a checkpoint's constraints) with the rule options set among ``values`` (flag -> value as given).

    A switch is set by True; a value option by any value but None. A re-ranking weight given for
    a greedy search (``--beam 1``, or ``decode`` greedy and no ``--beam``) is refused: greedy
    search keeps one candidate, so the weight would change nothing.
    """
    changes: dict[str, Any] = {}
    for name, option in _CONSTRAINT_OPTIONS.items():
        value = values.get(option.flag)
        if option.kind is bool and value is True:
            changes[name] = False
        elif option.kind is not bool and value is not None:
            check_penalty(option.flag, value)  # named as typed, before the config names its field
            beam = values.get(BEAM.flag)
            if name in _RERANK_FIELDS and value and with_beam(decode, beam).strategy != "beam":
                search = "--beam 1" if beam is not None else "the checkpoint decodes greedily"
                raise ValueError(
                    f"{option.flag}: expected beam search, whose candidates it re-ranks, got a greedy search "
                    f"({search}), which keeps one candidate; give --beam N (N >= 2) or leave {option.flag} out"
                )
            changes[name] = value
    return dataclasses.replace(config, **changes)


def _check_no_new_rerank(rules: CoupletConstraintConfig, checkpoint: CoupletConstraintConfig, beam: object) -> None:
    """A `SettingError` where ``rules`` set a re-ranking weight other than the checkpoint's for a greedy search.

    Greedy search keeps one candidate, so the weight would change nothing, as ``--rhythm-rerank`` with
    ``--beam 1`` is refused on the command line; the checkpoint's own weight stays, as it decodes both ways.
    """
    for name in _RERANK_FIELDS:
        weight, own = getattr(rules, name), getattr(checkpoint, name)
        if weight and weight != own:
            search = "{beam} 1" if beam is not None else "the checkpoint's, no {beam} given"
            raise SettingError(
                f"constraints.{name}: expected beam search, whose candidates it re-ranks, got a greedy search "
                f"({search}), which keeps one candidate; give {{beam}} N (N >= 2) or keep the checkpoint's {own:g}",
                ("beam",),
            )


class CoupletWriter(Seq2SeqPredictor):
    """A couplet model (对联) on a device, ready to answer upper lines; ``vocabulary`` beside `Seq2SeqPredictor`'s.

    ``write`` applies the checkpoint's decoding and ``config.constraints`` (same length,
    punctuation in place, tones where the checkpoint asks for them), as the ``couplet`` command does.
    """

    def __init__(
        self, model: Seq2SeqTransformer, vocabulary: Vocabulary, config: Any, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(model, config, device)
        self.vocabulary = vocabulary

    @overload
    def write(  # type: ignore[overload-overlap]  # a str is a Sequence[str]; it matches first
        self,
        uppers: str,
        *,
        num_candidates: int = ...,
        constraints: CoupletConstraintConfig | None = ...,
        **search: Unpack[SearchKeywords],
    ) -> CoupletResult: ...

    @overload
    def write(
        self,
        uppers: Sequence[str],
        *,
        num_candidates: int = ...,
        constraints: CoupletConstraintConfig | None = ...,
        **search: Unpack[SearchKeywords],
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
        None a checkpoint that searches by beam gets them, a greedy one is a `SettingError`
        (as is a smaller ``beam``).
        ``constraints`` replaces the checkpoint's rules for this call, e.g.
        ``dataclasses.replace(writer.config.constraints, mirror_repetition=False)``.
        """
        lines = texts_of(uppers, "uppers")
        num_candidates = check_candidate_count(num_candidates, "num_candidates")
        if constraints is not None and not isinstance(constraints, CoupletConstraintConfig):
            raise ValueError(
                f"constraints: expected a CoupletConstraintConfig or None, got {type(constraints).__name__}"
            )
        model, decode = self.decoding(beam, 1, precision, length_penalty, beam_stop)
        if num_candidates > 1 and beam is None and decode.strategy == "beam":
            decode = dataclasses.replace(decode, beam_size=max(decode.beam_size, num_candidates))
        if num_candidates > 1 and (decode.strategy != "beam" or decode.beam_size < num_candidates):
            # A SettingError in this call's own names, so that a front end says its options
            # (--num-candidates, --beam), not the DecodeConfig fields generate() would name.
            given = "none (the checkpoint searches greedily)" if beam is None else "{beam} {given}"
            raise SettingError(
                "{num_candidates}: expected {beam} of at least {needed}, got " + given,
                ("num_candidates", "beam"),
                needed=num_candidates,
                given=beam,
            )
        rules = self.config.constraints if constraints is None else constraints
        if decode.strategy != "beam":
            _check_no_new_rerank(rules, self.config.constraints, beam)
        results = generate(model, self.vocabulary, lines, decode, rules, num_candidates=num_candidates)
        return results[0] if isinstance(uppers, str) else results

    def _plotted(self, upper: object, name: str | None) -> str:
        return text_of(upper, "upper")  # only the Python API gives other than a str: named by its keyword

    def _written(self, model: DecodedModel, decode: DecodeConfig, upper: str, name: str | None) -> Written:
        # As write() answers it, under the checkpoint's rules; the columns are the upper line's characters.
        (result,) = generate(model, self.vocabulary, [upper], decode, self.config.constraints)
        if result.error:
            raise ValueError(f"{name or 'upper'}: {result.error}")
        source_ids = encode_upper(result.upper, self.vocabulary, punctuation_stand_in(self.vocabulary))
        target_ids = result.candidates[0].ids
        written = [self.vocabulary.tokens[token_id] for token_id in target_ids]
        return source_ids, target_ids, list(result.upper), written, "couplet: "


MAX_LOWER_LINES = 8


@dataclass(frozen=True)
class CoupletRequest:
    """``POST /api/couplet``: an upper line and how many lower lines to write."""

    text: str
    count: int = dataclasses.field(
        default=5,
        metadata={"ge": 1, "le": MAX_LOWER_LINES, "description": "lower lines (the beam is as wide)"},
    )


class CoupletHandler(Seq2SeqHandler):
    """The couplet pane over a `CoupletWriter`: several lower lines, with scores and the form checks."""

    predictor: CoupletWriter

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "punctuation": self.predictor.config.constraints.punctuation_mode}

    def tokenize(self, text: str) -> list[str]:
        """One token per character, as the model reads an upper line (for the masks view)."""
        return list(split_characters(text))

    def write(self, request: CoupletRequest) -> dict[str, Any]:
        """The lower lines best first; each says whether its length and punctuation match the upper line."""
        # Beam search even for one line (the API's beam=1 would be greedy), as wide as the checkpoint's or more.
        decode = dataclasses.replace(
            self._decode, strategy="beam", beam_size=max(request.count, self._decode.beam_size)
        )
        vocabulary, rules = self.predictor.vocabulary, self.predictor.config.constraints
        (result,) = generate(self._model, vocabulary, [request.text], decode, rules, num_candidates=request.count)
        if result.error is not None:
            raise ValueError(f"text: {result.error}")
        marks = [is_punctuation(character) for character in result.upper]
        return {
            "upper": result.upper,
            "note": result.note,
            "candidates": [
                {
                    "text": candidate.text,
                    # The score that ranked it, as the couplet command prints it.
                    "score": ranking_score(result.upper, candidate, rules),
                    "length_matches": len(candidate.text) == len(result.upper),
                    "punctuation_matches": [is_punctuation(character) for character in candidate.text] == marks,
                }
                for candidate in result.candidates
            ],
        }


SERVING = Serving(handler=CoupletHandler, endpoints=(Endpoint("/api/couplet", CoupletRequest, CoupletHandler.write),))


OUTPUT = TaskOption("--output", "write the answers to this file instead of stdout", Path)
NUM_CANDIDATES = TaskOption(
    "--num-candidates",
    "lower lines per upper line, with scores (needs --beam >= it) (default 1)",
    int,
    bounds=(1, MAX_BEAM_SIZE),
)


def with_rules(writer: CoupletWriter, options: Mapping[str, Any]) -> CoupletWriter:
    """The writer ``couplet`` answers and draws with: the rule options as its rules, and without ``--beam`` its
    search as wide as ``--num-candidates``.

    So ``--plot-attention`` draws the lower line printed, not the one the checkpoint's own rules would write.
    """
    config = writer.config
    constraints = with_constraint_options(config.constraints, options, config.decode)
    decode = config.decode
    count = options.get(NUM_CANDIDATES.flag, 1)
    if count > 1 and options.get(BEAM.flag) is None and decode.strategy == "beam":
        decode = dataclasses.replace(decode, beam_size=max(decode.beam_size, count))
    config = dataclasses.replace(config, constraints=constraints, decode=decode)
    model = writer.model
    assert isinstance(model, Seq2SeqTransformer), type(model)  # a couplet writer decodes one model, no ensemble
    return CoupletWriter(model, writer.vocabulary, config, next(model.parameters()).device)


def answer(writer: CoupletWriter, lines: list[str], options: Mapping[str, Any]) -> Answers:
    """``transformer-lab couplet``: a lower line per upper line, or each upper line and its ranked lower lines.

    ``writer`` is :func:`with_rules`', whose rules are the options'.
    """
    count = options.get(NUM_CANDIDATES.flag, 1)
    constraints = writer.config.constraints
    results = writer.write(lines, num_candidates=count, **search_keywords(options))
    answers = Answers(lines=[])
    for number, result in enumerate(results, start=1):
        if result.error:
            answers.refused += 1
        if result.error or result.note:
            answers.notes.append(f"{input_name(options, number - 1)}: {result.error or result.note}")
        if count == 1:
            answers.lines.append(one_line(result.candidates[0].text) if result.candidates else "")
            continue
        answers.lines.append(result.upper)
        answers.lines.extend(
            f"  {rank}. {one_line(candidate.text)}  ({ranking_score(result.upper, candidate, constraints):.2f})"
            for rank, candidate in enumerate(result.candidates, 1)
        )
    answers.count_line_breaks([candidate.text for result in results for candidate in result.candidates], "lower lines")
    if OUTPUT.flag in options:
        answers.files[options[OUTPUT.flag]] = "".join(line + "\n" for line in answers.lines)
        answers.lines = []
    return answers


COMMAND = PredictCommand(
    name="couplet",
    help="write lower lines (下联) for upper lines (上联) with a couplet checkpoint",
    inputs="lines",
    verb="answer",
    answer=answer,
    options=(*DECODE_OPTIONS, OUTPUT, NUM_CANDIDATES, *CONSTRAINT_TASK_OPTIONS),
    plots_attention=True,
    opened=with_rules,
)
