"""Which examples go together in a batch, as lists of example indices.

`token_budget_batches` follows the paper's batching ("sentence pairs were batched together
by approximate sequence length; each batch contained a set of sentence pairs containing
approximately 25000 source tokens and 25000 target tokens"): examples of similar length
share a batch, so little of the batch is padding, and each batch is sized by a token
budget rather than a sentence count, so short sentences come in large batches and long
ones in small batches.

Every function here is deterministic in its arguments: the same (seed, epoch) gives the
same batches on every machine and in every process, which is what lets the shards of a
DistributedDataParallel run agree on the plan without talking to each other.

Sharding. With num_shards = k > 1 every shard must run the same number of steps, or
the collective calls of DistributedDataParallel wait forever. The full list of batches is
first made a multiple of k long:

1. by splitting batches in two: repeatedly the batch with the most examples (the first
   such in order) is replaced by its two halves, which are both within any budget the
   whole batch was within. Every example still appears exactly once, so the shards stay
   disjoint. At most k - 1 splits are needed.
2. only if every batch is down to a single example and the count is still not a
   multiple of k (fewer examples than shards, or a budget so small that each batch holds
   one example), the first r = (-count) % k batches are repeated at the end. Those r
   batches are seen twice in the epoch; `balance_batches_for_shards` returns r, and
   `token_budget_batches` logs a warning with it.

Shard i then takes batches i, i + k, i + 2k, ... of the list.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from transformer_lab.data._checks import check_bool, check_integer

logger = logging.getLogger(__name__)

# One length per example, or one (source, target) pair; a numpy array [N] or [N, 2] too.
Lengths = Sequence[int] | Sequence[tuple[int, int]] | np.ndarray


def _epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """A generator for one (seed, epoch); distinct pairs give unrelated streams.

    A plain seed + epoch would make (seed=1, epoch=0) repeat (seed=0, epoch=1);
    NumPy's SeedSequence hashes the pair instead.
    """
    state = np.random.SeedSequence([seed, epoch]).generate_state(1, dtype=np.uint64)[0]
    return torch.Generator().manual_seed(int(state))


def _length_table(lengths: Lengths) -> np.ndarray:
    """Check `lengths` and return it as an int32 or int64 array [N] or [N, 2]."""
    if isinstance(lengths, (str, bytes)):
        raise ValueError(f"lengths must be a list of ints or of (source, target) pairs, got {lengths!r:.80}")
    try:
        table = np.asarray(lengths)
    except ValueError as error:
        raise ValueError(
            f"lengths must be a list of ints or of (source, target) pairs, got a ragged list ({error})"
        ) from None
    if table.size == 0 or len(table) == 0:
        raise ValueError("lengths must be non-empty, got no examples")
    if not (table.ndim == 1 or (table.ndim == 2 and table.shape[1] == 2)):
        raise ValueError(
            f"lengths must be a list of ints [N] or of (source, target) pairs [N, 2], got shape {table.shape}"
        )
    if table.dtype.kind not in "iu":
        raise ValueError(f"lengths must hold integers, got dtype {table.dtype}")
    # int32 and int64 stay as they are (no copy of a corpus-sized table); others widen.
    if table.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        table = table.astype(np.int64)
    too_short = np.nonzero((table < 1) if table.ndim == 1 else (table < 1).any(axis=1))[0]
    if too_short.size:
        index = int(too_short[0])
        raise ValueError(f"lengths[{index}] must be >= 1, got {table[index].tolist()}")
    return table


def _check_order(shuffle: bool, seed: int, epoch: int, num_shards: int, shard_index: int) -> tuple[int, int, int, int]:
    """The checked (seed, epoch, num_shards, shard_index) of an epoch's order, ``shuffle`` checked too."""
    check_bool("shuffle", shuffle)
    seed = check_integer("seed", seed, minimum=0)
    epoch = check_integer("epoch", epoch, minimum=0)
    num_shards = check_integer("num_shards", num_shards, minimum=1)
    shard_index = check_integer("shard_index", shard_index, minimum=0)
    if shard_index >= num_shards:
        raise ValueError(f"shard_index must be in [0, {num_shards}), got {shard_index}")
    return seed, epoch, num_shards, shard_index


