"""The token store: written in chunks and mapped back unchanged, ids and labels; classification batches as before."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from transformer_lab.data import PAD_ID, collate_classification, token_budget_batches
from transformer_lab.data.batching import token_budget_spans
from transformer_lab.data.lazy_batches import ClassificationBatches
from transformer_lab.data.token_store import STORE_FILE, TokenStore, TokenStoreWriter, ids_dtype


def random_rows(count: int, vocab_size: int, seed: int) -> list[list[int]]:
    generator = random.Random(seed)
    return [[generator.randrange(4, vocab_size) for _ in range(generator.randint(1, 30))] for _ in range(count)]


@pytest.mark.parametrize("vocab_size", [200, 8000, 70000])
def test_rows_and_labels_written_in_chunks_read_back_unchanged(tmp_path: Path, vocab_size: int) -> None:
    rows = random_rows(257, vocab_size, seed=vocab_size)
    labels = [random.Random(1).randrange(5) for _ in rows]
    writer = TokenStoreWriter(tmp_path, ("tokens",), ids_dtype(vocab_size), labels=True)
    for start in range(0, len(rows), 50):
        writer.append({"tokens": rows[start : start + 50]}, labels[start : start + 50])
    writer.finish()
    store = TokenStore.open(tmp_path)
    assert len(store) == len(rows)
    assert store.rows("tokens", range(len(rows))) == rows
    assert store.labels is not None and store.labels.tolist() == labels
    assert store.lengths("tokens").tolist() == [len(row) for row in rows]
    assert store.ids("tokens", 0).dtype == ids_dtype(vocab_size)
    assert ids_dtype(vocab_size).itemsize == {200: 1, 8000: 2, 70000: 4}[vocab_size]


def test_a_truncated_or_unknown_store_is_refused_by_name(tmp_path: Path) -> None:
    writer = TokenStoreWriter(tmp_path, ("tokens",), ids_dtype(100))
    writer.append({"tokens": [[5, 6, 7], [8]]})
    writer.finish()
    ids = tmp_path / "tokens.ids"
    ids.write_bytes(ids.read_bytes()[:-1])
    with pytest.raises(ValueError, match=r"tokens.ids: expected 4 bytes .*got 3; prepare the corpus again"):
        TokenStore.open(tmp_path)
    layout = json.loads((tmp_path / STORE_FILE).read_text())
    (tmp_path / STORE_FILE).write_text(json.dumps({**layout, "format_version": 99}))
    with pytest.raises(ValueError, match="expected format_version 1, got 99"):
        TokenStore.open(tmp_path)


def test_classification_batches_from_the_store_equal_the_list_path() -> None:
    rows = random_rows(300, 500, seed=3)
    labels = [index % 4 for index in range(len(rows))]
    store = TokenStore.from_sequences({"tokens": rows}, labels)
    lengths = [len(row) for row in rows]
    for shards in (1, 3):
        for shard in range(shards):
            expected = [
                collate_classification([(rows[index], labels[index]) for index in batch], PAD_ID)
                for batch in token_budget_batches(lengths, 120, True, 5, 2, shards, shard)
            ]
            spans = token_budget_spans(np.asarray(lengths), 120, True, 5, 2, shards, shard)
            lazy = ClassificationBatches(store, spans)
            assert len(lazy) == len(expected)
            for ours, theirs in zip(lazy, expected):
                assert torch.equal(ours.token_ids, theirs.token_ids) and torch.equal(ours.labels, theirs.labels)
