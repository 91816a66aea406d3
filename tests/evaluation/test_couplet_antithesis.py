"""The antithesis rules on hand-made pairs whose scores are worked out by hand."""

from __future__ import annotations

import math

import pytest

from transformer_lab.evaluation import couplet_antithesis
from transformer_lab.evaluation.couplet_antithesis import (
    MeanScore,
    antithesis_report,
    mean_score,
    pair_scores,
    part_of_speech_agreement,
    rhythm_agreement,
    tone_opposition,
    unreused_character_share,
)

pytest.importorskip("jieba")
pytest.importorskip("pypinyin")


def test_tone_opposition_counts_the_upper_lines_han_positions() -> None:
    # 天 tiān 高 gāo are level; 地 dì 厚 hòu oblique, 云 yún 飞 fēi level, 海 hǎi 水 shuǐ oblique.
    assert tone_opposition("天高", "地厚") == 1.0
    assert tone_opposition("天高", "云飞") == 0.0
    # A mark under a Han character opposes nothing; a missing position neither.
    assert tone_opposition("天高", "海，") == 0.5
    assert tone_opposition("天高", "水") == 0.5
    # The upper line's mark is not a position of the rule: 天，高 has two.
    assert tone_opposition("天，高", "地，厚") == 1.0
    assert tone_opposition("，，", "，，") is None


def test_positionwise_rules_with_a_fixed_segmentation(monkeypatch: pytest.MonkeyPatch) -> None:
    # The arithmetic of the word rules, apart from what jieba's dictionary decides.
    words = {"春风得意": ("春风", "得意"), "秋雨缠绵": ("秋雨", "缠", "绵"), "一二三四": ("一二", "三四")}
    tags = {"春风得意": (("春风", "n"), ("得意", "a")), "秋雨缠绵": (("秋雨", "n"), ("缠", "v"), ("绵", "a"))}
    monkeypatch.setattr(couplet_antithesis, "segment_words", lambda line: words[line])
    monkeypatch.setattr(couplet_antithesis, "tagged_words", lambda line: tags[line])
    # Word lengths [2, 2] against [2, 1, 1]: over the shorter list, 1 of 2 equal.
    assert rhythm_agreement("春风得意", "秋雨缠绵") == 0.5
    assert rhythm_agreement("春风得意", "一二三四") == 1.0
    assert rhythm_agreement("春风得意", "秋雨缠") == 0.0  # unequal lengths
    # Tags [n, a] against [n, v, a]: 1 of the first 2 equal.
    assert part_of_speech_agreement("春风得意", "秋雨缠绵") == 0.5


def test_word_rules_through_jieba() -> None:
    # jieba reads 他恨她 and 你爱我 as pronoun / verb / pronoun, and 雨打 as two words while 风吹 is one.
    assert part_of_speech_agreement("他恨她", "你爱我") == 1.0
    assert rhythm_agreement("他恨她", "你爱我") == 1.0
    assert rhythm_agreement("风吹", "雨打") == 0.0  # [2] against [1, 1]
    assert part_of_speech_agreement("风吹", "雨打") == 0.0  # v against n


def test_unreused_character_share_sets_punctuation_aside() -> None:
    assert unreused_character_share("天高", "地厚") == 1.0
    assert unreused_character_share("天高，云淡", "地高，天阔") == 0.5  # 高 and 天 come from the upper line
    assert unreused_character_share("天高", "，") == 0.0


def test_means_leave_out_the_pairs_a_rule_does_not_apply_to() -> None:
    score = mean_score(tone_opposition, ["天高", "，，", "天高"], ["地厚", "，，", "云飞"])
    assert score == MeanScore(1.0, 2) and score.value == 0.5
    assert str(score) == "0.500 (mean of 2)"
    assert math.isnan(MeanScore(0.0, 0).value)
    with pytest.raises(ValueError, match="same length"):
        mean_score(tone_opposition, ["天高"], [])


def test_report_and_pair_scores_agree() -> None:
    uppers, lowers = ["他恨她", "天高"], ["你爱我", "地厚"]
    report = antithesis_report(uppers, lowers)
    per_pair = [pair_scores(upper, lower) for upper, lower in zip(uppers, lowers)]
    for name in couplet_antithesis.RULES:
        expected = [scores[name] for scores in per_pair if scores[name] is not None]
        assert getattr(report, name) == MeanScore(sum(expected), len(expected))
    # 他 tā level / 你 nǐ oblique, 恨 hèn / 爱 ài both oblique, 她 tā level / 我 wǒ oblique.
    assert per_pair[0]["tone_opposition"] == pytest.approx(2 / 3)