# The repeats already said: (batches repeated, shards, examples).
_SAID_REPEATS: set[tuple[int, int, int]] = set()


def _shard(spans: BatchSpans, num_shards: int, shard_index: int) -> BatchSpans:
    """The batches of one shard, after making their count a multiple of num_shards (module docstring)."""
    if num_shards == 1:
        return spans
    starts, ends, num_repeated = _balanced_spans(spans.starts, spans.ends, num_shards)
    said = (num_repeated, num_shards, len(spans.order))
    # Every shard balances the same batches: the first says so, once, not every rank every epoch.
    if num_repeated and shard_index == 0 and said not in _SAID_REPEATS:
        _SAID_REPEATS.add(said)
        logger.warning(
            "%d batch(es) repeated so that %d shards get %d batches each: every batch holds a "
            "single example and %d examples do not divide evenly",
            num_repeated,
            num_shards,
            len(starts) // num_shards,
            len(spans.order),
        )
    return BatchSpans(spans.order, starts[shard_index::num_shards], ends[shard_index::num_shards])


def balance_batches_for_shards(batches: Sequence[Sequence[int]], num_shards: int) -> tuple[list[list[int]], int]:
    """Make the number of batches a multiple of num_shards (see the module docstring).

    Batches are split in two (largest first) while possible; only when every batch holds
    a single example are the first batches repeated at the end.

    Returns:
        (the new list of batches, the number of batches repeated; 0 when none were).
    """
    num_shards = check_integer("num_shards", num_shards, minimum=1)
    if len(batches) == 0:
        raise ValueError("batches must be non-empty, got no batches")
    spans = BatchSpans.from_lists(batches)
    starts, ends, num_repeated = _balanced_spans(spans.starts, spans.ends, num_shards)
    return BatchSpans(spans.order, starts, ends).to_lists(), num_repeated


def token_budget_batches(
    lengths: Lengths,
    max_tokens: int,
    shuffle: bool = True,
    seed: int = 0,
    epoch: int = 0,
    num_shards: int = 1,
    shard_index: int = 0,
) -> list[list[int]]:
    """Group example indices into length-sorted batches of at most max_tokens padded tokens.

    The padded size of a batch is (its longest example) x (its number of examples); for
    (source, target) pairs an example's length is the longer of the two, so neither
    padded tensor exceeds the budget. Pass lengths as collated (see `collated_lengths`).

    Examples are sorted by length, with ties in a random order drawn from (seed, epoch)
    when `shuffle` (else in index order), and cut greedily into batches. With `shuffle`
    the order of the batches is then shuffled with the same (seed, epoch): each epoch
    differs, and the same epoch is reproduced exactly. Without sharding every index
    appears exactly once. An example longer than max_tokens is a ValueError naming it;
    nothing is dropped. For num_shards > 1 see the module docstring.

    Args:
        lengths: one length per example, or one (source length, target length) pair.
        max_tokens: the padded-token budget of one batch.
        shuffle: shuffle ties and the batch order (training) or not (evaluation).
        seed, epoch: select the random order; both >= 0.
        num_shards, shard_index: this process's share, for DistributedDataParallel.

    Returns:
        the batches of shard `shard_index`, each a list of example indices.
    """
    return token_budget_spans(lengths, max_tokens, shuffle, seed, epoch, num_shards, shard_index).to_lists()


