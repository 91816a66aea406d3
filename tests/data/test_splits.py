"""stratified_split: seeded, disjoint, complete, and class proportions kept."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from transformer_lab.data import stratified_split


def make_labels(counts: dict[int, int], seed: int = 0) -> list[int]:
    labels = [label for label, count in counts.items() for _ in range(count)]
    random.Random(seed).shuffle(labels)
    return labels


def test_every_index_once_disjoint_and_each_class_holds_out_its_share() -> None:
    labels = make_labels({0: 300, 1: 100, 2: 40, 7: 61})
    kept, held = stratified_split(labels, 0.1, seed=3)
    assert sorted(kept + held) == list(range(len(labels)))
    assert not set(kept) & set(held)
    assert kept == sorted(kept) and held == sorted(held)
    held_counts = Counter(labels[index] for index in held)
    assert held_counts == {0: 30, 1: 10, 2: 4, 7: 6}  # round(0.1 * n) of each class


def test_the_same_seed_gives_the_same_split_and_another_seed_another() -> None:
    labels = make_labels({0: 50, 1: 50})
    assert stratified_split(labels, 0.2, seed=1) == stratified_split(list(labels), 0.2, seed=1)
    assert stratified_split(labels, 0.2, seed=1)[1] != stratified_split(labels, 0.2, seed=2)[1]


def test_fraction_zero_holds_out_nothing_and_bad_arguments_are_named() -> None:
    assert stratified_split([0, 1, 1], 0.0, seed=0) == ([0, 1, 2], [])
    with pytest.raises(ValueError, match=r"fraction must be a number in \[0, 1\), got 1.0"):
        stratified_split([0, 1], 1.0, seed=0)
    with pytest.raises(ValueError, match=r"labels\[1\] must be an integer class, got 'b'"):
        stratified_split([0, "b"], 0.5, seed=0)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="labels must be a non-empty"):
        stratified_split([], 0.5, seed=0)
