"""stratified_held_out: seeded, each class holding out its share, and bad arguments named."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from transformer_lab.data.splits import stratified_held_out


def make_labels(counts: dict[int, int], seed: int = 0) -> np.ndarray:
    labels = [label for label, count in counts.items() for _ in range(count)]
    random.Random(seed).shuffle(labels)
    return np.asarray(labels, dtype=np.int64)


def test_distinct_increasing_indices_and_each_class_holds_out_its_share() -> None:
    labels = make_labels({0: 300, 1: 100, 2: 40, 7: 61})
    held = stratified_held_out(labels, 0.1, seed=3).tolist()
    assert held == sorted(set(held)) and 0 <= held[0] and held[-1] < len(labels)
    held_counts = Counter(int(labels[index]) for index in held)
    assert held_counts == {0: 30, 1: 10, 2: 4, 7: 6}  # round(0.1 * n) of each class


def test_the_same_seed_gives_the_same_split_and_another_seed_another() -> None:
    labels = make_labels({0: 50, 1: 50})
    first = stratified_held_out(labels, 0.2, seed=1)
    assert np.array_equal(first, stratified_held_out(labels.copy(), 0.2, seed=1))
    assert not np.array_equal(first, stratified_held_out(labels, 0.2, seed=2))


def test_fraction_zero_holds_out_nothing_and_bad_arguments_are_named() -> None:
    assert stratified_held_out(np.asarray([0, 1, 1]), 0.0, seed=0).tolist() == []
    with pytest.raises(ValueError, match=r"^fraction: expected a number in \[0, 1\), got 1.0$"):
        stratified_held_out(np.asarray([0, 1]), 1.0, seed=0)
    with pytest.raises(ValueError, match="seed"):
        stratified_held_out(np.asarray([0, 1]), 0.5, seed=-1)
