"""Tests for transformer_lab.data.batching."""

import logging
import random

import numpy as np
import pytest

from transformer_lab.data import batching
from transformer_lab.data.batching import (
    BatchSpans,
    balance_batches_for_shards,
    fixed_size_batches,
    padding_fraction,
    token_budget_batches,
    token_budget_spans,
)


def mixed_lengths(count: int = 300, seed: int = 0) -> list[int]:
    generator = random.Random(seed)
    return [generator.choice([generator.randint(1, 8), generator.randint(20, 60)]) for _ in range(count)]


def flatten(batches: list[list[int]]) -> list[int]:
    return [index for batch in batches for index in batch]


def test_every_index_once_and_within_budget() -> None:
    lengths = mixed_lengths()
    for shuffle in (True, False):
        batches = token_budget_batches(lengths, max_tokens=128, shuffle=shuffle, seed=1, epoch=0)
        assert sorted(flatten(batches)) == list(range(len(lengths)))
        for batch in batches:
            assert batch
            assert max(lengths[index] for index in batch) * len(batch) <= 128


def test_pair_lengths_count_the_longer_side() -> None:
    generator = random.Random(1)
    lengths = [(generator.randint(1, 30), generator.randint(1, 30)) for _ in range(200)]
    batches = token_budget_batches(lengths, max_tokens=64, shuffle=True, seed=0, epoch=2)
    assert sorted(flatten(batches)) == list(range(200))
    for batch in batches:
        assert max(max(lengths[index]) for index in batch) * len(batch) <= 64
    # A batch sized by the source alone would break the target budget for this example.
    with pytest.raises(ValueError, match=r"lengths\[1\] is \[2, 9\]"):
        token_budget_batches([(1, 1), (2, 9)], max_tokens=8, shuffle=False)


def test_epochs_differ_and_repeat() -> None:
    lengths = mixed_lengths()
    epoch_0 = token_budget_batches(lengths, 128, shuffle=True, seed=5, epoch=0)
    epoch_1 = token_budget_batches(lengths, 128, shuffle=True, seed=5, epoch=1)
    assert epoch_0 == token_budget_batches(lengths, 128, shuffle=True, seed=5, epoch=0)
    assert epoch_0 != epoch_1
    assert epoch_0 != token_budget_batches(lengths, 128, shuffle=True, seed=6, epoch=0)
    # The tie-break changes which equal-length examples share a batch, not only the order.
    assert sorted(map(sorted, epoch_0)) != sorted(map(sorted, epoch_1))
    # Without shuffling, the plan ignores seed and epoch and runs from short to long.
    plain = token_budget_batches(lengths, 128, shuffle=False, seed=5, epoch=0)
    assert plain == token_budget_batches(lengths, 128, shuffle=False, seed=9, epoch=3)
    longest = [max(lengths[index] for index in batch) for batch in plain]
    assert longest == sorted(longest)


def test_padding_lower_than_random_batches() -> None:
    lengths = mixed_lengths()
    bucketed = token_budget_batches(lengths, 128, shuffle=True, seed=0, epoch=0)
    # Random batches with the same number of examples per batch as the bucketed plan.
    order = list(range(len(lengths)))
    random.Random(0).shuffle(order)
    random_batches, start = [], 0
    for batch in bucketed:
        random_batches.append(order[start : start + len(batch)])
        start += len(batch)
    bucketed_padding = padding_fraction(bucketed, lengths)
    random_padding = padding_fraction(random_batches, lengths)
    assert 0.0 <= bucketed_padding < 0.1
    assert bucketed_padding < random_padding / 3


def test_padding_fraction_values() -> None:
    assert padding_fraction([[0, 1]], [2, 4]) == pytest.approx(0.25)  # 8 slots, 6 filled
    assert padding_fraction([[0], [1]], [2, 4]) == 0.0
    # Pairs: source slots 2 * 3, target slots 2 * 5; filled 4 + 6.
    assert padding_fraction([[0, 1]], [(1, 5), (3, 1)]) == pytest.approx(1 - 10 / 16)
    with pytest.raises(ValueError, match=r"batches\[0\]"):
        padding_fraction([[0, 2]], [1, 2])


