"""The shape explainer records the tutorials' walk of shapes without any print in the model."""

from __future__ import annotations

import pytest

from transformer_lab.lab.explain import explain_attention, explain_transformer, format_shape_walk


def test_attention_walk_has_the_documented_shapes() -> None:
    records = explain_attention(d_model=32, nhead=4, src_len=5, tgt_len=3, batch=2)
    shapes = {record.name: record.shape for record in records}
    assert shapes["query as given"] == (3, 2, 32)  # [tgt_len, batch, embed_dim]
    assert shapes["W_q"] == (32, 32)
    assert shapes["scores = Q K^T / sqrt(head_dim)"] == (2, 4, 3, 5)
    assert shapes["mask (True/-inf = hidden)"] == (2, 1, 1, 5)  # the key padding mask, broadcast
    text = format_shape_walk(records)
    assert "[batch, heads, tgt_len, src_len]" in text


def test_full_walk_covers_every_attention_of_every_layer() -> None:
    records = explain_transformer(d_model=16, nhead=2, num_layers=2)
    scopes = {record.scope for record in records}
    assert scopes == {
        "encoder.layers.0.self_attn",
        "encoder.layers.1.self_attn",
        "decoder.layers.0.self_attn",
        "decoder.layers.0.multihead_attn",
        "decoder.layers.1.self_attn",
        "decoder.layers.1.multihead_attn",
    }


@pytest.mark.parametrize("walk", ["attention", "full"])
def test_every_length_is_named_by_the_sequence_whose_size_it_has(walk: str) -> None:
    # 7 source and 3 target positions: each src_len (tgt_len) dimension holds 7 (3), or 1 where "|1" says it
    # broadcasts. Was, in the full walk: the encoder's self-attention queries (7) named tgt_len.
    sizes = {"batch": 2, "heads": 2, "src_len": 7, "tgt_len": 3, "embed_dim": 8, "kdim": 8, "vdim": 8, "head_dim": 4}
    explain = explain_attention if walk == "attention" else explain_transformer
    records = explain(d_model=8, nhead=2, src_len=7, tgt_len=3, batch=2)
    for record in records:
        names = record.dims.strip("[]").split(", ")
        assert len(names) == len(record.shape), record
        for name, size in zip(names, record.shape):
            name, _, broadcast = name.partition("|")
            assert size == sizes[name] or (broadcast == "1" and size == 1), (record.scope, record.name, name, size)


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="d_model must be divisible by nhead, got d_model=10, nhead=3"):
        explain_attention(d_model=10, nhead=3)
    with pytest.raises(ValueError, match="batch must be >= 1, got 0"):
        explain_attention(batch=0)


def test_a_source_of_one_position_is_walked_without_padding_unless_padding_is_asked() -> None:
    records = explain_attention(src_len=1)
    assert {record.name: record.shape for record in records}["scores = Q K^T / sqrt(head_dim)"] == (2, 1, 3, 1)
    with pytest.raises(ValueError, match=r"pad_last must be in \[0, src_len=1\), got 1"):
        explain_attention(src_len=1, pad_last=1)  # asked for, it would hide the one key
