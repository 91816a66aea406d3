"""Tests for transformer_lab.data.synthetic."""

import pytest

from transformer_lab.data.synthetic import SYNTHETIC_TASKS, SyntheticTask, make_synthetic_pairs
from transformer_lab.data.vocabulary import NUM_SPECIAL_TOKENS


def test_targets_are_correct() -> None:
    for task in SYNTHETIC_TASKS:
        pairs = make_synthetic_pairs(task, 200, vocab_size=12, min_length=1, max_length=9, seed=3)
        assert len(pairs) == 200
        for source, target in pairs:
            if task == "copy":
                assert target == source
            elif task == "reverse":
                assert target == source[::-1]
            else:
                assert target == sorted(source)
                assert sorted(target) == target


def test_tasks_are_not_trivial() -> None:
    pairs = make_synthetic_pairs("reverse", 50, 12, 3, 9, seed=0)
    assert any(source != target for source, target in pairs)
    pairs = make_synthetic_pairs("sort", 50, 12, 3, 9, seed=0)
    assert any(source != target for source, target in pairs)


def test_lengths_and_symbols_in_range() -> None:
    pairs = make_synthetic_pairs("copy", 500, vocab_size=9, min_length=2, max_length=6, seed=1)
    lengths = {len(source) for source, _ in pairs}
    assert lengths == set(range(2, 7))  # every length drawn, nothing outside the range
    symbols = {symbol for source, target in pairs for symbol in source + target}
    assert symbols == set(range(NUM_SPECIAL_TOKENS, 9))  # no special id, every symbol used
    assert all(len(target) == len(source) for source, target in pairs)


def test_deterministic_per_seed_and_different_across_seeds() -> None:
    first = make_synthetic_pairs("sort", 100, 10, 1, 8, seed=7)
    again = make_synthetic_pairs("sort", 100, 10, 1, 8, seed=7)
    other = make_synthetic_pairs("sort", 100, 10, 1, 8, seed=8)
    assert first == again
    assert first != other


def test_task_object() -> None:
    task = SyntheticTask("reverse", vocab_size=10, min_length=1, max_length=4)
    assert task.first_symbol_id == 4
    assert task.target_for([4, 5, 9]) == [9, 5, 4]
    assert len(task.vocabulary()) == 10
    assert task.make_pairs(20, seed=2) == make_synthetic_pairs("reverse", 20, 10, 1, 4, seed=2)


def test_validation() -> None:
    with pytest.raises(ValueError, match="copy, reverse, sort.*'shuffle'"):
        make_synthetic_pairs("shuffle", 10, 10, 1, 4, seed=0)
    with pytest.raises(ValueError, match="vocab_size must be >= 6, got 5"):
        make_synthetic_pairs("copy", 10, 5, 1, 4, seed=0)
    with pytest.raises(ValueError, match="min_length"):
        make_synthetic_pairs("copy", 10, 10, 0, 4, seed=0)
    with pytest.raises(ValueError, match="max_length must be >= min_length"):
        make_synthetic_pairs("copy", 10, 10, 5, 4, seed=0)
    with pytest.raises(ValueError, match="num_examples"):
        make_synthetic_pairs("copy", 0, 10, 1, 4, seed=0)
    with pytest.raises(ValueError, match="seed"):
        make_synthetic_pairs("copy", 10, 10, 1, 4, seed=-1)
    with pytest.raises(ValueError, match="vocab_size must be an integer"):
        make_synthetic_pairs("copy", 10, 10.0, 1, 4, seed=0)
