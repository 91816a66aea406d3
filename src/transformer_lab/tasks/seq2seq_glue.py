"""Glue shared by the sequence-to-sequence tasks: epoch batches, the loss function and id clean-up."""

from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import Tensor, nn

from transformer_lab.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    Seq2SeqBatch,
    collate_pairs,
    collated_lengths,
    token_budget_batches,
)
from transformer_lab.training import label_smoothed_cross_entropy


def seq2seq_loss_fn(smoothing: float, pad_id: int) -> Callable[[nn.Module, Seq2SeqBatch], Tensor]:
    """The Trainer's ``loss_fn``: label-smoothed cross-entropy over non-padding targets."""

    def loss_fn(model: nn.Module, batch: Seq2SeqBatch) -> Tensor:
        device = next(model.parameters()).device
        batch = batch.to(device)
        logits = model(batch.src_ids, batch.tgt_in_ids)  # [B, T, V]
        return label_smoothed_cross_entropy(logits, batch.tgt_out_ids, smoothing=smoothing, ignore_index=pad_id)

    return loss_fn


def strip_generated(ids: Tensor | list[int], eos_id: int, pad_id: int) -> list[int]:
    """Tokens of one generated row up to (not including) its first ``eos``, padding removed."""
    tokens = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
    if eos_id in tokens:
        tokens = tokens[: tokens.index(eos_id)]
    return [token for token in tokens if token != pad_id]


def bucketed_epoch_batches(
    train_ids: Sequence[tuple[list[int], list[int]]],
    max_tokens: int,
    seed: int,
    epoch: int,
    num_shards: int = 1,
    shard_index: int = 0,
) -> list[Seq2SeqBatch]:
    """One epoch of length-bucketed token-budget batches of encoded pairs, shuffled by (seed, epoch).

    With ``num_shards`` > 1, the share of process ``shard_index`` (see ``token_budget_batches``).
    """
    lengths = collated_lengths(train_ids)
    indices = token_budget_batches(
        lengths, max_tokens, shuffle=True, seed=seed, epoch=epoch, num_shards=num_shards, shard_index=shard_index
    )
    return [collate_pairs([train_ids[index] for index in batch], PAD_ID, BOS_ID, EOS_ID) for batch in indices]


def validation_loss(model: nn.Module, encoded_pairs: Sequence[tuple[list[int], list[int]]], max_tokens: int) -> float:
    """The mean cross-entropy per target token (no smoothing, eos included) of ``encoded_pairs``, teacher-forced.

    The number fine-tuning is judged by: it needs no decoding and, with the same tokenizer,
    compares models token for token. Batches of at most ``max_tokens`` padded tokens, in
    length order; every pair counts.
    """
    if not encoded_pairs:
        raise ValueError("encoded_pairs: expected at least one validation pair, got none")
    device = next(model.parameters()).device
    lengths = collated_lengths(encoded_pairs)
    total, count = 0.0, 0
    for indices in token_budget_batches(lengths, max(max_tokens, max(max(pair) for pair in lengths)), shuffle=False):
        batch = collate_pairs([encoded_pairs[index] for index in indices], PAD_ID, BOS_ID, EOS_ID).to(device)
        logits = model(batch.src_ids, batch.tgt_in_ids)  # [B, T, V]
        total += float(label_smoothed_cross_entropy(logits.float(), batch.tgt_out_ids, 0.0, PAD_ID, reduction="sum"))
        count += batch.num_target_tokens
    return total / count


def check_fits_positional_table(
    encoded_pairs: Sequence[tuple[list[int], list[int]]], pairs: Sequence[tuple[str, str]], max_len: int, name: str
) -> None:
    """Refuse, before training starts, a pair whose source or target (with bos) exceeds ``max_len`` tokens.

    Otherwise the first batch that holds it fails deep in the model, maybe hours in;
    nothing is cut or dropped here either: the user raises model.max_len or removes it.
    """
    for index, (source_ids, target_ids) in enumerate(encoded_pairs):
        longest = max(len(source_ids), len(target_ids) + 1)
        if longest > max_len:
            source, target = pairs[index]
            raise ValueError(
                f"{name}: pair {index + 1} ({source[:40]!r} -> {target[:40]!r}) has {longest} subword tokens on one "
                f"side (with bos/eos), expected at most model.max_len={max_len}; raise model.max_len or leave it out"
            )
