"""Couplet metrics on hand-computed examples."""

from __future__ import annotations

import math

import pytest

from transformer_lab.evaluation.couplet_metrics import (
    Rate,
    couplet_report,
    distinct_n,
    length_match_rate,
    level_tone_ending_rate,
    punctuation_match_rate,
    repetition_rates,
)

UPPERS = ["风弦未拨心先乱", "春风，春雨", "山高"]


def test_length_and_punctuation_rates() -> None:
    lowers = ["夜幕已沉梦更闲", "秋月？秋霜", "水"]
    assert length_match_rate(UPPERS, lowers) == Rate(2, 3)
    # Line 2 has a mark under the comma (a different one); line 3 has the wrong length.
    assert punctuation_match_rate(UPPERS, lowers) == Rate(2, 3)
    assert punctuation_match_rate(UPPERS, lowers, identical=True) == Rate(1, 3)
    assert punctuation_match_rate(["春，风"], ["秋月霜"]) == Rate(0, 1)


def test_level_tone_ending_skips_trailing_marks_and_lines_without_han() -> None:
    # 闲 xián (2) level; 霜 shuāng (1) level before the '？'; 水 shuǐ (3) oblique; '，，' has no Han.
    assert level_tone_ending_rate(["夜幕已沉梦更闲", "秋霜？", "山水", "，，"]) == Rate(2, 3)


def test_repetition_rates() -> None:
    uppers = ["春风春雨", "山高水长", "一，一"]
    lowers = ["秋月秋霜", "云深云浅", "二，三"]
    mirrored, unrepeated = repetition_rates(uppers, lowers)
    # Upper lines with a repetition: 1 and 3 (the comma is no repetition, 一...一 is);
    # lower 1 mirrors it, lower 3 does not. Upper 2 has none but its lower repeats 云.
    assert mirrored == Rate(1, 2)
    assert unrepeated == Rate(0, 1)


def test_distinct_n() -> None:
    # Unigrams: 春 风 春 雨 | 春 风 -> 6 in all, 3 distinct. Bigrams: 春风 风春 春雨 | 春风 -> 4, 3 distinct.
    assert distinct_n(["春风春雨", "春风"], 1) == pytest.approx(3 / 6)
    assert distinct_n(["春风春雨", "春风"], 2) == pytest.approx(3 / 4)
    assert distinct_n(["春"], 2) == 0.0


def test_report_scores_bleu_by_character_and_the_references_form() -> None:
    references = ["夜幕已沉梦更闲", "秋月，秋霜", "水长"]
    report = couplet_report(UPPERS, references, references)
    assert report.bleu.score == pytest.approx(100.0)
    assert "tok:zh" in report.bleu.signature
    assert report.references.length_match == Rate(3, 3)
    # By character: 秋雨云星 against 秋雨云天 matches 3/4 unigrams, 2/3 bigrams, 1/2 trigrams and
    # 0/1 four-grams, which sacreBLEU's "exp" smoothing counts as 1/2; same length, no brevity
    # penalty: (3/4 * 2/3 * 1/2 * 1/2) ** (1/4) = 0.125 ** 0.25.
    partial = couplet_report(["春风花月"], ["秋雨云星"], ["秋雨云天"])
    assert partial.bleu.score == pytest.approx(100 * 0.125**0.25, abs=0.01)
    assert math.isnan(Rate(0, 0).value)
    # Printed, a rule no line applies to says so (was: "nan % (0/0)").
    assert str(Rate(0, 0)) == "    - (no line it applies to)" and str(Rate(1, 4)) == " 25.0 % (1/4)"
    with pytest.raises(ValueError, match="same length"):
        couplet_report(UPPERS, references[:2], references)
