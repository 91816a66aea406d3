"""Rebuilding a trained sequence-to-sequence model, and one sentence's attention, for the lab.

Shape legend: S source length, T target length, H heads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from transformer_lab.data import Vocabulary
from transformer_lab.decoding import greedy_search
from transformer_lab.lab.attention_maps import attention_maps
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.tasks.registry import load_trained, tasks_offering

SEQ2SEQ_TASKS = tasks_offering("lab")

__all__ = ["SentenceAttention", "load_seq2seq_checkpoint", "sentence_attention"]


def load_seq2seq_checkpoint(folder: str | os.PathLike[str]) -> Seq2SeqTransformer:
    """The :class:`Seq2SeqTransformer` of a checkpoint (or run) folder of any sequence-to-sequence task, in eval mode.

    Rebuilt by the task that wrote it (``tasks.registry``), so the lab studies exactly the
    model that was trained; a classifier checkpoint is an error naming it.
    """
    model = load_trained(folder, tasks=SEQ2SEQ_TASKS).model
    # Every task in SEQ2SEQ_TASKS rebuilds a Seq2SeqTransformer.
    assert isinstance(model, Seq2SeqTransformer), type(model)
    return model


@dataclass
class SentenceAttention:
    """Every attention module's weights for one sentence, with the tokens of both sides.

    Shape:
        maps values ``[1, H, L, S']`` (encoder self ``S x S``, decoder self ``T x T``,
        cross ``T x S``); ``source_labels`` S entries, ``target_labels`` T entries (the
        decoder inputs, ``<bos>`` first).
    """

    maps: dict[str, Tensor]
    source_labels: list[str]
    target_labels: list[str]


def sentence_attention(
    model: Seq2SeqTransformer,
    source_ids: Sequence[int],
    target_ids: Sequence[int] | None = None,
    source_vocabulary: Vocabulary | None = None,
    target_vocabulary: Vocabulary | None = None,
    max_new_tokens: int | None = None,
) -> SentenceAttention:
    """Attention weights of ``model`` reading ``source_ids`` and writing ``target_ids``.

    Without ``target_ids`` the model writes its own greedy output (up to ``<eos>``, at most
    ``max_new_tokens``, default 2 * S + 10 within the positional table). The labels are the
    vocabularies' tokens, or the ids as text.
    """
    if len(source_ids) == 0:
        raise ValueError("source_ids must hold at least one token id, got none")
    src_ids = torch.tensor([list(source_ids)], dtype=torch.long)  # [1, S]
    model.eval()
    if target_ids is None:
        # The output is fed back whole below, after bos: it must leave that one position.
        positional_limit = model.max_len - 1
        limit = min(2 * src_ids.shape[1] + 10, positional_limit) if max_new_tokens is None else max_new_tokens
        with torch.no_grad():
            generated = greedy_search(model, src_ids, limit).best_ids[0].tolist()  # [L]
        target_ids = generated[: generated.index(model.eos_id)] if model.eos_id in generated else generated
    tgt_in_ids = torch.tensor([[model.bos_id, *target_ids]], dtype=torch.long)  # [1, T]
    maps = attention_maps(model, src_ids, tgt_in_ids)

    def labels(ids: Sequence[int], vocabulary: Vocabulary | None) -> list[str]:
        if vocabulary is None:
            return [str(token_id) for token_id in ids]
        return [vocabulary.id_to_token(token_id) for token_id in ids]

    return SentenceAttention(
        maps=maps,
        source_labels=labels(src_ids[0].tolist(), source_vocabulary),
        target_labels=labels(tgt_in_ids[0].tolist(), target_vocabulary),
    )
