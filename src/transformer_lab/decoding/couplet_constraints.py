"""The couplet form as a logits processor: length, punctuation, repetition, final tone.

A lower line (下联) answers its upper line (上联) position by position, so its form is
fixed by the upper line, which is the source row of each decoded row:

- length: exactly as many characters as the upper line; eos is forbidden before that
  length and is the only choice at it;
- punctuation: where the upper line has a punctuation mark the lower line has one too
  ("copy": the same mark; "any": any punctuation token), and nowhere else;
- never pad, bos or `<unk>` (or any other id in `forbidden_ids`);
- `mirror_repetition`: where the upper line repeats a character (positions i < j hold the
  same character), the lower line repeats its own character of position i at j; where the
  upper character at j appears nowhere earlier, the lower character at j must not repeat
  an earlier lower character either (punctuation aside);
- `avoid_source_characters`: the lower line uses no character of the upper line;
- `oblique_final_penalty`: at the last non-punctuation position, tokens that are not of a
  level tone (平) lose that many nats; oblique endings stay possible when the model is
  very sure, unlike a hard ban. It lowers scores only, as beam search's early stop needs.
- `tone_opposition_penalty`: at each position where the upper line has a Han character,
  tokens of the same tone class (level against level, oblique against oblique) lose that
  many nats, so that the lower line leans to the opposite tone (平仄相对) without being
  forced into it; characters of no known tone are left alone. Also a lowering only.

The length and punctuation rules are hard. The repetition and avoidance rules are
relaxed for a row where, with them, no token would be left (a tiny vocabulary, or an upper
line that uses most of it), so that decoding always produces a line of the right form.

The processor keeps no state between calls: everything is derived from the source and
the prefix of each row, so it stays correct when beam search reorders rows and drops
finished sentences (see `LogitsProcessor` in protocol.py).

Shape legend: N decoded rows, S source length, t prefix length (bos included), V vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import Tensor

from transformer_lab.data import BOS_ID, EOS_ID, NUM_SPECIAL_TOKENS, PAD_ID, UNK_ID, Vocabulary
from transformer_lab.data.chinese import is_punctuation, tone_class

PUNCTUATION_MODES = ("copy", "any")


def _check_rules(punctuation_mode: object, mirror_repetition: object, avoid_source_characters: object) -> None:
    """Refuse a rule switch that is no bool (``bool("no")`` is True) or an unknown punctuation mode."""
    if punctuation_mode not in PUNCTUATION_MODES:
        raise ValueError(f"punctuation_mode: expected one of {PUNCTUATION_MODES}, got {punctuation_mode!r}")
    for name, value in (("mirror_repetition", mirror_repetition), ("avoid_source_characters", avoid_source_characters)):
        if not isinstance(value, bool):
            raise ValueError(f"{name}: expected true or false, got {value!r}")


def _token_table(name: str, table: Tensor) -> Tensor:
    if not isinstance(table, Tensor) or table.dim() != 1 or table.dtype != torch.bool:
        raise ValueError(f"{name}: expected a 1-D BoolTensor[V], got {table!r:.80}")
    return table


# A penalty's ceiling: e^-100 already rules a token out, and far larger ones overflow the float32
# scores to -inf, where every hypothesis ties and the search returns none.
MAX_PENALTY_NATS = 100.0


def check_penalty(name: str, value: object) -> None:
    """Refuse a penalty (or re-ranking weight) ``value`` that is not a number of nats in [0, MAX_PENALTY_NATS]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_PENALTY_NATS:
        raise ValueError(f"{name}: expected a float in [0, {MAX_PENALTY_NATS:g}] (nats), got {value!r}")


def _check_tone_mask(name: str, table: Tensor | None, needed_by: str, vocab_size: int) -> None:
    if table is None:
        raise ValueError(f"{name}: expected a BoolTensor[V] when {needed_by} > 0, got None")
    _token_table(name, table)
    if table.numel() != vocab_size:
        raise ValueError(f"{name}: expected {vocab_size} entries like punctuation_mask, got {table.numel()}")


