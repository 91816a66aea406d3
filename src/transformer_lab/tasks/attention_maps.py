"""Attention weights of a trained model, read through the shape recorder (no model changes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from transformer_lab.data import SubwordTokenizer
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.nn.tracing import ATTENTION_WEIGHTS, recording_shapes

_WEIGHTS_NAME = ATTENTION_WEIGHTS


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
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), recording_shapes(keep_tensors=True) as recorder:
            model(src_ids, tgt_in_ids)
    finally:
        model.train(was_training)
    return {
        record.scope: record.tensor
        for record in recorder.records
        if record.name == _WEIGHTS_NAME and record.tensor is not None
    }


def token_labels(tokenizer: SubwordTokenizer, ids: Sequence[int]) -> list[str]:
    """One readable label per subword id: its text, or its token string where that is blank or unprintable.

    A byte-level token alone may decode to a control character (byte 0x12) or half a
    character, which no font draws; its token string spells the bytes in printable form.
    """
    labels = []
    for token_id in ids:
        text = tokenizer.decode([token_id]).strip()
        labels.append(text if text and text.isprintable() else tokenizer.id_to_token(token_id))
    return labels
