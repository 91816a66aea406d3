"""Antithesis (对仗): how closely a lower line answers its upper line, rule by rule.

A couplet writer checks more than the form (evaluation/couplet_metrics.py): the two lines
should oppose each other in tone and run parallel in grammar and rhythm. Each rule below
scores one pair in [0, 1]; a corpus gets the mean over its pairs, as the field's
rule-based couplet evaluators (for example the `duizhang` package) report them:

- tone opposition (平仄相对): over the upper line's Han characters, the share of positions
  where the lower line holds a Han character of the other tone class (level = Mandarin
  tone 1/2, oblique = 3/4/neutral; the reading of the character alone, as in
  data/chinese.py). A position the lower line leaves empty or fills with anything else
  does not oppose. Pairs whose upper line has no Han character are left out;
- parts of speech (词性对仗): both lines tagged by `jieba.posseg`; the share of word
  positions (up to the shorter word list) whose tags are equal;
- rhythm (节奏): both lines segmented by `jieba.cut`; the share of word positions (up to
  the shorter word list) whose words are equally long; 0 for lines of unequal length;
- no reused character: the share of the lower line's characters (punctuation aside) that
  do not occur in the upper line.

On the 4,000 wb14123 test pairs the references score 0.768 / 0.252 / 0.566 / 1.000 and a
random lower line of the same length about 0.58 / 0.16 / 0.49 / 0.98
(docs/results.md#couplet-antithesis),
so tone opposition and parts of speech are the rules a model can be told apart by.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from transformer_lab.data.chinese import is_punctuation, segment_words, tagged_words, tone_class
from transformer_lab.decoding.couplet_constraints import CoupletConstraintConfig
from transformer_lab.decoding.sources import Candidate


@dataclass(frozen=True)
class MeanScore:
    """The mean of per-pair scores: their `total` over `count` pairs (nan when count is 0)."""

    total: float
    count: int

    @property
    def value(self) -> float:
        return self.total / self.count if self.count else float("nan")

    def __str__(self) -> str:
        return f"{self.value:.3f} (mean of {self.count})"


def tone_opposition(upper: str, lower: str) -> float | None:
    """The share of the upper line's Han positions where the lower line has the other tone class.

    None when the upper line has no Han character (the rule does not apply).
    """
    classes = [(index, tone_class(character)) for index, character in enumerate(upper)]
    toned = [(index, upper_class) for index, upper_class in classes if upper_class is not None]
    if not toned:
        return None
    opposed = 0
    for index, upper_class in toned:
        answer = tone_class(lower[index]) if index < len(lower) else None
        opposed += answer is not None and answer != upper_class
    return opposed / len(toned)


def _positionwise_agreement(upper_items: Sequence[object], lower_items: Sequence[object]) -> float:
    """Equal items position by position, over the shorter sequence (0 when either is empty)."""
    compared = min(len(upper_items), len(lower_items))
    if compared == 0:
        return 0.0
    return sum(upper_items[index] == lower_items[index] for index in range(compared)) / compared


def part_of_speech_agreement(upper: str, lower: str) -> float:
    """The share of word positions whose jieba part-of-speech tags are equal (over the shorter tag list)."""
    upper_tags = [tag for _, tag in tagged_words(upper)]
    lower_tags = [tag for _, tag in tagged_words(lower)]
    return _positionwise_agreement(upper_tags, lower_tags)


def rhythm_agreement(upper: str, lower: str) -> float:
    """The share of word positions whose jieba words are equally long (0 for lines of unequal length)."""
    if len(upper) != len(lower):
        return 0.0
    upper_lengths = [len(word) for word in segment_words(upper)]
    lower_lengths = [len(word) for word in segment_words(lower)]
    return _positionwise_agreement(upper_lengths, lower_lengths)


def unreused_character_share(upper: str, lower: str) -> float:
    """The share of the lower line's non-punctuation characters that do not occur in the upper line (0 if none)."""
    upper_characters = {character for character in upper if not is_punctuation(character)}
    lower_characters = [character for character in lower if not is_punctuation(character)]
    if not lower_characters:
        return 0.0
    return sum(character not in upper_characters for character in lower_characters) / len(lower_characters)


PairRule = Callable[[str, str], "float | None"]

# The report's rules, in its order: name -> per-pair score.
RULES: dict[str, PairRule] = {
    "tone_opposition": tone_opposition,
    "part_of_speech_agreement": part_of_speech_agreement,
    "rhythm_agreement": rhythm_agreement,
    "unreused_characters": unreused_character_share,
}


def mean_score(rule: PairRule, uppers: Sequence[str], lowers: Sequence[str]) -> MeanScore:
    """The mean of `rule` over the pairs it applies to (a None score leaves the pair out)."""
    if len(uppers) != len(lowers):
        raise ValueError(f"uppers and lowers must have the same length, got {len(uppers)} and {len(lowers)}")
    scores = [score for score in (rule(upper, lower) for upper, lower in zip(uppers, lowers)) if score is not None]
    return MeanScore(sum(scores), len(scores))


@dataclass(frozen=True)
class AntithesisReport:
    """The antithesis rules' means for one set of lower lines (the model's, or the references')."""

    tone_opposition: MeanScore
    part_of_speech_agreement: MeanScore
    rhythm_agreement: MeanScore
    unreused_characters: MeanScore


def antithesis_report(uppers: Sequence[str], lowers: Sequence[str]) -> AntithesisReport:
    """Every antithesis rule's mean for `lowers` as answers to `uppers`."""
    return AntithesisReport(**{name: mean_score(rule, uppers, lowers) for name, rule in RULES.items()})


def pair_scores(upper: str, lower: str) -> dict[str, float | None]:
    """Every rule's score for one pair (None where a rule does not apply), for per-line tables."""
    return {name: rule(upper, lower) for name, rule in RULES.items()}


def ranking_score(upper: str, candidate: Candidate, config: CoupletConstraintConfig) -> float:
    """The score that ranks ``candidate`` among its beam: the search's, plus the rerank's nats where it is on."""
    return candidate.score + (antithesis_bonus(upper, candidate.text, config) if config.reranks else 0.0)


def rerank_by_antithesis(
    upper: str, candidates: Sequence[Candidate], config: CoupletConstraintConfig
) -> list[Candidate]:
    """``candidates`` best first by score + :func:`antithesis_bonus` (the config's nats x agreement with ``upper``).

    The agreements are the per-pair rules above (jieba), which decoding cannot see character by
    character (a word's tag and length are known only once the line is complete), so they
    choose among finished lines. A candidate keeps its own ``score``; ties keep the search's order.
    """
    return sorted(
        candidates,
        key=lambda candidate: candidate.score + antithesis_bonus(upper, candidate.text, config),
        reverse=True,
    )


def antithesis_bonus(upper: str, lower: str, config: CoupletConstraintConfig) -> float:
    """The nats the rerank adds to ``lower``'s score: the config's weights x its part-of-speech and rhythm agreement."""
    bonus = 0.0
    if config.part_of_speech_rerank > 0:
        bonus += config.part_of_speech_rerank * part_of_speech_agreement(upper, lower)
    if config.rhythm_rerank > 0:
        bonus += config.rhythm_rerank * rhythm_agreement(upper, lower)
    return bonus
