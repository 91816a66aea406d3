"""Attention weights of a trained model, read through the shape recorder (no model changes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from transformer_lab.models.seq2seq import Seq2SeqTransformer
from transformer_lab.nn import TransformerDecoder
from transformer_lab.nn.eval_mode import eval_mode
from transformer_lab.nn.tracing import ATTENTION_WEIGHTS, recording_shapes


@dataclass
class AttentionMap:
    """One output's attention over its input, to draw as a heat map (the figures live in ``lab``).

    Shape:
        ``weights`` ``[T, S]``: row t is what the model read when it chose output token t;
        ``columns`` holds S labels (the input's tokens), ``rows`` T (the output's).
    """

    weights: Tensor
    columns: list[str]
    rows: list[str]
    title: str


def attention_maps(model: Seq2SeqTransformer, src_ids: Tensor, tgt_in_ids: Tensor) -> dict[str, Tensor]:
    """Every attention module's weights for one teacher-forced pass, keyed by module path.

    Shape:
        src_ids ``[B, S]``, tgt_in_ids ``[B, T]``; values ``[B, H, L, S']`` where L/S' are
        the query/key lengths of that attention (e.g. ``[B, H, T, S]`` for cross-attention).
    """
    with eval_mode(model), torch.no_grad(), recording_shapes(keep_tensors=True) as recorder:
        model(src_ids, tgt_in_ids)
    return {
        record.scope: record.tensor
        for record in recorder.records
        if record.name == ATTENTION_WEIGHTS and record.tensor is not None
    }


def cross_attention(model: Seq2SeqTransformer, source_ids: Sequence[int], target_ids: Sequence[int]) -> Tensor:
    """The decoder's cross-attention weights while it reads ``source_ids`` and writes ``target_ids``.

    The decoder is teacher-forced with ``<bos>`` followed by ``target_ids``, so row ``t``
    is what the model looked at when it chose target token ``t`` (row 0: the first token).

    Shape:
        returns ``[N, H, T, S]`` on the model's device, with T = ``len(target_ids) + 1`` and S = ``len(source_ids)``.
    """
    if len(source_ids) == 0:
        raise ValueError("source_ids: expected at least one token id, got none")
    device = next(model.parameters()).device  # the ids go where the model is (a GPU's, when served there)
    src_ids = torch.tensor([list(source_ids)], device=device)  # [1, S]
    tgt_in_ids = torch.tensor([[model.bos_id, *target_ids]], device=device)  # [1, T]
    maps = attention_maps(model, src_ids, tgt_in_ids)
    decoder = model.transformer.decoder
    assert isinstance(decoder, TransformerDecoder), type(decoder)  # Seq2SeqTransformer builds its own stacks
    return torch.stack([maps[f"decoder.layers.{layer}.multihead_attn"][0] for layer in range(len(decoder.layers))])


def last_layer_map(
    model: Seq2SeqTransformer,
    source_ids: Sequence[int],
    target_ids: Sequence[int],
    columns: list[str],
    target_labels: list[str],
    title: str,
) -> AttentionMap:
    """The last decoder layer's cross-attention (mean of heads) while ``model`` writes ``target_ids``.

    ``columns`` labels the source tokens and ``target_labels`` the written ones (rows get
    ``<bos>`` first); ``title`` begins the figure's title.
    """
    layers = cross_attention(model, source_ids, target_ids)  # [N, H, T, S]
    return AttentionMap(
        weights=layers[-1].mean(dim=0).float(),  # [T, S]
        columns=columns,
        rows=["<bos>", *target_labels],
        title=f"{title}cross-attention, decoder layer {len(layers) - 1} (mean of heads)",
    )
