"""How good is a lower line: character BLEU and the rules of the couplet form.

BLEU rewards characters shared with the one reference, which a good couplet need not
share; the form is measured too, each rule as a rate over the lines it applies to:

- length match: the lower line has as many characters as the upper line;
- punctuation match: punctuation marks stand at exactly the upper line's punctuation
  positions (and "identical punctuation": they are the same marks);
- level-tone ending: the last Han character of the lower line has Mandarin tone 1 or 2
  (over the lines that have a Han character);
- repetition mirrored: over upper lines that repeat a character (positions i < j, not
  punctuation), the share of lower lines that repeat at every such pair of positions;
- no repetition where none: over upper lines without a repeated character, the share of
  lower lines without one either;
- distinct-1/2: distinct character unigrams (bigrams within a line) over all of them, a
  measure of variety across the corpus.

A lower line of the wrong length fails the position-wise rules. The antithesis rules
(tone opposition, parts of speech, rhythm) are in couplet_antithesis.py; the report holds
both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from transformer_lab.data.chinese import is_level_tone, is_punctuation, last_han_character
from transformer_lab.evaluation.bleu import BleuResult, corpus_bleu
from transformer_lab.evaluation.couplet_antithesis import RULES as ANTITHESIS_RULES
from transformer_lab.evaluation.couplet_antithesis import AntithesisReport, antithesis_report


@dataclass(frozen=True)
class Rate:
    """`hits` out of `total`; `value` is their ratio (nan when total is 0)."""

    hits: int
    total: int

    @property
    def value(self) -> float:
        return self.hits / self.total if self.total else float("nan")

    def __str__(self) -> str:
        if not self.total:  # no line the rule applies to: nothing to rate, not a rate of "nan %"
            return "    - (no line it applies to)"
        return f"{100 * self.value:5.1f} % ({self.hits}/{self.total})"


def _check_parallel(uppers: Sequence[str], lowers: Sequence[str]) -> None:
    if len(uppers) != len(lowers):
        raise ValueError(f"uppers and lowers must have the same length, got {len(uppers)} and {len(lowers)}")


def length_match_rate(uppers: Sequence[str], lowers: Sequence[str]) -> Rate:
    """Lines whose lower line has as many characters as the upper line."""
    _check_parallel(uppers, lowers)
    return Rate(sum(len(upper) == len(lower) for upper, lower in zip(uppers, lowers)), len(uppers))


def punctuation_match_rate(uppers: Sequence[str], lowers: Sequence[str], *, identical: bool = False) -> Rate:
    """Lines with punctuation at exactly the upper line's punctuation positions (the same marks if `identical`)."""
    _check_parallel(uppers, lowers)
    hits = 0
    for upper, lower in zip(uppers, lowers):
        if len(upper) != len(lower):
            continue
        if identical:
            hits += all(
                (upper_char == lower_char) if is_punctuation(upper_char) else not is_punctuation(lower_char)
                for upper_char, lower_char in zip(upper, lower)
            )
        else:
            hits += all(is_punctuation(a) == is_punctuation(b) for a, b in zip(upper, lower))
    return Rate(hits, len(uppers))


def level_tone_ending_rate(lowers: Sequence[str]) -> Rate:
    """Lines whose last Han character is of a level tone, over the lines that have one."""
    found = [last_han_character(lower) for lower in lowers]
    endings = [character for character in found if character is not None]
    return Rate(sum(is_level_tone(character) for character in endings), len(endings))


def _repeated_pairs(line: str) -> set[tuple[int, int]]:
    """Position pairs (i, j), i < j, holding the same non-punctuation character."""
    return {
        (first, second)
        for first in range(len(line))
        for second in range(first + 1, len(line))
        if line[first] == line[second] and not is_punctuation(line[first])
    }


