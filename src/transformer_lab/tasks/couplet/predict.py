"""Writing lower lines with a trained model: the rules decoding keeps, their options, re-ranking, the `CoupletWriter`.

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
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence, overload

import torch

from transformer_lab.data import BOS_ID, EOS_ID, NUM_SPECIAL_TOKENS, PAD_ID, UNK_ID, Vocabulary
from transformer_lab.data.chinese import is_punctuation, tone_class
from transformer_lab.data.couplet import split_characters
from transformer_lab.decoding import DecodeConfig
from transformer_lab.decoding.config import MAX_BEAM_SIZE
from transformer_lab.decoding.couplet_constraints import MAX_PENALTY_NATS, CoupletConstraints
from transformer_lab.decoding.sources import Candidate, candidates_of, decode_sources
from transformer_lab.evaluation.couplet_antithesis import part_of_speech_agreement, rhythm_agreement
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.tasks.attention_maps import AttentionMap, last_layer_map
from transformer_lab.tasks.command import Answers, PredictCommand
from transformer_lab.tasks.evaluation import DECODE_OPTIONS, TaskOption
from transformer_lab.tasks.predictor import Seq2SeqPredictor, is_int, search_keywords, text_of, texts_of
from transformer_lab.tasks.task import Endpoint, Serving

_LATIN_LETTERS = re.compile(r"[A-Za-zＡ-Ｚａ-ｚ]")


@dataclass(frozen=True)
class CoupletConstraintConfig:
    """The couplet rules decoding enforces (see decoding/couplet_constraints.py)."""

    punctuation_mode: str = "copy"  # "copy" the upper line's marks, or "any" punctuation there
    # Repeat where the upper line repeats and only there: all 4,000 test references do.
    mirror_repetition: bool = True
    # No character of the upper line in the lower line: none of the 4,000 test references has one.
    avoid_source_characters: bool = True
    # Nats taken from oblique-tone characters at the last position: 97.9 % of the test
    # references end on a level tone, 93.9 % of train_couplet_machine's lower lines.
    oblique_final_penalty: float = 4.0
    # Nats taken at each position from characters of the upper character's tone class
    # (tone opposition, 平仄相对); 0 = off. 0.25: on validation, the smallest setting that lifts
    # tone opposition past the test references' rate at no BLEU cost (docs/results.md#couplet-antithesis).
    tone_opposition_penalty: float = 0.25
    # Beam search only (greedy search has one candidate): its candidates are re-ranked by
    # their score plus these nats per unit of part-of-speech / rhythm agreement with the
    # upper line (jieba, as evaluation/couplet_antithesis.py scores them); 0 = off. See
    # rerank_by_antithesis. On validation rhythm 0.5 raised rhythm agreement within BLEU's noise;
    # parts of speech cost BLEU and bought nothing (docs/results.md#couplet-antithesis).
    part_of_speech_rerank: float = 0.0
    rhythm_rerank: float = 0.5

    def __post_init__(self) -> None:
        for name in ("oblique_final_penalty", "tone_opposition_penalty", "part_of_speech_rerank", "rhythm_rerank"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_PENALTY_NATS:
                raise ValueError(f"{name}: expected a float in [0, {MAX_PENALTY_NATS:g}] (nats), got {value!r}")

    @property
    def reranks(self) -> bool:
        """Whether beam search's candidates are re-ranked by antithesis."""
        return self.part_of_speech_rerank > 0 or self.rhythm_rerank > 0


def build_constraints(vocabulary: Vocabulary, config: CoupletConstraintConfig) -> CoupletConstraints:
    """The decoding constraints over this vocabulary's punctuation and level-tone characters."""
    tokens = vocabulary.tokens
    special = set(range(NUM_SPECIAL_TOKENS))
    punctuation = torch.tensor([index not in special and is_punctuation(token) for index, token in enumerate(tokens)])
    tone_classes = [None if index in special else tone_class(token) for index, token in enumerate(tokens)]
    level = torch.tensor([tone == "level" for tone in tone_classes])  # [V]
    oblique = torch.tensor([tone == "oblique" for tone in tone_classes])  # [V]
    return CoupletConstraints(
        punctuation,
        eos_id=EOS_ID,
        pad_id=PAD_ID,
        forbidden_ids=(PAD_ID, BOS_ID, UNK_ID),
        punctuation_mode=config.punctuation_mode,
        mirror_repetition=config.mirror_repetition,
        avoid_source_characters=config.avoid_source_characters,
        level_tone_mask=level,
        oblique_final_penalty=config.oblique_final_penalty,
        oblique_tone_mask=oblique,
        tone_opposition_penalty=config.tone_opposition_penalty,
    )


