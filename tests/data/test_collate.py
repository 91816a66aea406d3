"""Tests for transformer_lab.data.collate."""

import pytest
import torch

from transformer_lab.data.collate import (
    ClassificationBatch,
    Seq2SeqBatch,
    collate_classification,
    collate_pairs,
    collated_lengths,
    pad_sequences,
)
from transformer_lab.data.vocabulary import BOS_ID, EOS_ID, PAD_ID

PAIRS = [([4, 5, 6], [7, 8]), ([9], [4, 5, 6, 7]), ([5, 5], [])]


def test_pad_sequences() -> None:
    padded = pad_sequences([[4, 5], [6], []], pad_id=0)
    assert padded.dtype == torch.long
    assert padded.tolist() == [[4, 5], [6, 0], [0, 0]]
    assert pad_sequences([torch.tensor([1, 2, 3])], pad_id=9).tolist() == [[1, 2, 3]]
    with pytest.raises(ValueError, match="sequences must be a non-empty"):
        pad_sequences([], pad_id=0)
    with pytest.raises(ValueError, match=r"sequences\[1\].*integer"):
        pad_sequences([[1], [1.7]], pad_id=0)  # never truncated to 1
    with pytest.raises(ValueError, match=r"sequences\[0\].*non-negative"):
        pad_sequences([[-1]], pad_id=0)
    with pytest.raises(ValueError, match="pad_id"):
        pad_sequences([[1]], pad_id=-1)


def test_collate_pairs_shapes_and_layout() -> None:
    batch = collate_pairs(PAIRS, PAD_ID, BOS_ID, EOS_ID)
    assert isinstance(batch, Seq2SeqBatch)
    assert batch.batch_size == 3
    assert batch.src_ids.shape == (3, 3)  # [B, S]
    assert batch.tgt_in_ids.shape == (3, 5)  # [B, T], T = longest target + 1
    assert batch.tgt_out_ids.shape == (3, 5)
    assert batch.src_ids.tolist() == [[4, 5, 6], [9, 0, 0], [5, 5, 0]]
    assert batch.tgt_in_ids.tolist() == [[2, 7, 8, 0, 0], [2, 4, 5, 6, 7], [2, 0, 0, 0, 0]]
    assert batch.tgt_out_ids.tolist() == [[7, 8, 3, 0, 0], [4, 5, 6, 7, 3], [3, 0, 0, 0, 0]]
    assert batch.num_target_tokens == (2 + 1) + (4 + 1) + (0 + 1) == 9
    assert batch.num_source_tokens == 6
    # The shift: the decoder input at t+1 is the output at t, for every real position.
    for row, (_, target) in enumerate(PAIRS):
        shifted_in = batch.tgt_in_ids[row, 1 : len(target) + 1].tolist()
        assert shifted_in == batch.tgt_out_ids[row, : len(target)].tolist()
        assert batch.tgt_in_ids[row, 0].item() == BOS_ID
        assert batch.tgt_out_ids[row, len(target)].item() == EOS_ID
        assert (batch.tgt_out_ids[row, len(target) + 1 :] == PAD_ID).all()


def test_collate_pairs_other_pad() -> None:
    batch = collate_pairs(PAIRS, pad_id=1, bos_id=2, eos_id=3)
    assert batch.src_ids.tolist() == [[4, 5, 6], [9, 1, 1], [5, 5, 1]]
    assert batch.num_source_tokens == 6
    assert collated_lengths(PAIRS) == [(3, 3), (1, 5), (2, 1)]


def test_batch_to_device() -> None:
    batch = collate_pairs(PAIRS, PAD_ID, BOS_ID, EOS_ID).to("cpu")
    assert batch.src_ids.device.type == "cpu" and batch.num_target_tokens == 9
    moved = collate_classification([([4, 5], 1)], PAD_ID).to(torch.device("cpu"))
    assert moved.labels.tolist() == [1]


def test_collate_pairs_errors() -> None:
    with pytest.raises(ValueError, match="pairs must be a non-empty"):
        collate_pairs([], PAD_ID, BOS_ID, EOS_ID)
    with pytest.raises(ValueError, match=r"pairs\[1\] target must not contain pad_id"):
        collate_pairs([([4], [5]), ([4], [5, 0])], PAD_ID, BOS_ID, EOS_ID)
    with pytest.raises(ValueError, match=r"pairs\[0\] source must be non-empty"):
        collate_pairs([([], [5])], PAD_ID, BOS_ID, EOS_ID)
    with pytest.raises(ValueError, match=r"pairs\[0\] must be a \(source ids, target ids\) pair"):
        collate_pairs([([4], [5], [6])], PAD_ID, BOS_ID, EOS_ID)
    with pytest.raises(ValueError, match="pad_id must differ"):
        collate_pairs(PAIRS, 0, 0, 3)


def test_collate_classification() -> None:
    batch = collate_classification([([4, 5, 6], 2), ([7], 0)], pad_id=PAD_ID)
    assert isinstance(batch, ClassificationBatch)
    assert batch.token_ids.shape == (2, 3) and batch.labels.shape == (2,)
    assert batch.token_ids.tolist() == [[4, 5, 6], [7, 0, 0]]
    assert batch.labels.dtype == torch.long and batch.labels.tolist() == [2, 0]
    with pytest.raises(ValueError, match="examples must be a non-empty"):
        collate_classification([], PAD_ID)
    with pytest.raises(ValueError, match=r"examples\[1\] label"):
        collate_classification([([4], 0), ([5], 1.5)], PAD_ID)
    with pytest.raises(ValueError, match=r"examples\[0\] token ids must be non-empty"):
        collate_classification([([], 0)], PAD_ID)
