"""The walk of every tensor's shape through attention, as a reader would annotate it.

The model prints nothing: a :class:`~transformer_lab.nn.tracing.ShapeRecorder` collects
the shapes while one forward pass runs on the explicit path, and this module formats them.
"""

from __future__ import annotations

import dataclasses

import torch

from transformer_lab import nn as lab_nn
from transformer_lab.nn.tracing import ShapeRecord, recording_shapes


def explain_attention(
    d_model: int = 32,
    nhead: int = 1,
    src_len: int = 5,
    tgt_len: int = 3,
    batch: int = 2,
    pad_last: int | None = None,
) -> list[ShapeRecord]:
    """Run one cross-attention call (``tgt_len`` queries over ``src_len`` keys) and record shapes.

    The last ``pad_last`` source positions of the first sequence are padding, so that the
    key padding mask appears in the walk too; None is 1, or 0 for a source of one position
    (a sequence keeps at least one key), so that every ``src_len`` of ``explain`` runs.
    """
    _check_sizes(d_model=d_model, nhead=nhead, src_len=src_len, tgt_len=tgt_len, batch=batch)
    if pad_last is None:
        pad_last = min(1, src_len - 1)
    if not 0 <= pad_last < src_len:
        raise ValueError(f"pad_last must be in [0, src_len={src_len}), got {pad_last}")
    attention = lab_nn.MultiheadAttention(d_model, nhead)
    query = torch.randn(tgt_len, batch, d_model)  # [tgt_len, batch, embed_dim], the tutorials' layout
    memory = torch.randn(src_len, batch, d_model)  # [src_len, batch, embed_dim]
    lengths = torch.full((batch,), src_len)
    lengths[0] = src_len - pad_last
    key_padding_mask = lab_nn.lengths_to_padding_mask(lengths, src_len)  # [batch, src_len]
    with torch.no_grad(), recording_shapes() as recorder:
        attention(query, memory, memory, key_padding_mask=key_padding_mask, need_weights=False)
    return recorder.records


def explain_transformer(
    d_model: int = 32,
    nhead: int = 2,
    num_layers: int = 2,
    src_len: int = 5,
    tgt_len: int = 3,
    batch: int = 2,
) -> list[ShapeRecord]:
    """Record shapes through a whole encoder-decoder: every attention of every layer."""
    _check_sizes(d_model=d_model, nhead=nhead, src_len=src_len, tgt_len=tgt_len, batch=batch, num_layers=num_layers)
    model = lab_nn.Transformer(d_model, nhead, num_layers, num_layers, dim_feedforward=2 * d_model, dropout=0.0)
    src = torch.randn(src_len, batch, d_model)
    tgt = torch.randn(tgt_len, batch, d_model)
    with torch.no_grad(), recording_shapes() as recorder:
        model(src, tgt, tgt_mask=lab_nn.causal_mask(tgt_len))
    return [_named_lengths(entry) for entry in recorder.records]


# An attention module names its query length tgt_len and its key length src_len (torch's L and S),
# true of cross-attention; a self-attention's queries and keys are one sequence, named by its side.
_SELF_ATTENTION_LENGTHS = {"encoder": ("tgt_len", "src_len"), "decoder": ("src_len", "tgt_len")}


def _named_lengths(entry: ShapeRecord) -> ShapeRecord:
    """``entry`` with a self-attention's lengths named as the sequence it attends over (encoder: src_len)."""
    side = entry.scope.split(".", 1)[0]
    if not entry.scope.endswith(".self_attn") or side not in _SELF_ATTENTION_LENGTHS:
        return entry
    return dataclasses.replace(entry, dims=entry.dims.replace(*_SELF_ATTENTION_LENGTHS[side]))


def format_shape_walk(records: list[ShapeRecord]) -> str:
    """One line per tensor: scope, name, shape, dimension names; a blank line between modules."""
    lines: list[str] = []
    previous_scope = None
    for entry in records:
        if entry.scope != previous_scope:
            if lines:
                lines.append("")
            lines.append(f"== {entry.scope or 'attention'} ==")
            previous_scope = entry.scope
        shape = "[" + ", ".join(str(size) for size in entry.shape) + "]"
        note = f"  ({entry.note})" if entry.note else ""
        lines.append(f"  {entry.name:<34} {shape:<18} {entry.dims}{note}")
    return "\n".join(lines)


def _check_sizes(**sizes: int) -> None:
    for name, value in sizes.items():
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if sizes["d_model"] % sizes["nhead"] != 0:
        raise ValueError(f"d_model must be divisible by nhead, got d_model={sizes['d_model']}, nhead={sizes['nhead']}")
