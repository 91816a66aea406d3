"""The synthetic tasks' data: random symbol sequences from a seed, held-out ones never seen in training."""

from __future__ import annotations

from dataclasses import dataclass

from transformer_lab.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    Seq2SeqBatch,
    collate_pairs,
    fixed_size_batches,
    make_synthetic_pairs,
)
from transformer_lab.data._checks import SEED_RANGE, check_int_in_range
from transformer_lab.data.vocabulary import NUM_SPECIAL_TOKENS
from transformer_lab.models.config import MAX_VOCABULARY_SIZE
from transformer_lab.models.embedding import MAX_POSITIONS

# How many examples of each split a synthetic run may ask for (the preset uses 20,000).
MAX_SYNTHETIC_EXAMPLES = 1_000_000
Pair = tuple[list[int], list[int]]


@dataclass(frozen=True)
class SyntheticDataConfig:
    """What the random sequences look like and how many there are."""

    task: str = "copy"  # "copy", "reverse" or "sort"
    vocab_size: int = 14  # 4 specials + 10 symbols, as small as the Annotated Transformer's
    min_length: int = 1
    max_length: int = 10
    num_train: int = 20_000  # distinct examples per epoch
    num_validation: int = 200  # scored (exact match) at each evaluation
    num_test: int = 1_000  # held out; none of their sources occurs in training
    batch_size: int = 64
    seed: int = 1234

    def __post_init__(self) -> None:
        # The examples are drawn at once and held as Python lists (a few hundred bytes each).
        for name in ("num_train", "num_validation", "num_test"):
            check_int_in_range(f"data.{name}", getattr(self, name), 1, MAX_SYNTHETIC_EXAMPLES)
        check_int_in_range("data.vocab_size", self.vocab_size, NUM_SPECIAL_TOKENS + 2, MAX_VOCABULARY_SIZE)
        check_int_in_range("data.min_length", self.min_length, 1, MAX_POSITIONS - 2)
        # <bos> and <eos> around the longest sequence must fit the positional table.
        check_int_in_range("data.max_length", self.max_length, self.min_length, MAX_POSITIONS - 2)
        check_int_in_range("data.batch_size", self.batch_size, 1, MAX_SYNTHETIC_EXAMPLES)
        check_int_in_range("data.seed", self.seed, *SEED_RANGE)


@dataclass
class SyntheticData:
    train: list[Pair]
    validation: list[Pair]
    test: list[Pair]


def build_data(config: SyntheticDataConfig) -> SyntheticData:
    """Training pairs, and validation/test pairs whose sources never occur in training."""

    def pairs(count: int, seed: int) -> list[Pair]:
        return make_synthetic_pairs(config.task, count, config.vocab_size, config.min_length, config.max_length, seed)

    train = pairs(config.num_train, config.seed)
    seen = {tuple(source) for source, _ in train}
    # Draw extra held-out candidates, then keep only unseen ones: short sequences repeat often.
    candidates = pairs(4 * (config.num_validation + config.num_test) + 100, config.seed + 1)
    unseen: list[Pair] = []
    for source, target in candidates:
        if tuple(source) not in seen:
            seen.add(tuple(source))
            unseen.append((source, target))
    needed = config.num_validation + config.num_test
    if len(unseen) < needed:
        raise ValueError(
            f"data: only {len(unseen)} distinct unseen sequences exist for min_length={config.min_length}, "
            f"max_length={config.max_length}, vocab_size={config.vocab_size}; need {needed}"
        )
    return SyntheticData(
        train=train, validation=unseen[: config.num_validation], test=unseen[config.num_validation : needed]
    )


def batches_of(
    pairs: list[Pair], batch_size: int, shuffle: bool, seed: int, epoch: int, num_shards: int = 1, shard_index: int = 0
) -> list[Seq2SeqBatch]:
    """Collated batches of ``batch_size`` pairs; with shards, this process's share of them."""
    indices = fixed_size_batches(
        len(pairs), batch_size, shuffle=shuffle, seed=seed, epoch=epoch, num_shards=num_shards, shard_index=shard_index
    )
    return [collate_pairs([pairs[index] for index in batch], PAD_ID, BOS_ID, EOS_ID) for batch in indices]