def repetition_rates(uppers: Sequence[str], lowers: Sequence[str]) -> tuple[Rate, Rate]:
    """(repetition mirrored, no repetition where the upper line has none); see the module docstring.

    In the first rate a lower line counts when it repeats at least at every pair of
    positions where the upper line repeats.
    """
    _check_parallel(uppers, lowers)
    mirrored = with_repeats = unrepeated = without_repeats = 0
    for upper, lower in zip(uppers, lowers):
        upper_pairs = _repeated_pairs(upper)
        same_length = len(upper) == len(lower)
        if upper_pairs:
            with_repeats += 1
            mirrored += same_length and all(lower[first] == lower[second] for first, second in upper_pairs)
        else:
            without_repeats += 1
            unrepeated += same_length and not _repeated_pairs(lower)
    return Rate(mirrored, with_repeats), Rate(unrepeated, without_repeats)


def distinct_n(lines: Sequence[str], n: int) -> float:
    """Distinct character n-grams over all n-grams (n-grams do not cross lines); 0 when there are none."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    grams = [line[start : start + n] for line in lines for start in range(len(line) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


@dataclass(frozen=True)
class FormReport:
    """The form rates of one set of lower lines (the model's, or the references')."""

    length_match: Rate
    punctuation_match: Rate
    identical_punctuation: Rate
    level_tone_ending: Rate
    repetition_mirrored: Rate
    no_repetition_where_none: Rate
    distinct_1: float
    distinct_2: float


def form_report(uppers: Sequence[str], lowers: Sequence[str]) -> FormReport:
    """Every form rate of `lowers` as answers to `uppers`."""
    mirrored, unrepeated = repetition_rates(uppers, lowers)
    return FormReport(
        length_match=length_match_rate(uppers, lowers),
        punctuation_match=punctuation_match_rate(uppers, lowers),
        identical_punctuation=punctuation_match_rate(uppers, lowers, identical=True),
        level_tone_ending=level_tone_ending_rate(lowers),
        repetition_mirrored=mirrored,
        no_repetition_where_none=unrepeated,
        distinct_1=distinct_n(lowers, 1),
        distinct_2=distinct_n(lowers, 2),
    )


@dataclass(frozen=True)
class CoupletReport:
    """Character BLEU of the hypotheses, and the form and antithesis rates of hypotheses and references."""

    bleu: BleuResult
    hypotheses: FormReport
    references: FormReport
    hypothesis_antithesis: AntithesisReport
    reference_antithesis: AntithesisReport

    def lines(self) -> list[str]:
        """The report as aligned text lines: BLEU with its signature, then each rate for ours and the references."""
        ours, references = self.hypotheses, self.references
        lines = [
            f"character BLEU-4  {self.bleu.score:.2f}  {self.bleu.signature}",
            f"{'':28}{'ours':>24}{'references':>24}",
        ]
        for name in (
            "length_match",
            "punctuation_match",
            "identical_punctuation",
            "level_tone_ending",
            "repetition_mirrored",
            "no_repetition_where_none",
        ):
            lines.append(
                f"{name.replace('_', ' '):28}{str(getattr(ours, name)):>24}{str(getattr(references, name)):>24}"
            )
        for name in ("distinct_1", "distinct_2"):
            lines.append(f"{name.replace('_', '-'):28}{getattr(ours, name):>24.4f}{getattr(references, name):>24.4f}")
        for name in ANTITHESIS_RULES:
            ours_score = getattr(self.hypothesis_antithesis, name)
            reference_score = getattr(self.reference_antithesis, name)
            lines.append(f"{name.replace('_', ' '):28}{str(ours_score):>24}{str(reference_score):>24}")
        return lines


def couplet_report(uppers: Sequence[str], hypotheses: Sequence[str], references: Sequence[str]) -> CoupletReport:
    """Score lower lines against references: sacreBLEU with tokenize="zh" (each Han character a token), the form
    and the antithesis rules."""
    _check_parallel(uppers, hypotheses)
    _check_parallel(uppers, references)
    return CoupletReport(
        bleu=corpus_bleu(hypotheses, references, tokenize="zh"),
        hypotheses=form_report(uppers, hypotheses),
        references=form_report(uppers, references),
        hypothesis_antithesis=antithesis_report(uppers, hypotheses),
        reference_antithesis=antithesis_report(uppers, references),
    )