@dataclass(frozen=True)
class CoupletResult:
    """The answer to one upper line: candidates best first, or `error` saying why there are none.

    `note` names characters the vocabulary does not know (they were read as <unk>).
    """

    upper: str
    candidates: list[Candidate]
    error: str | None = None
    note: str | None = None


def _printable(characters: Sequence[str]) -> str:
    """The characters as text a terminal shows as they are: control, format and zero-width ones escaped (\\u200b)."""
    return "".join(character if character.isprintable() else f"\\u{ord(character):04x}" for character in characters)


def check_upper_line(upper: str, vocabulary: Vocabulary, max_len: int) -> tuple[str | None, str | None]:
    """(error, note) for one upper line (already without spaces); both None when it is fine."""
    if not upper:
        return "empty upper line: expected Chinese characters, got nothing", None
    surrogate = next((index for index, character in enumerate(upper) if "\ud800" <= character <= "\udfff"), None)
    if surrogate is not None:
        # Undecodable input bytes smuggled in by surrogateescape: no character to answer, and
        # no UTF-8 form to print.
        return (
            f"upper line has the lone surrogate U+{ord(upper[surrogate]):04X} at character {surrogate}: "
            "expected valid Unicode text (undecodable input bytes?)",
            None,
        )
    latin = sorted(set(_LATIN_LETTERS.findall(upper)))
    if latin:
        return (
            f"upper line {upper!r} contains Latin letters {''.join(latin)!r}: expected a line of Chinese characters",
            None,
        )
    if len(upper) >= max_len:
        return f"upper line of {len(upper)} characters: expected at most {max_len - 1} (the model's max_len - 1)", None
    if all(is_punctuation(character) for character in upper):
        return f"upper line {upper!r} is only punctuation: expected Chinese characters", None
    unseen = sorted({character for character in upper if character not in vocabulary})
    if unseen:
        return None, f"characters never seen in training, read as <unk>: {_printable(unseen)}"
    return None, None


def _punctuation_stand_in(vocabulary: Vocabulary) -> int | None:
    """The id that an unseen punctuation mark of an upper line is read as: '，' if known, else any known mark.

    Read as <unk> the mark would count as a character position, and the lower line would
    get a character under it.
    """
    if "，" in vocabulary:
        return vocabulary.token_to_id("，")
    marks = [
        index for index, token in enumerate(vocabulary.tokens) if index >= NUM_SPECIAL_TOKENS and is_punctuation(token)
    ]
    return marks[0] if marks else None


def _encode_upper(upper: str, vocabulary: Vocabulary, punctuation_stand_in: int | None) -> list[int]:
    ids = vocabulary.encode(list(upper))
    if punctuation_stand_in is None:
        return ids
    return [
        punctuation_stand_in if token_id == UNK_ID and is_punctuation(character) else token_id
        for character, token_id in zip(upper, ids)
    ]


def _restore_marks(upper: str, lower: list[str], config: CoupletConstraintConfig) -> str:
    """In "copy" mode, the upper line's own marks under its marks (an unseen mark was decoded as a stand-in)."""
    if config.punctuation_mode != "copy" or len(lower) != len(upper):
        return "".join(lower)
    return "".join(mark if is_punctuation(mark) else character for mark, character in zip(upper, lower))


