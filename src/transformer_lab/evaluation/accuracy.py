"""Classification accuracy."""

from __future__ import annotations

from typing import Sequence


def accuracy(predictions: Sequence[int], labels: Sequence[int]) -> float:
    """Share of predictions equal to their label."""
    if len(predictions) != len(labels):
        raise ValueError(f"predictions and labels must have the same length, got {len(predictions)} and {len(labels)}")
    if not labels:
        raise ValueError("labels must not be empty, got 0 labels")
    return sum(int(prediction == label) for prediction, label in zip(predictions, labels)) / len(labels)
