"""Confusion matrix and per-class precision/recall/F1 against hand-computed cases."""

from __future__ import annotations

import pytest

from transformer_lab.evaluation import classification_report, confusion_matrix


def test_a_hand_computed_three_class_case() -> None:
    labels = [0, 0, 0, 1, 1, 2, 2, 2, 2, 0]
    predictions = [0, 1, 0, 1, 2, 2, 2, 0, 2, 0]
    # true 0: predicted 0,1,0,0 -> [3, 1, 0]; true 1: 1,2 -> [0, 1, 1]; true 2: 2,2,0,2 -> [1, 0, 3]
    assert confusion_matrix(predictions, labels, 3) == [[3, 1, 0], [0, 1, 1], [1, 0, 3]]
    report = classification_report(predictions, labels, ["a", "b", "c"])
    assert report.accuracy == pytest.approx(7 / 10)
    # precision: column sums 4, 2, 4 -> 3/4, 1/2, 3/4; recall: row sums 4, 2, 4 -> 3/4, 1/2, 3/4
    assert report.precision == pytest.approx((3 / 4, 1 / 2, 3 / 4))
    assert report.recall == pytest.approx((3 / 4, 1 / 2, 3 / 4))
    assert report.f1 == pytest.approx((3 / 4, 1 / 2, 3 / 4))
    assert report.support == (4, 2, 4)
    assert report.macro_f1 == pytest.approx((3 / 4 + 1 / 2 + 3 / 4) / 3)


def test_precision_and_recall_differ_and_f1_is_their_harmonic_mean() -> None:
    labels = [0, 0, 0, 0, 1, 1]
    predictions = [0, 0, 1, 1, 1, 1]
    report = classification_report(predictions, labels, ["x", "y"])
    assert report.confusion == ((2, 2), (0, 2))
    assert report.precision == pytest.approx((1.0, 0.5))
    assert report.recall == pytest.approx((0.5, 1.0))
    assert report.f1 == pytest.approx((2 * 0.5 / 1.5, 2 * 0.5 / 1.5))
    assert report.to_dict()["per_class"]["y"] == pytest.approx(
        {"precision": 0.5, "recall": 1.0, "f1": 2 / 3, "support": 2}
    )


def test_a_class_never_predicted_or_absent_scores_zero_not_nan() -> None:
    report = classification_report([0, 0, 0], [0, 0, 1], ["a", "b", "c"])
    assert report.precision == pytest.approx((2 / 3, 0.0, 0.0))
    assert report.recall == pytest.approx((1.0, 0.0, 0.0))
    assert report.f1[1] == 0.0 and report.f1[2] == 0.0
    assert report.support == (2, 1, 0)


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="same length"):
        confusion_matrix([0, 1], [0], 2)
    with pytest.raises(ValueError, match=r"predictions\[1\] must be a class index in \[0, 2\), got 2"):
        confusion_matrix([0, 2], [0, 1], 2)
    with pytest.raises(ValueError, match=r"labels\[0\] must be a class index"):
        confusion_matrix([0], [-1], 2)
    with pytest.raises(ValueError, match="num_classes must be an integer >= 2"):
        confusion_matrix([0], [0], 1)


def test_the_confusion_matrix_of_many_classes_is_not_printed_but_kept_in_the_report() -> None:
    few = classification_report([0, 1, 1], [0, 1, 0], ["a", "b"]).lines()
    assert few[-3] == "confusion matrix (rows: true class, columns: predicted class, in the order above):"
    assert few[-2].split() == ["a", "1", "1"] and few[-1].split() == ["b", "0", "1"]
    # 400 rows of 400 counts were printed, each 2,800 columns wide.
    size = 400
    names = [f"class{number}" for number in range(size)]
    report = classification_report(list(range(size)), [(number + 1) % size for number in range(size)], names)
    lines = report.lines()
    assert lines[-1] == "confusion matrix: 400 x 400 counts, too wide to print (see the report's JSON)"
    assert len(lines) == 1 + 1 + size + 1 + 1 and max(map(len, lines)) < 100
    assert len(report.to_dict()["confusion"]) == size