@dataclass(frozen=True)
class BatchSpans:
    """Batches as spans of one index array: batch k is ``order[starts[k] : ends[k]]``.

    The form `token_budget_batches` takes in memory, a few bytes per example, however many
    examples and batches there are (a list of lists of Python ints costs ~36 bytes an index).
    """

    order: np.ndarray  # [N] example indices, int32 below 2**31 examples, else int64
    starts: np.ndarray  # [num_batches] int64
    ends: np.ndarray  # [num_batches] int64

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, position: int) -> np.ndarray:
        """The example indices of batch ``position``."""
        return self.order[int(self.starts[position]) : int(self.ends[position])]

    def to_lists(self) -> list[list[int]]:
        return [self[position].tolist() for position in range(len(self))]

    @classmethod
    def from_lists(cls, batches: Sequence[Sequence[int]]) -> BatchSpans:
        """Index lists as spans of their concatenation, in the same order."""
        sizes = np.fromiter(map(len, batches), dtype=np.int64, count=len(batches))
        ends = np.cumsum(sizes)
        order = np.fromiter(itertools.chain.from_iterable(batches), dtype=np.int64, count=int(sizes.sum()))
        return cls(order, ends - sizes, ends)

    def padding_fraction(self, table: np.ndarray) -> float:
        """The share of padded slots over these batches, in [0, 1) (see `padding_fraction`).

        ``table`` holds the checked lengths, [N] or [N, 2]. Every batch must be non-empty;
        the spans may leave gaps, overlap or repeat (a shard's share).
        """
        columns = table.reshape(len(table), -1)  # [N, C]
        sizes = self.ends - self.starts  # [K]
        # The spans' rows gathered one after another, so that each span is one run of them: a
        # reduction over the spans where they lie (shuffled) would also cover the gaps between.
        gathered_starts = np.cumsum(sizes) - sizes  # [K], where span k begins among the gathered rows
        positions = np.arange(int(sizes.sum())) - np.repeat(gathered_starts - self.starts, sizes)  # [sum(sizes)]
        rows = columns[self.order[positions]]  # [sum(sizes), C]
        longest = np.maximum.reduceat(rows, gathered_starts, axis=0)  # [K, C]
        slots = int((longest.astype(np.int64) * sizes[:, None]).sum())
        return 1.0 - int(rows.sum(dtype=np.int64)) / slots


def token_budget_spans(
    lengths: Lengths,
    max_tokens: int,
    shuffle: bool = True,
    seed: int = 0,
    epoch: int = 0,
    num_shards: int = 1,
    shard_index: int = 0,
) -> BatchSpans:
    """`token_budget_batches` as `BatchSpans`: the same batches, in the same order, held as arrays."""
    table = _length_table(lengths)
    max_tokens = check_integer("max_tokens", max_tokens, minimum=1)
    seed, epoch, num_shards, shard_index = _check_order(shuffle, seed, epoch, num_shards, shard_index)

    budget_lengths = table if table.ndim == 1 else table.max(axis=1)
    too_long = np.nonzero(budget_lengths > max_tokens)[0]
    if too_long.size:
        index = int(too_long[0])
        others = f" (and {too_long.size - 1} more)" if too_long.size > 1 else ""
        raise ValueError(
            f"lengths[{index}] is {table[index].tolist()}, longer than max_tokens={max_tokens}{others}; "
            f"raise max_tokens or filter long examples explicitly before batching"
        )

    if shuffle:
        generator = _epoch_generator(seed, epoch)
        tie_break = torch.randperm(len(budget_lengths), generator=generator).numpy()
        order = np.lexsort((tie_break, budget_lengths))
        del tie_break
    else:
        order = np.argsort(budget_lengths, kind="stable")
    bounds = _greedy_bounds(budget_lengths[order], max_tokens)
    starts, ends = bounds[:-1], bounds[1:]
    if shuffle:
        permutation = torch.randperm(len(starts), generator=generator).numpy()
        starts, ends = starts[permutation], ends[permutation]
    index_type = np.int32 if len(order) < 2**31 else np.int64
    return _shard(BatchSpans(order.astype(index_type), starts, ends), num_shards, shard_index)


def _greedy_bounds(sorted_lengths: np.ndarray, max_tokens: int) -> np.ndarray:
    """The batch boundaries [0, ..., N] of examples taken in order while (count) x (longest) <= max_tokens.

    ``sorted_lengths`` never decrease, so the last example of a batch is its longest and
    (count) x (its length) grows with each example added: each batch's end is a binary
    search, not a step per example.
    """
    count = len(sorted_lengths)
    bounds = [0]
    start = 0
    while start < count:
        low, high = start + 1, min(count, start + max_tokens)  # every example fits alone
        while low < high:
            middle = (low + high + 1) // 2
            if (middle - start) * int(sorted_lengths[middle - 1]) <= max_tokens:
                low = middle
            else:
                high = middle - 1
        bounds.append(low)
        start = low
    return np.asarray(bounds, dtype=np.int64)


