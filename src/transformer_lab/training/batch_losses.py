"""The Trainer's loss functions for the two batch kinds (pairs, labelled texts), and a validation loss of pairs.

Shape legend: B batch, T target length, D d_model, V vocabulary, C classes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from torch import Tensor, nn

from transformer_lab.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    ClassificationBatch,
    Seq2SeqBatch,
    collate_pairs,
    collated_lengths,
    token_budget_batches,
)
from transformer_lab.data.collate import to_device

from .distributed import DataParallel
from .generator_loss import generator_cross_entropy
from .losses import label_smoothed_cross_entropy
from .rdrop import rdrop_loss

# Labels are never padding; the loss needs an ignore_index no label can take.
_NO_IGNORED_LABEL = -1


def seq2seq_loss_fn(
    smoothing: float, pad_id: int, rdrop_alpha: float = 0.0
) -> Callable[[nn.Module, Seq2SeqBatch], Tensor]:
    """The Trainer's ``loss_fn``: label-smoothed cross-entropy over non-padding targets.

    ``rdrop_alpha`` > 0: R-Drop (:mod:`.rdrop`).
    """

    def loss_fn(model: nn.Module, batch: Seq2SeqBatch) -> Tensor:
        device = next(model.parameters()).device
        generator = DataParallel.unwrap(model).generator
        assert isinstance(generator, nn.Module)  # a Seq2SeqTransformer's
        if rdrop_alpha > 0.0:
            # The real tokens' flat positions [N], found where the batch was collated (the host):
            # found on a GPU, as boolean indexing would, the host would wait for it every step.
            positions = to_device((batch.tgt_out_ids != pad_id).flatten().nonzero().squeeze(1), device)
            batch = batch.to(device)
            # Both copies in one forward: each row draws its own dropout masks.
            hidden = model(batch.src_ids.repeat(2, 1), batch.tgt_in_ids.repeat(2, 1), apply_generator=False)
            first, second = (half.flatten(0, 1).index_select(0, positions) for half in hidden.chunk(2))  # [N, D] each
            targets = batch.tgt_out_ids.flatten().index_select(0, positions)  # [N]
            # [N, V] each: only the real tokens' logits, so padding adds no divergence.
            return rdrop_loss(generator(first), generator(second), targets, smoothing, rdrop_alpha)
        batch = batch.to(device)
        # The hidden states, not the [B, T, V] logits: the generator is applied a chunk of
        # rows at a time, which keeps the logits and their gradient out of peak memory.
        hidden = model(batch.src_ids, batch.tgt_in_ids, apply_generator=False)  # [B, T, D]
        return generator_cross_entropy(hidden, generator, batch.tgt_out_ids, smoothing=smoothing, ignore_index=pad_id)

    return loss_fn


def classification_loss_fn(
    smoothing: float, rdrop_alpha: float = 0.0
) -> Callable[[nn.Module, ClassificationBatch], Tensor]:
    """The Trainer's ``loss_fn``: label-smoothed cross-entropy over the batch's articles.

    ``rdrop_alpha`` > 0: R-Drop (:mod:`.rdrop`).
    """

    def loss_fn(model: nn.Module, batch: ClassificationBatch) -> Tensor:
        batch = batch.to(next(model.parameters()).device)
        if rdrop_alpha > 0.0:
            first, second = model(batch.token_ids.repeat(2, 1)).chunk(2)  # [B, C] each
            return rdrop_loss(first, second, batch.labels, smoothing, rdrop_alpha)
        logits = model(batch.token_ids)  # [B, C]
        return label_smoothed_cross_entropy(logits, batch.labels, smoothing=smoothing, ignore_index=_NO_IGNORED_LABEL)

    return loss_fn


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
