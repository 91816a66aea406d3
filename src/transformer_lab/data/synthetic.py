"""Synthetic sequence-to-sequence tasks: the Annotated Transformer's copy task and two siblings.

Each example is a pair (source ids, target ids) of plain symbols, without `<bos>` or
`<eos>`; collation adds those. The symbols are the ids 4..vocab_size-1, right after the
four specials, so a vocabulary from `Vocabulary.from_size(vocab_size)` covers them and
no symbol ever collides with padding or a boundary marker.

    copy     target = source
    reverse  target = source reversed
    sort     target = source sorted in ascending id order

Sources are drawn uniformly: the length uniform in [min_length, max_length], each symbol
uniform over the symbols, from a `torch.Generator` seeded with `seed`, so the same
arguments always give the same pairs, on any machine. `SyntheticData` holds a run's
splits, the held-out sources never seen in training; `batches_of` collates them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from transformer_lab.data._checks import check_integer
from transformer_lab.data.batching import fixed_size_batches
from transformer_lab.data.collate import Seq2SeqBatch, collate_pairs
from transformer_lab.data.vocabulary import BOS_ID, EOS_ID, NUM_SPECIAL_TOKENS, PAD_ID, Vocabulary

SYNTHETIC_TASKS: tuple[str, ...] = ("copy", "reverse", "sort")
# One example: (source ids, target ids), symbols only.
SyntheticPair = tuple[list[int], list[int]]

_TARGET_FUNCTIONS: dict[str, Callable[[list[int]], list[int]]] = {
    "copy": lambda source: list(source),
    "reverse": lambda source: source[::-1],
    "sort": lambda source: sorted(source),
}

# Sources are drawn this many rows at a time, to bound memory for large datasets; it is a
# constant so that the draws, and hence the pairs, never depend on anything but the
# arguments.
_ROWS_PER_DRAW = 4096


@dataclass(frozen=True)
class SyntheticTask:
    """One synthetic task and its data distribution; the fields are checked on creation.

    Args:
        name: one of SYNTHETIC_TASKS ("copy", "reverse", "sort").
        vocab_size: the total vocabulary size including the four specials; symbols are
            the ids 4..vocab_size-1, so it must be at least 6 (two symbols or more).
        min_length: the shortest source, >= 1.
        max_length: the longest source, >= min_length.
    """

    name: str
    vocab_size: int
    min_length: int
    max_length: int

    def __post_init__(self) -> None:
        if self.name not in SYNTHETIC_TASKS:
            raise ValueError(f"task must be one of {', '.join(SYNTHETIC_TASKS)}; got {self.name!r}")
        check_integer("vocab_size", self.vocab_size, minimum=NUM_SPECIAL_TOKENS + 2)
        check_integer("min_length", self.min_length, minimum=1)
        check_integer("max_length", self.max_length, minimum=1)
        if self.max_length < self.min_length:
            raise ValueError(f"max_length must be >= min_length ({self.min_length}), got {self.max_length}")

    @property
    def first_symbol_id(self) -> int:
        """The smallest symbol id (4: the first id after the specials)."""
        return NUM_SPECIAL_TOKENS

    def vocabulary(self) -> Vocabulary:
        """The matching vocabulary: the specials, then the symbols as decimal strings."""
        return Vocabulary.from_size(self.vocab_size)

    def target_for(self, source: Sequence[int]) -> list[int]:
        """The target this task asks for, given a source of symbol ids."""
        return _TARGET_FUNCTIONS[self.name](list(source))

    def make_pairs(self, num_examples: int, seed: int) -> list[tuple[list[int], list[int]]]:
        """Draw `num_examples` (source, target) pairs, deterministically from `seed`.

        Args:
            num_examples: how many pairs, >= 1.
            seed: the seed of the torch.Generator, >= 0.
        """
        num_examples = check_integer("num_examples", num_examples, minimum=1)
        seed = check_integer("seed", seed, minimum=0)
        generator = torch.Generator().manual_seed(seed)
        pairs: list[tuple[list[int], list[int]]] = []
        for start in range(0, num_examples, _ROWS_PER_DRAW):
            rows = min(_ROWS_PER_DRAW, num_examples - start)
            # Shape: lengths [rows]; symbols [rows, max_length], each row cut to its length.
            lengths = torch.randint(self.min_length, self.max_length + 1, (rows,), generator=generator)
            symbols = torch.randint(self.first_symbol_id, self.vocab_size, (rows, self.max_length), generator=generator)
            for row, length in zip(symbols.tolist(), lengths.tolist()):
                source = row[:length]
                pairs.append((source, self.target_for(source)))
        return pairs


def make_synthetic_pairs(
    task: str,
    num_examples: int,
    vocab_size: int,
    min_length: int,
    max_length: int,
    seed: int,
) -> list[tuple[list[int], list[int]]]:
    """Draw (source ids, target ids) pairs for a synthetic task; see `SyntheticTask`.

    Args:
        task: one of SYNTHETIC_TASKS ("copy", "reverse", "sort").
        num_examples: how many pairs, >= 1.
        vocab_size: the total vocabulary size including the four specials, >= 6.
        min_length: the shortest source, >= 1.
        max_length: the longest source, >= min_length.
        seed: the seed of the torch.Generator, >= 0.
    """
    return SyntheticTask(task, vocab_size, min_length, max_length).make_pairs(num_examples, seed)


@dataclass
class SyntheticData:
    """A run's examples: the training pairs, and validation and test pairs whose sources training never saw."""

    train: list[SyntheticPair]
    validation: list[SyntheticPair]
    test: list[SyntheticPair]

    @classmethod
    def draw(cls, task: SyntheticTask, num_train: int, num_validation: int, num_test: int, seed: int) -> SyntheticData:
        """``num_train`` pairs drawn with ``seed``; the held-out ones with ``seed + 1``, each source new."""
        train = task.make_pairs(num_train, seed)
        seen = {tuple(source) for source, _ in train}
        # Draw extra held-out candidates, then keep only unseen ones: short sequences repeat often.
        candidates = task.make_pairs(4 * (num_validation + num_test) + 100, seed + 1)
        unseen: list[SyntheticPair] = []
        for source, target in candidates:
            if tuple(source) not in seen:
                seen.add(tuple(source))
                unseen.append((source, target))
        needed = num_validation + num_test
        if len(unseen) < needed:
            raise ValueError(
                f"data: only {len(unseen)} distinct unseen sequences exist for min_length={task.min_length}, "
                f"max_length={task.max_length}, vocab_size={task.vocab_size}; need {needed}"
            )
        return cls(train=train, validation=unseen[:num_validation], test=unseen[num_validation:needed])


def batches_of(
    pairs: list[SyntheticPair],
    batch_size: int,
    shuffle: bool,
    seed: int,
    epoch: int,
    num_shards: int = 1,
    shard_index: int = 0,
) -> list[Seq2SeqBatch]:
    """Collated batches of ``batch_size`` pairs; with shards, this process's share of them."""
    indices = fixed_size_batches(
        len(pairs), batch_size, shuffle=shuffle, seed=seed, epoch=epoch, num_shards=num_shards, shard_index=shard_index
    )
    return [collate_pairs([pairs[index] for index in batch], PAD_ID, BOS_ID, EOS_ID) for batch in indices]
