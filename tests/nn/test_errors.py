"""Every documented error path raises ValueError naming the argument, the expectation and the value."""

from __future__ import annotations

import pytest
import torch

from transformer_lab import nn as ours
from transformer_lab.nn import masks


@pytest.fixture
def attention() -> ours.MultiheadAttention:
    return ours.MultiheadAttention(8, 2, batch_first=True)


def test_embed_dim_not_divisible_by_heads() -> None:
    with pytest.raises(ValueError, match=r"embed_dim must be divisible by num_heads, got embed_dim=10, num_heads=3"):
        ours.MultiheadAttention(10, 3)


def test_wrong_rank_and_width(attention: ours.MultiheadAttention) -> None:
    with pytest.raises(ValueError, match=r"query must be 3-D \(batched\) or 2-D \(unbatched\), got shape \[8\]"):
        attention(torch.randn(8), torch.randn(8), torch.randn(8))
    with pytest.raises(ValueError, match=r"key must have the same rank as query \(3-D\), got shape \[4, 8\]"):
        attention(torch.randn(2, 3, 8), torch.randn(4, 8), torch.randn(4, 8))
    with pytest.raises(ValueError, match=r"value must have last dimension 8, got shape \[2, 4, 6\]"):
        attention(torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 6))


def test_batch_and_length_disagreements(attention: ours.MultiheadAttention) -> None:
    with pytest.raises(ValueError, match=r"share the batch size, got query 2, key 3, value 3"):
        attention(torch.randn(2, 3, 8), torch.randn(3, 4, 8), torch.randn(3, 4, 8))
    with pytest.raises(ValueError, match=r"key and value must have the same length, got key 4, value 5"):
        attention(torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 5, 8))


def test_mask_shapes_and_dtypes(attention: ours.MultiheadAttention) -> None:
    query, key = torch.randn(2, 3, 8), torch.randn(2, 4, 8)
    with pytest.raises(
        ValueError, match=r"key_padding_mask must have shape \[batch, src_len\] = \[2, 4\], got \[2, 3\]"
    ):
        attention(query, key, key, key_padding_mask=torch.zeros(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"attn_mask must have shape \[3, 4\] or \[4, 3, 4\].*got \[4, 4\]"):
        attention(query, key, key, attn_mask=torch.zeros(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"key_padding_mask must be a bool .* or floating .* got dtype torch.int64"):
        attention(query, key, key, key_padding_mask=torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"attn_mask must be a bool .* got dtype torch.int32"):
        attention(query, key, key, attn_mask=torch.zeros(3, 4, dtype=torch.int32))


def test_layer_and_model_arguments() -> None:
    with pytest.raises(ValueError, match=r"activation must be 'relu', 'gelu' or a callable, got 'tanh'"):
        ours.TransformerEncoderLayer(8, 2, activation="tanh")
    with pytest.raises(ValueError, match=r"num_layers must be >= 1, got 0"):
        ours.TransformerEncoder(ours.TransformerEncoderLayer(8, 2), num_layers=0)
    model = ours.Transformer(8, 2, 1, 1, 16, batch_first=True)
    with pytest.raises(ValueError, match=r"src and tgt must have the same batch size, got src 2, tgt 3"):
        model(torch.randn(2, 4, 8), torch.randn(3, 4, 8))
    with pytest.raises(ValueError, match=r"feature size d_model=8, got src 6, tgt 8"):
        model(torch.randn(2, 4, 6), torch.randn(2, 4, 8))


def test_mask_helpers_reject_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"expected 1 <= query_len <= key_len, got query_len=3, key_len=2"):
        masks.causal_mask(3, 2)
    with pytest.raises(ValueError, match=r"token_ids must be an integer tensor"):
        masks.padding_mask(torch.randn(2, 3), pad_id=0)
    with pytest.raises(ValueError, match=r"max_len must be >= the longest length 5, got 3"):
        masks.lengths_to_padding_mask(torch.tensor([5, 2]), max_len=3)


def test_cache_misuse(attention: ours.MultiheadAttention) -> None:
    with_bias_kv = ours.MultiheadAttention(8, 2, add_bias_kv=True, batch_first=True)
    with pytest.raises(ValueError, match=r"does not support add_bias_kv or add_zero_attn"):
        with_bias_kv(
            torch.randn(1, 1, 8), torch.randn(1, 1, 8), torch.randn(1, 1, 8), cache=ours.AttentionCache(static=False)
        )
    with pytest.raises(ValueError, match=r"needs batched inputs"):
        attention(torch.randn(1, 8), torch.randn(1, 8), torch.randn(1, 8), cache=ours.AttentionCache(static=False))