def generate(
    model: Seq2SeqTransformer,
    vocabulary: Vocabulary,
    uppers: Sequence[str],
    decode_config: DecodeConfig,
    constraint_config: CoupletConstraintConfig,
    *,
    num_candidates: int = 1,
    batch_size: int = 64,
) -> list[CoupletResult]:
    """Write lower lines for `uppers` (batched by length); spaces in the input are ignored.

    A line that cannot be answered (empty, Latin letters, a lone surrogate, longer than
    the model's positional table) gets a result with `error` set and no candidates; the others are
    decoded. `num_candidates` > 1 needs beam search with at least that many beams.
    """
    if num_candidates < 1:
        raise ValueError(f"num_candidates must be >= 1, got {num_candidates}")
    if num_candidates > 1:
        if decode_config.strategy != "beam" or decode_config.beam_size < num_candidates:
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
    checks = [check_upper_line(line, vocabulary, model.max_len) for line in lines]
    results: list[CoupletResult | None] = [
        CoupletResult(line, [], error=error) if error else None for line, (error, _) in zip(lines, checks)
    ]
    punctuation_stand_in = _punctuation_stand_in(vocabulary)
    encoded = [
        _encode_upper(line, vocabulary, punctuation_stand_in) if result is None else []
        for line, result in zip(lines, results)
    ]
    found = decode_sources(
        model,
        encoded,
        decode_config,
        logits_processor=build_constraints(vocabulary, constraint_config),
        batch_size=batch_size,
    )
    for index, hypotheses in enumerate(found):
        if results[index] is None:

            def to_text(ids: list[int], upper: str = lines[index]) -> str:
                return _restore_marks(upper, vocabulary.decode(ids), constraint_config)

            candidates = candidates_of(hypotheses, to_text)
            if reranks:
                candidates = rerank_by_antithesis(lines[index], candidates, constraint_config)[:num_candidates]
            results[index] = CoupletResult(lines[index], candidates, note=checks[index][1])
    return [result for result in results if result is not None]


def rerank_by_antithesis(
    upper: str, candidates: Sequence[Candidate], config: CoupletConstraintConfig
) -> list[Candidate]:
    """``candidates`` best first by score + the config's nats x part-of-speech and rhythm agreement with ``upper``.

    The agreements are the per-pair rules of ``evaluation/couplet_antithesis.py`` (jieba),
    which decoding cannot see character by character (a word's tag and length are known
    only once the line is complete), so they choose among finished lines. A candidate keeps
    its own ``score``; ties keep the search's order.
    """

    def ranked(candidate: Candidate) -> float:
        bonus = 0.0
        if config.part_of_speech_rerank > 0:
            bonus += config.part_of_speech_rerank * part_of_speech_agreement(upper, candidate.text)
        if config.rhythm_rerank > 0:
            bonus += config.rhythm_rerank * rhythm_agreement(upper, candidate.text)
        return candidate.score + bonus

    return sorted(candidates, key=ranked, reverse=True)


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


def with_constraint_options(config: CoupletConstraintConfig, values: Mapping[str, Any]) -> CoupletConstraintConfig:
    """``config`` (a checkpoint's constraints) with the rule options set among ``values`` (flag -> value as given).

    A switch is set by True; a value option by any value but None.
    """
    changes: dict[str, Any] = {}
    for name, option in _CONSTRAINT_OPTIONS.items():
        value = values.get(option.flag)
        if option.kind is bool and value is True:
            changes[name] = False
        elif option.kind is not bool and value is not None:
            if not 0 <= value <= MAX_PENALTY_NATS:  # named as typed, before the config names its field
                raise ValueError(f"{option.flag}: expected a float in [0, {MAX_PENALTY_NATS:g}] (nats), got {value!r}")
            changes[name] = value
    return dataclasses.replace(config, **changes)


