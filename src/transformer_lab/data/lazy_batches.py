"""An epoch's batches over a `TokenStore`, collated one at a time when the training loop asks.

The plan of an epoch is `BatchSpans`, a few bytes an example; a batch becomes tensors only
when it is read (``batches[k]``, or while iterating), so no epoch of tensors is ever held
and the first step starts at once, whatever the corpus size. Batch k is exactly what
`collate_pairs` / `collate_classification` give for the examples of the plan's batch k.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from transformer_lab.data.batching import BatchSpans, token_budget_spans
from transformer_lab.data.bpe_dropout import PairSplit
from transformer_lab.data.collate import (
    ClassificationBatch,
    Seq2SeqBatch,
    collate_classification,
    collate_pairs,
)
from transformer_lab.data.token_store import TokenStore
from transformer_lab.data.vocabulary import BOS_ID, EOS_ID, PAD_ID


def pair_length_table(store: TokenStore) -> np.ndarray:
    """The collated (source, target) length of every pair (see `collate.collated_lengths`), int32 [N, 2]."""
    table = np.empty((len(store), 2), dtype=np.int32)
    table[:, 0] = store.lengths("source")
    table[:, 1] = store.lengths("target") + 1
    return table


class PairBatches(Sequence[Seq2SeqBatch]):
    """The `Seq2SeqBatch` of each span of ``spans``, collated from ``store`` on access."""

    def __init__(
        self,
        store: TokenStore,
        spans: BatchSpans,
        split: PairSplit | None = None,
        epoch: int = 0,
    ) -> None:
        self.store = store
        self.spans = spans
        self.split = split  # BPE dropout of the training pairs, drawn by (seed, epoch, pair)
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.spans)

    def indices(self, position: int) -> list[int]:
        """The store indices of the pairs of batch ``position``."""
        return self.spans[position].tolist()

    def __getitem__(self, position: int) -> Seq2SeqBatch:  # type: ignore[override]
        if not -len(self) <= position < len(self):
            raise IndexError(f"batch {position} of an epoch of {len(self)}")
        indices = self.spans[position % len(self)]
        pairs = list(zip(self.store.rows("source", indices), self.store.rows("target", indices), strict=True))
        if self.split is not None:
            pairs = [self.split.pair(*pair, self.epoch, int(index)) for pair, index in zip(pairs, indices)]
        return collate_pairs(pairs, PAD_ID, BOS_ID, EOS_ID)

    def __iter__(self) -> Iterator[Seq2SeqBatch]:
        for position in range(len(self)):
            yield self[position]


def epoch_pair_batches(
    store: TokenStore,
    lengths: np.ndarray,
    max_tokens: int,
    seed: int,
    epoch: int,
    num_shards: int = 1,
    shard_index: int = 0,
    split: PairSplit | None = None,
) -> PairBatches:
    """One epoch of length-bucketed token-budget batches of ``store``'s pairs, shuffled by (seed, epoch).

    ``lengths`` is `pair_length_table(store)`, computed once per run. With ``num_shards``
    > 1, the share of process ``shard_index`` (see `batching.token_budget_batches`).
    ``split``: BPE dropout, drawn anew each epoch; the batches are then planned on the split lengths.
    """
    if split is not None:
        lengths = split.length_table(store, epoch)
    spans = token_budget_spans(lengths, max_tokens, True, seed, epoch, num_shards, shard_index)
    return PairBatches(store, spans, split=split, epoch=epoch)


class ClassificationBatches(Sequence[ClassificationBatch]):
    """The `ClassificationBatch` of each batch of index lists or spans, collated from ``store`` on access."""

    def __init__(self, store: TokenStore, batches: BatchSpans | Sequence[Sequence[int]]) -> None:
        if store.labels is None:
            raise ValueError("store: expected a store with labels for classification batches, got one without")
        self.store = store
        self.batches = batches

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, position: int) -> ClassificationBatch:  # type: ignore[override]
        if not -len(self) <= position < len(self):
            raise IndexError(f"batch {position} of an epoch of {len(self)}")
        indices = self.batches[position % len(self)]
        labels = self.store.labels
        assert labels is not None
        rows = self.store.rows("tokens", indices)
        return collate_classification([(row, int(labels[index])) for row, index in zip(rows, indices)], PAD_ID)

    def __iter__(self) -> Iterator[ClassificationBatch]:
        for position in range(len(self)):
            yield self[position]


def epoch_classification_batches(
    store: TokenStore, max_tokens: int, seed: int, epoch: int, num_shards: int = 1, shard_index: int = 0
) -> ClassificationBatches:
    """One epoch of length-bucketed token-budget batches of ``store``'s labelled texts, shuffled by (seed, epoch).

    With ``num_shards`` > 1, the share of process ``shard_index`` (see `batching.token_budget_batches`).
    """
    spans = token_budget_spans(store.lengths("tokens"), max_tokens, True, seed, epoch, num_shards, shard_index)
    return ClassificationBatches(store, spans)