def test_padding_fraction_of_shuffled_overlapping_spans_counts_each_batch_once() -> None:
    # The oracle: each batch padded to its own longest side, counted where it appears.
    pairs = [(length, max(1, length // 2 + 3 * (index % 5))) for index, length in enumerate(mixed_lengths(400, 3))]
    table = np.asarray(pairs, dtype=np.int32)
    spans = token_budget_spans(pairs, max_tokens=160, shuffle=True, seed=4, epoch=2)
    assert not np.all(np.diff(spans.starts) > 0)  # the batches lie shuffled over the order

    def oracle(batches: list[list[int]]) -> float:
        slots = sum(len(batch) * max(pairs[i][side] for i in batch) for batch in batches for side in (0, 1))
        return 1.0 - sum(sum(pairs[i]) for batch in batches for i in batch) / slots

    assert spans.padding_fraction(table) == pytest.approx(oracle(spans.to_lists()), abs=1e-12)
    # A shard's share may repeat a batch and skip others: spans in any order, overlapping.
    picked = [5, 0, 5, len(spans) - 1, 2]
    shard = BatchSpans(spans.order, spans.starts[picked], spans.ends[picked])
    overlapping = BatchSpans(spans.order, np.array([0, 3, 1]), np.array([10, 12, 4]))
    for part in (shard, overlapping):
        assert part.padding_fraction(table) == pytest.approx(oracle(part.to_lists()), abs=1e-12)


def test_shards_disjoint_and_equal_in_count() -> None:
    lengths = mixed_lengths()
    for num_shards in (2, 3, 4, 7):
        shards = [
            token_budget_batches(lengths, 128, shuffle=True, seed=3, epoch=1, num_shards=num_shards, shard_index=index)
            for index in range(num_shards)
        ]
        assert len({len(shard) for shard in shards}) == 1
        indices = [index for shard in shards for index in flatten(shard)]
        assert sorted(indices) == list(range(len(lengths)))  # disjoint and complete
        for shard in shards:
            for batch in shard:
                assert max(lengths[index] for index in batch) * len(batch) <= 128


def test_balance_splits_before_repeating() -> None:
    balanced, repeated = balance_batches_for_shards([[0, 1, 2, 3], [4]], num_shards=3)
    assert repeated == 0 and len(balanced) == 3
    assert sorted(flatten(balanced)) == [0, 1, 2, 3, 4]
    # Three single examples over two shards: one batch must be repeated, and says so.
    balanced, repeated = balance_batches_for_shards([[0], [1], [2]], num_shards=2)
    assert repeated == 1 and balanced == [[0], [1], [2], [0]]


def test_repeated_batch_is_logged_once_by_the_first_shard(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batching, "_SAID_REPEATS", set())
    with caplog.at_level(logging.WARNING, logger="transformer_lab.data.batching"):
        shards = [
            token_budget_batches([5, 5, 5], 5, num_shards=2, shard_index=index, epoch=epoch)
            for epoch in range(3)
            for index in range(2)
        ]
    assert [len(shard) for shard in shards] == [2] * 6
    # Each rank balances the same batches every epoch: said once (was: by every rank, every epoch).
    assert [record.getMessage()[:21] for record in caplog.records] == ["1 batch(es) repeated "]


def test_over_long_example_and_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match=r"lengths\[2\] is 40, longer than max_tokens=32"):
        token_budget_batches([3, 4, 40, 5], max_tokens=32, shuffle=True, seed=0, epoch=0)
    with pytest.raises(ValueError, match="lengths must be non-empty"):
        token_budget_batches([], max_tokens=32)
    with pytest.raises(ValueError, match=r"lengths\[1\] must be >= 1"):
        token_budget_batches([3, 0], max_tokens=32)
    with pytest.raises(ValueError, match="shard_index must be in"):
        token_budget_batches([3], max_tokens=32, num_shards=2, shard_index=2)
    with pytest.raises(ValueError, match="max_tokens"):
        token_budget_batches([3], max_tokens=0)


def test_fixed_size_batches() -> None:
    batches = fixed_size_batches(10, 4, shuffle=False, seed=0, epoch=0)
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]  # remainder kept
    shuffled = fixed_size_batches(10, 4, shuffle=True, seed=0, epoch=0)
    assert sorted(flatten(shuffled)) == list(range(10))
    assert shuffled == fixed_size_batches(10, 4, shuffle=True, seed=0, epoch=0)
    assert shuffled != fixed_size_batches(10, 4, shuffle=True, seed=0, epoch=1)
    shards = [fixed_size_batches(10, 4, True, 0, 0, num_shards=2, shard_index=index) for index in range(2)]
    assert len(shards[0]) == len(shards[1]) == 2
    assert sorted(flatten(shards[0]) + flatten(shards[1])) == list(range(10))
