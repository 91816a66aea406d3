"""Classification scores: confusion matrix, per-class precision, recall and F1.

Conventions (those of scikit-learn): the confusion matrix has one row per true class and
one column per predicted class, so row sums are the class supports and column sums the
number of predictions of each class. For class c,

    precision = confusion[c][c] / (column c's sum)    (of what was called c, how much was c)
    recall    = confusion[c][c] / (row c's sum)       (of what was c, how much was found)
    F1        = 2 * precision * recall / (precision + recall)

A ratio whose denominator is 0 (a class never predicted, or absent from the labels) is
reported as 0.0, as scikit-learn does by default; the macro averages are then lowered by
it, which is the honest reading.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from transformer_lab.evaluation.accuracy import accuracy

__all__ = ["ClassificationReport", "classification_report", "confusion_matrix"]

MAX_PRINTED_CLASSES = 20  # the most classes whose confusion matrix `lines` prints (a row of 7 columns each)


def _check_classes(name: str, values: Sequence[int], num_classes: int) -> None:
    for index, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < num_classes:
            raise ValueError(f"{name}[{index}] must be a class index in [0, {num_classes}), got {value!r}")


def confusion_matrix(predictions: Sequence[int], labels: Sequence[int], num_classes: int) -> list[list[int]]:
    """Counts ``matrix[true][predicted]`` over the paired predictions and labels.

    Shape:
        returns ``num_classes`` rows of ``num_classes`` counts.
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
    if len(predictions) != len(labels):
        raise ValueError(f"predictions and labels must have the same length, got {len(predictions)} and {len(labels)}")
    _check_classes("predictions", predictions, num_classes)
    _check_classes("labels", labels, num_classes)
    matrix = [[0] * num_classes for _ in range(num_classes)]
    for prediction, label in zip(predictions, labels):
        matrix[label][prediction] += 1
    return matrix


def _ratio(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else 0.0


@dataclass(frozen=True)
class ClassificationReport:
    """Accuracy, per-class precision/recall/F1/support, their macro averages, the confusion.

    Per-class tuples are in class-index order, named by ``class_names``.
    """

    class_names: tuple[str, ...]
    accuracy: float
    precision: tuple[float, ...]
    recall: tuple[float, ...]
    f1: tuple[float, ...]
    support: tuple[int, ...]
    confusion: tuple[tuple[int, ...], ...]

    @property
    def macro_precision(self) -> float:
        return sum(self.precision) / len(self.precision)

    @property
    def macro_recall(self) -> float:
        return sum(self.recall) / len(self.recall)

    @property
    def macro_f1(self) -> float:
        return sum(self.f1) / len(self.f1)

    def to_dict(self) -> dict[str, object]:
        """Plain data for JSON: accuracy, macro averages, a row per class, the confusion."""
        return {
            "accuracy": self.accuracy,
            "macro_precision": self.macro_precision,
            "macro_recall": self.macro_recall,
            "macro_f1": self.macro_f1,
            "per_class": {
                name: {"precision": p, "recall": r, "f1": f, "support": s}
                for name, p, r, f, s in zip(self.class_names, self.precision, self.recall, self.f1, self.support)
            },
            "confusion": [list(row) for row in self.confusion],
        }

    def lines(self) -> list[str]:
        """Accuracy, the per-class table with its macro average over every row, and the confusion matrix."""

        def columns(name: str) -> int:
            # A Chinese or Japanese character takes two terminal columns; pad by columns, not characters.
            return sum(2 if unicodedata.east_asian_width(character) in "WF" else 1 for character in name)

        width = max(columns(name) for name in (*self.class_names, "class", "macro"))

        def padded(name: str) -> str:
            return name + " " * (width - columns(name))

        lines = [f"accuracy {self.accuracy:.4f}", f"{padded('class')}  precision  recall  f1      support"]
        for name, class_precision, recall, f1, support in zip(
            self.class_names, self.precision, self.recall, self.f1, self.support
        ):
            lines.append(f"{padded(name)}  {class_precision:.4f}     {recall:.4f}  {f1:.4f}  {support}")
        lines.append(
            f"{padded('macro')}  {self.macro_precision:.4f}     "
            f"{self.macro_recall:.4f}  {self.macro_f1:.4f}  {sum(self.support)}"
        )
        size = len(self.class_names)
        if size > MAX_PRINTED_CLASSES:
            # Rows thousands of columns wide help no one on a terminal; the report's JSON keeps every count.
            lines.append(f"confusion matrix: {size:,} x {size:,} counts, too wide to print (see the report's JSON)")
            return lines
        lines.append("confusion matrix (rows: true class, columns: predicted class, in the order above):")
        for name, row in zip(self.class_names, self.confusion):
            lines.append(f"{padded(name)}  " + " ".join(f"{count:6d}" for count in row))
        return lines


def classification_report(
    predictions: Sequence[int], labels: Sequence[int], class_names: Sequence[str]
) -> ClassificationReport:
    """Score ``predictions`` against ``labels`` (class indices into ``class_names``)."""
    if isinstance(class_names, str):
        raise ValueError(f"class_names must be a sequence of names, got the single str {class_names!r}")
    names = tuple(class_names)
    matrix = confusion_matrix(predictions, labels, len(names))
    size = len(names)
    correct = [matrix[index][index] for index in range(size)]
    support = [sum(matrix[index]) for index in range(size)]
    predicted = [sum(matrix[row][index] for row in range(size)) for index in range(size)]
    precision = [_ratio(correct[index], predicted[index]) for index in range(size)]
    recall = [_ratio(correct[index], support[index]) for index in range(size)]
    f1 = [2 * p * r / (p + r) if p + r > 0 else 0.0 for p, r in zip(precision, recall)]
    return ClassificationReport(
        class_names=names,
        accuracy=accuracy(list(predictions), list(labels)),
        precision=tuple(precision),
        recall=tuple(recall),
        f1=tuple(f1),
        support=tuple(support),
        confusion=tuple(tuple(row) for row in matrix),
    )