class CoupletWriter(Seq2SeqPredictor):
    """A couplet model (对联) on a device, ready to answer upper lines with lower lines.

    Built from what ``train.load`` rebuilds; ``transformer_lab.api.CoupletWriter`` opens one
    from a checkpoint. ``write`` applies the checkpoint's decoding and form constraints (same
    length, punctuation in place, tones where the checkpoint asks for them), as the
    ``couplet`` command does. Attributes: ``model``, ``vocabulary``, ``config`` (its
    ``constraints`` are the rules ``write`` applies unless given others).
    """

    def __init__(
        self, model: Seq2SeqTransformer, vocabulary: Vocabulary, config: Any, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(model, config.decode, device)
        self.vocabulary = vocabulary
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
        lines = texts_of(uppers, "uppers")
        if not is_int(num_candidates) or num_candidates < 1:
            raise ValueError(f"num_candidates: expected an int >= 1, got {num_candidates!r}")
        if constraints is not None and not isinstance(constraints, CoupletConstraintConfig):
            raise ValueError(
                f"constraints: expected a CoupletConstraintConfig or None, got {type(constraints).__name__}"
            )
        model, decode = self.decoding(beam, 1, precision, length_penalty, beam_stop)
        if num_candidates > 1 and beam is None and decode.strategy == "beam":
            decode = dataclasses.replace(decode, beam_size=max(decode.beam_size, num_candidates))
        rules = self.config.constraints if constraints is None else constraints
        results = generate(model, self.vocabulary, lines, decode, rules, num_candidates=num_candidates)
        return results[0] if isinstance(uppers, str) else results

    def attention_map(
        self,
        upper: str,
        *,
        beam: int | None = None,
        precision: str | None = None,
        length_penalty: float | None = None,
        beam_stop: str | None = None,
    ) -> AttentionMap:
        """Write ``upper``'s best lower line, then read its last decoder layer's cross-attention (mean of heads).

        The columns are the upper line's characters, the rows the ids the model wrote (under
        the checkpoint's rules); a line `write` refuses is a ValueError with its reason.
        """
        result = self.write(
            text_of(upper, "upper"), beam=beam, precision=precision, length_penalty=length_penalty, beam_stop=beam_stop
        )
        if result.error:
            raise ValueError(f"upper: {result.error}")
        model, _ = self.decoding(beam, 1, precision, length_penalty, beam_stop)
        source_ids = _encode_upper(result.upper, self.vocabulary, _punctuation_stand_in(self.vocabulary))
        target_ids = result.candidates[0].ids
        written = [self.vocabulary.tokens[token_id] for token_id in target_ids]
        return last_layer_map(model, source_ids, target_ids, list(result.upper), written, title="couplet: ")


MAX_LOWER_LINES = 8


@dataclass(frozen=True)
class CoupletRequest:
    """``POST /api/couplet``: an upper line and how many lower lines to write."""

    text: str
    count: int = dataclasses.field(
        default=5,
        metadata={"ge": 1, "le": MAX_LOWER_LINES, "description": "lower lines (the beam is as wide)"},
    )


class CoupletHandler:
    """The couplet pane over a `CoupletWriter`: several lower lines, with scores and the form checks."""

    def __init__(self, predictor: CoupletWriter) -> None:
        self.predictor = predictor
        # The model copy the checkpoint's decoding runs (made once) and that decoding, its precision resolved.
        self._model, self._decode = predictor.decoding()

    def describe(self) -> dict[str, Any]:
        config = self.predictor.config
        return {
            "layers": config.model.num_decoder_layers,
            "heads": config.model.nhead,
            "punctuation": config.constraints.punctuation_mode,
        }

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
                    "score": candidate.score,
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


def answer(writer: CoupletWriter, lines: list[str], options: Mapping[str, Any]) -> Answers:
    """``transformer-lab couplet``: a lower line per upper line, or each upper line and its ranked lower lines."""
    count = options.get(NUM_CANDIDATES.flag, 1)
    constraints = with_constraint_options(writer.config.constraints, options)
    results = writer.write(lines, num_candidates=count, constraints=constraints, **search_keywords(options))
    answers = Answers(lines=[])
    for number, result in enumerate(results, start=1):
        if result.error:
            answers.refused += 1
        if result.error or result.note:
            answers.notes.append(f"line {number}: {result.error or result.note}")
        if count == 1:
            answers.lines.append(result.candidates[0].text if result.candidates else "")
            continue
        answers.lines.append(result.upper)
        answers.lines.extend(
            f"  {rank}. {candidate.text}  ({candidate.score:.2f})"
            for rank, candidate in enumerate(result.candidates, 1)
        )
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
)