def _balanced_spans(starts: np.ndarray, ends: np.ndarray, num_shards: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(starts, ends, repeated): the largest batch split in two while the count is no multiple of num_shards.

    Only when every batch holds a single example are the first batches repeated at the end.
    """
    starts, ends = starts.astype(np.int64), ends.astype(np.int64)
    while len(starts) % num_shards:
        sizes = ends - starts
        largest = int(np.argmax(sizes))  # the first of the largest
        if sizes[largest] < 2:
            break
        middle = int(starts[largest]) + int(sizes[largest]) // 2
        starts = np.insert(starts, largest + 1, middle)
        ends = np.insert(ends, largest, middle)
    num_repeated = -len(starts) % num_shards
    repeat = np.arange(num_repeated) % len(starts)
    return np.concatenate([starts, starts[repeat]]), np.concatenate([ends, ends[repeat]]), num_repeated


def fixed_size_batches(
    num_examples: int,
    batch_size: int,
    shuffle: bool = True,
    seed: int = 0,
    epoch: int = 0,
    num_shards: int = 1,
    shard_index: int = 0,
) -> list[list[int]]:
    """Cut the indices 0..num_examples-1 into batches of batch_size examples.

    With `shuffle` the indices are permuted with (seed, epoch) first. The last batch
    holds the remainder and may be smaller; it is kept, never dropped. For num_shards > 1
    see the module docstring.

    Returns:
        the batches of shard `shard_index`, each a list of example indices.
    """
    num_examples = check_integer("num_examples", num_examples, minimum=1)
    batch_size = check_integer("batch_size", batch_size, minimum=1)
    seed, epoch, num_shards, shard_index = _check_order(shuffle, seed, epoch, num_shards, shard_index)
    if shuffle:
        order = torch.randperm(num_examples, generator=_epoch_generator(seed, epoch)).numpy()
    else:
        order = np.arange(num_examples)
    starts = np.arange(0, num_examples, batch_size, dtype=np.int64)
    ends = np.minimum(starts + batch_size, num_examples)
    return _shard(BatchSpans(order, starts, ends), num_shards, shard_index).to_lists()


def padding_fraction(batches: Sequence[Sequence[int]], lengths: Lengths) -> float:
    """The share of padded slots over all batches, in [0, 1).

    A batch of n examples whose longest is L holds n x L slots, of which the examples
    fill the sum of their lengths. For (source, target) pairs the source and target
    tensors are counted separately and added.
    """
    table = _length_table(lengths)
    if isinstance(batches, (str, bytes)) or len(batches) == 0:
        raise ValueError("batches must be a non-empty list of index lists, got no batches")
    for position, batch in enumerate(batches):
        indices = np.asarray(batch)
        if indices.ndim != 1 or indices.size == 0 or indices.dtype.kind not in "iu":
            raise ValueError(f"batches[{position}] must be a non-empty list of example indices, got {batch!r:.80}")
        if indices.min() < 0 or indices.max() >= len(table):
            raise ValueError(
                f"batches[{position}] must hold indices in [0, {len(table)}), got "
                f"{int(indices.min())}..{int(indices.max())}"
            )
    return BatchSpans.from_lists(batches).padding_fraction(table)


def check_budget_holds_each_example(lengths: Lengths, max_tokens: int, name: str) -> None:
    """Refuse a batch budget (the setting ``name``) smaller than the longest example of ``lengths``.

    Before training, in the setting's name: the batcher's own error speaks of ``lengths[i]``.
    """
    table = np.asarray(lengths)
    if table.size == 0:
        return
    longest = int(table.max())
    if longest > max_tokens:
        count = longer_than(table, max_tokens).size
        raise ValueError(
            f"{name}: expected at least {longest:,}, the padded tokens of the longest training example "
            f"({count:,} of the {len(table):,} are longer than {max_tokens:,}), got {max_tokens:,}; raise it"
        )


def longer_than(lengths: Lengths, max_len: int) -> np.ndarray:
    """The indices of the examples longer than ``max_len`` (a pair: on either side), in order; [K] int."""
    table = np.asarray(lengths)
    return np.nonzero((table if table.ndim == 1 else table.max(axis=1)) > max_len)[0]
