"""Mask helpers against brute-force references."""

from __future__ import annotations

import torch

from transformer_lab.nn import masks


def test_causal_mask_matches_a_brute_force_loop() -> None:
    for query_len, key_len in [(1, 1), (4, 4), (1, 5), (3, 7)]:
        offset = key_len - query_len
        expected = torch.tensor([[key > query + offset for key in range(key_len)] for query in range(query_len)])
        assert torch.equal(masks.causal_mask(query_len, key_len), expected)


def test_padding_masks_mark_padding_true() -> None:
    ids = torch.tensor([[5, 6, 0, 0], [7, 0, 0, 0]])
    assert torch.equal(masks.padding_mask(ids, pad_id=0), ids == 0)
    assert torch.equal(masks.lengths_to_padding_mask(torch.tensor([2, 1]), max_len=4), ids == 0)


def test_merge_keeps_bool_and_sums_float_and_converts_polarity_once() -> None:
    attn = masks.causal_mask(3)  # [3, 3]
    padding = torch.tensor([[False, False, True]])  # [1, 3]
    merged = masks.merge_masks(attn, padding, batch_size=1, num_heads=2, dtype=torch.float32)
    assert merged.dtype == torch.bool and merged.shape == (1, 1, 3, 3)
    assert torch.equal(merged[0, 0], attn | padding)
    assert torch.equal(masks.to_sdpa_mask(merged), ~merged)
    float_merged = masks.merge_masks(attn.float() * -1.0, padding, batch_size=1, num_heads=2, dtype=torch.float32)
    assert torch.equal(torch.isneginf(float_merged[0, 0]), padding.expand(3, 3))
    assert float_merged[0, 0, 1, 0] == -0.0 and float_merged[0, 0, 0, 1] == -1.0


def test_fully_hidden_rows_are_found_and_unhidden() -> None:
    hidden = torch.tensor([[True, True], [False, True]])
    rows = masks.fully_hidden_rows(hidden)
    assert torch.equal(rows, torch.tensor([[True], [False]]))
    assert torch.equal(masks.unhide_rows(hidden, rows), torch.tensor([[False, False], [False, True]]))