class CoupletConstraints:
    """A `LogitsProcessor` (reading source ids) that enforces the couplet form; see the module docstring.

    Args:
        punctuation_mask: BoolTensor[V], True for the punctuation tokens.
        eos_id, pad_id: the special ids of the model.
        forbidden_ids: ids never generated (pad, bos, unk).
        punctuation_mode: "copy" the upper line's mark, or allow "any" punctuation there.
        mirror_repetition: repeat where the upper line repeats, and only there.
        avoid_source_characters: forbid the upper line's characters in the lower line.
        level_tone_mask: BoolTensor[V], True for characters of a level tone; needed when
            `oblique_final_penalty` > 0.
        oblique_final_penalty: nats taken from non-level tokens at the last
            non-punctuation position (0 = off; must be finite and >= 0).
        oblique_tone_mask: BoolTensor[V], True for characters of an oblique tone; needed
            with `level_tone_mask` when `tone_opposition_penalty` > 0.
        tone_opposition_penalty: nats taken from tokens of the upper character's tone
            class at each position (0 = off; must be finite and >= 0).
    """

    reads_source_ids = True

    def __init__(
        self,
        punctuation_mask: Tensor,
        eos_id: int,
        pad_id: int,
        forbidden_ids: Iterable[int] = (),
        *,
        punctuation_mode: str = "copy",
        mirror_repetition: bool = False,
        avoid_source_characters: bool = False,
        level_tone_mask: Tensor | None = None,
        oblique_final_penalty: float = 0.0,
        oblique_tone_mask: Tensor | None = None,
        tone_opposition_penalty: float = 0.0,
    ) -> None:
        self.punctuation_mask = _token_table("punctuation_mask", punctuation_mask)
        vocab_size = punctuation_mask.numel()
        _check_rules(punctuation_mode, mirror_repetition, avoid_source_characters)
        check_penalty("oblique_final_penalty", oblique_final_penalty)
        check_penalty("tone_opposition_penalty", tone_opposition_penalty)
        if oblique_final_penalty > 0:
            _check_tone_mask("level_tone_mask", level_tone_mask, "oblique_final_penalty", vocab_size)
        if tone_opposition_penalty > 0:
            _check_tone_mask("level_tone_mask", level_tone_mask, "tone_opposition_penalty", vocab_size)
            _check_tone_mask("oblique_tone_mask", oblique_tone_mask, "tone_opposition_penalty", vocab_size)
            assert level_tone_mask is not None and oblique_tone_mask is not None  # checked just above
            if bool((level_tone_mask & oblique_tone_mask).any()):
                raise ValueError("oblique_tone_mask: expected no token that level_tone_mask also marks, got some")
        forbidden = torch.zeros(vocab_size, dtype=torch.bool)
        for token_id in [*forbidden_ids, eos_id, pad_id]:
            if not 0 <= int(token_id) < vocab_size:
                raise ValueError(f"forbidden_ids, eos_id, pad_id: expected ids in [0, {vocab_size}), got {token_id}")
            forbidden[int(token_id)] = True
        # Tokens that may never fill a character position (eos is allowed only at the end).
        self.never_a_character = forbidden  # [V]
        self.eos_id, self.pad_id = int(eos_id), int(pad_id)
        self.punctuation_mode = punctuation_mode
        self.mirror_repetition = mirror_repetition
        self.avoid_source_characters = avoid_source_characters
        self.level_tone_mask = level_tone_mask
        self.oblique_final_penalty = float(oblique_final_penalty)
        self.oblique_tone_mask = oblique_tone_mask
        self.tone_opposition_penalty = float(tone_opposition_penalty)
        self._copies: dict[tuple[str, torch.device], Tensor] = {}

    def _table(self, name: str, device: torch.device) -> Tensor:
        """The [V] table ``name`` on ``device``, copied there once: a copy from the host's memory waits for the
        device, and the search asks for the tables at every step."""
        copy = self._copies.get((name, device))
        if copy is None:
            copy = self._copies[(name, device)] = getattr(self, name).to(device)
        return copy

    def __call__(self, step: int, prefix_ids: Tensor, log_probs: Tensor, *, src_ids: Tensor) -> Tensor:
        """Shape: prefix_ids [N, t = step + 1], log_probs [N, V], src_ids [N, S] -> [N, V]."""
        rows, vocab_size = log_probs.shape
        if vocab_size != self.punctuation_mask.numel():
            raise ValueError(
                f"log_probs: expected {self.punctuation_mask.numel()} columns (the vocabulary of the "
                f"constraint tables), got {vocab_size}"
            )
        device = log_probs.device
        punctuation = self._table("punctuation_mask", device)  # [V]
        never = self._table("never_a_character", device)  # [V]
        source_length = src_ids.size(1)
        lengths = (src_ids != self.pad_id).sum(dim=1)  # [N]
        at_end = lengths <= step  # [N]
        if step < source_length:
            current = src_ids[:, step]  # [N]
        else:
            current = torch.full((rows,), self.pad_id, dtype=torch.long, device=device)  # [N]
        current_is_punctuation = punctuation[current] & ~at_end  # [N]
        is_character = ~at_end & ~current_is_punctuation  # [N] rows that need a character here

        # Hard rules: where a character goes, any non-special, non-punctuation token.
        character_tokens = ~never & ~punctuation  # [V]
        allowed = is_character.unsqueeze(1) & character_tokens.unsqueeze(0)  # [N, V]
        if self.punctuation_mode == "copy":
            copied = torch.nn.functional.one_hot(current, vocab_size).bool()  # [N, V]
            allowed |= current_is_punctuation.unsqueeze(1) & copied
        else:
            allowed |= current_is_punctuation.unsqueeze(1) & (punctuation & ~never).unsqueeze(0)
        allowed[:, self.eos_id] = at_end

        preferred = self._repetition_rules(step, prefix_ids, src_ids, current, is_character, vocab_size)
        if preferred is not None:
            combined = allowed & preferred  # [N, V]
            # Relax the soft rules where they leave nothing (see the module docstring).
            nothing_left = ~combined.any(dim=1, keepdim=True)  # [N, 1]
            allowed = torch.where(nothing_left, allowed, combined)  # [N, V]

        processed = log_probs.masked_fill(~allowed, -math.inf)  # [N, V]
        if self.oblique_final_penalty > 0 and self.level_tone_mask is not None:
            processed = self._penalise_oblique_ending(step, processed, src_ids, lengths, punctuation)
        if self.tone_opposition_penalty > 0 and step < source_length:
            processed = self._penalise_same_tone(processed, current, is_character)
        return processed

    def _repetition_rules(
        self, step: int, prefix_ids: Tensor, src_ids: Tensor, current: Tensor, is_character: Tensor, vocab_size: int
    ) -> Tensor | None:
        """The soft rules as a BoolTensor[N, V] of preferred tokens, or None when none is on."""
        if not (self.mirror_repetition or self.avoid_source_characters) or step >= src_ids.size(1):
            return None
        rows = src_ids.size(0)
        device = src_ids.device
        punctuation = self._table("punctuation_mask", device)
        preferred = torch.ones(rows, vocab_size, dtype=torch.bool, device=device)  # [N, V]
        if self.mirror_repetition and step > 0:
            earlier_source = src_ids[:, :step]  # [N, step]
            generated = prefix_ids[:, 1:]  # [N, step]
            # Specials are no characters: two unknown characters both read as <unk> need not
            # be the same character, so <unk> never counts as a repetition.
            never = self._table("never_a_character", device)
            source_content = ~never[earlier_source] & ~punctuation[earlier_source]  # [N, step]
            same_as_current = (earlier_source == current.unsqueeze(1)) & source_content  # [N, step]
            repeats = same_as_current.any(dim=1) & is_character  # [N]
            # argmax gives the first True: the lower character of the first occurrence.
            first = same_as_current.long().argmax(dim=1, keepdim=True)  # [N, 1]
            forced = generated.gather(1, first).squeeze(1)  # [N]
            forced_tokens = torch.nn.functional.one_hot(forced, vocab_size).bool()  # [N, V]
            preferred = torch.where(repeats.unsqueeze(1), forced_tokens, preferred)
            # No repetition in the upper line here: no earlier lower character again.
            generated_content = generated.masked_fill(punctuation[generated], self.pad_id)  # [N, step]
            used = torch.zeros(rows, vocab_size, dtype=torch.bool, device=device)
            used.scatter_(1, generated_content, True)  # [N, V]
            used[:, self.pad_id] = False
            preferred &= ~(used & (is_character & ~repeats).unsqueeze(1))
        if self.avoid_source_characters:
            in_source = torch.zeros(rows, vocab_size, dtype=torch.bool, device=device)
            in_source.scatter_(1, src_ids, True)  # [N, V]
            in_source[:, self.pad_id] = False
            in_source &= ~punctuation.unsqueeze(0)
            preferred &= ~(in_source & is_character.unsqueeze(1))
        return preferred

    def _penalise_same_tone(self, log_probs: Tensor, current: Tensor, is_character: Tensor) -> Tensor:
        """Subtract the penalty from tokens of the upper character's tone class (current [N], is_character [N])."""
        assert self.level_tone_mask is not None and self.oblique_tone_mask is not None  # checked in __init__
        level = self._table("level_tone_mask", log_probs.device)  # [V]
        oblique = self._table("oblique_tone_mask", log_probs.device)  # [V]
        upper_level = (level[current] & is_character).unsqueeze(1)  # [N, 1]
        upper_oblique = (oblique[current] & is_character).unsqueeze(1)  # [N, 1]
        same_class = (upper_level & level.unsqueeze(0)) | (upper_oblique & oblique.unsqueeze(0))  # [N, V]
        return log_probs - same_class.float() * self.tone_opposition_penalty

    def _penalise_oblique_ending(
        self, step: int, log_probs: Tensor, src_ids: Tensor, lengths: Tensor, punctuation: Tensor
    ) -> Tensor:
        """Subtract the penalty from non-level tokens in rows at their last character position."""
        positions = torch.arange(src_ids.size(1), device=src_ids.device)  # [S]
        is_content = (src_ids != self.pad_id) & ~punctuation[src_ids]  # [N, S]
        # The last content position of each row (-1 for a row of punctuation only).
        last_content = torch.where(is_content, positions.unsqueeze(0), -1).max(dim=1).values  # [N]
        at_final = (last_content == step) & (lengths > step)  # [N]
        assert self.level_tone_mask is not None  # the caller checks it, as __init__ required it
        oblique = ~self._table("level_tone_mask", log_probs.device)  # [V]
        penalty = (at_final.unsqueeze(1) & oblique.unsqueeze(0)).float() * self.oblique_final_penalty  # [N, V]
        return log_probs - penalty


@dataclass(frozen=True)
class CoupletConstraintConfig:
    """The couplet rules a checkpoint decodes with (its ``constraints`` section)."""

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
    # upper line (jieba: evaluation.couplet_antithesis.rerank_by_antithesis); 0 = off. On
    # validation rhythm 0.5 raised rhythm agreement within BLEU's noise; parts of speech
    # cost BLEU and bought nothing (docs/results.md#couplet-antithesis).
    part_of_speech_rerank: float = 0.0
    rhythm_rerank: float = 0.5

    def __post_init__(self) -> None:
        _check_rules(self.punctuation_mode, self.mirror_repetition, self.avoid_source_characters)
        for name in ("oblique_final_penalty", "tone_opposition_penalty", "part_of_speech_rerank", "rhythm_rerank"):
            check_penalty(name, getattr(self, name))

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
