"""Property tests of the batchers: no example lost or repeated, budgets kept, shards even (hypothesis)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lab.data.batching import balance_batches_for_shards, fixed_size_batches, token_budget_batches

PROPERTY_SETTINGS = settings(max_examples=80, deadline=None)

single_lengths = st.lists(st.integers(1, 30), min_size=1, max_size=60)
pair_lengths = st.lists(st.tuples(st.integers(1, 30), st.integers(1, 30)), min_size=1, max_size=60)


@PROPERTY_SETTINGS
@given(
    lengths=single_lengths | pair_lengths,
    budget_slack=st.integers(0, 200),
    shuffle=st.booleans(),
    seed=st.integers(0, 2**31),
    epoch=st.integers(0, 50),
)
def test_token_budget_batches_keep_every_example_once_within_the_budget(
    lengths: list, budget_slack: int, shuffle: bool, seed: int, epoch: int
) -> None:
    longest = [max(length) if isinstance(length, tuple) else length for length in lengths]
    max_tokens = max(longest) + budget_slack
    batches = token_budget_batches(lengths, max_tokens, shuffle=shuffle, seed=seed, epoch=epoch)
    assert sorted(index for batch in batches for index in batch) == list(range(len(lengths)))
    for batch in batches:
        assert batch and len(batch) * max(longest[index] for index in batch) <= max_tokens
    assert batches == token_budget_batches(lengths, max_tokens, shuffle=shuffle, seed=seed, epoch=epoch)


@PROPERTY_SETTINGS
@given(lengths=single_lengths, max_tokens=st.integers(30, 120), num_shards=st.integers(2, 5), seed=st.integers(0, 1000))
def test_shards_cover_every_example_and_run_the_same_number_of_steps(
    lengths: list[int], max_tokens: int, num_shards: int, seed: int
) -> None:
    full = token_budget_batches(lengths, max_tokens, seed=seed)
    _, num_repeated = balance_batches_for_shards(full, num_shards)
    shards = [
        token_budget_batches(lengths, max_tokens, seed=seed, num_shards=num_shards, shard_index=index)
        for index in range(num_shards)
    ]
    assert len({len(shard) for shard in shards}) == 1
    counts = Counter(index for shard in shards for batch in shard for index in batch)
    assert set(counts) == set(range(len(lengths)))  # nothing lost
    # Repeats only in the documented corner (single-example batches), and exactly as counted.
    assert sum(counts.values()) - len(lengths) == num_repeated
    if num_repeated:
        assert all(len(batch) == 1 for shard in shards for batch in shard)
    for shard in shards:
        assert all(len(batch) * max(lengths[index] for index in batch) <= max_tokens for batch in shard)


@PROPERTY_SETTINGS
@given(
    num_examples=st.integers(1, 200), batch_size=st.integers(1, 50), shuffle=st.booleans(), seed=st.integers(0, 1000)
)
def test_fixed_size_batches_keep_every_example_once(
    num_examples: int, batch_size: int, shuffle: bool, seed: int
) -> None:
    batches = fixed_size_batches(num_examples, batch_size, shuffle=shuffle, seed=seed)
    assert sorted(index for batch in batches for index in batch) == list(range(num_examples))
    assert all(len(batch) == batch_size for batch in batches[:-1]) and 1 <= len(batches[-1]) <= batch_size
