"""Label-smoothed cross-entropy that ignores padding (section 5.4 of the paper).

The target distribution for a token whose true class is ``y`` is

    q(y) = 1 - smoothing,    q(k) = smoothing / (V - 1) for every k != y,

that is, the smoothing mass is spread over the ``V - 1`` wrong classes, and the loss is the
cross-entropy ``-sum_k q(k) log p(k)``. Two choices to know about:

- ``F.cross_entropy(label_smoothing=e)`` spreads ``e`` over all ``V`` classes, the true one
  included, so it gives the true class ``1 - e + e / V``. The two agree when
  ``e = smoothing * V / (V - 1)``; the tests hold them equal that way.
- The Annotated Transformer uses ``KLDivLoss(q || p)``, which is this cross-entropy minus
  the entropy of ``q``: a constant, so the gradients are the same but the reported loss
  is not. We report the cross-entropy so that ``smoothing=0`` is the ordinary
  cross-entropy (and its exponential the perplexity). Unlike the Annotated Transformer we
  do not zero the padding column of ``q``: the padding class is one of the ``V - 1`` wrong
  classes like any other.

Positions whose target is ``ignore_index`` (the padding id) contribute nothing, whatever
their logits; ``reduction="mean"`` divides by the number of the other positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch
import torch.nn.functional as F

from ..nn import host_reads

__all__ = ["label_smoothed_cross_entropy"]

_REDUCTIONS = ("mean", "sum")


def check_loss_arguments(smoothing: float, reduction: str) -> None:
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing: expected a float in [0, 1), got {smoothing!r}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction: expected one of {_REDUCTIONS}, got {reduction!r}")


def _check_inputs(logits: torch.Tensor, target_ids: torch.Tensor, ignore_index: int) -> None:
    if logits.dim() not in (2, 3):
        raise ValueError(f"logits: expected shape [B, T, V] or [N, V], got {tuple(logits.shape)}")
    if not logits.is_floating_point():
        raise ValueError(f"logits: expected a floating-point tensor, got dtype {logits.dtype}")
    check_target_ids(
        target_ids,
        logits.shape[:-1],
        logits.shape[-1],
        ignore_index,
        f"the logits' shape {tuple(logits.shape)} without the vocabulary axis",
    )


def check_target_ids(
    target_ids: torch.Tensor, expected_shape: Sequence[int], vocabulary_size: int, ignore_index: int, shape_from: str
) -> None:
    """Refuse target ids not shaped ``expected_shape`` (``shape_from`` says whose), or not integer ids in range."""
    if tuple(target_ids.shape) != tuple(expected_shape):
        raise ValueError(
            f"target_ids: expected shape {tuple(expected_shape)} ({shape_from}), got {tuple(target_ids.shape)}"
        )
    if target_ids.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        raise ValueError(f"target_ids: expected an integer tensor, got dtype {target_ids.dtype}")
    if host_reads.host_reads_wait(target_ids.device):
        # Reading the range would stall the device at every batch; the ids were checked against
        # the vocabulary when the batches were made, and an id out of range stops the kernel that reads it.
        return
    real_ids = target_ids[target_ids != ignore_index]
    if real_ids.numel() > 0:
        smallest, largest = int(real_ids.min()), int(real_ids.max())
        if smallest < 0 or largest >= vocabulary_size:
            raise ValueError(
                f"target_ids: expected ids in [0, {vocabulary_size}) or ignore_index="
                f"{ignore_index}, got values in [{smallest}, {largest}]"
            )


def label_smoothed_cross_entropy(
    logits: torch.Tensor,
    target_ids: torch.Tensor,
    smoothing: float,
    ignore_index: int,
    reduction: Literal["mean", "sum"] = "mean",
) -> torch.Tensor:
    """Cross-entropy against the label-smoothed target distribution, padding ignored.

    The smoothing mass goes to the ``V - 1`` wrong classes (see the module docstring).
    Computed in float32 whatever the logits' dtype, so that it is exact enough under
    bf16 autocast. With ``reduction="mean"`` and no non-ignored position the result is 0
    (``F.cross_entropy`` gives NaN there), so an all-padding batch cannot poison training.

    Shape:
        logits: [B, T, V] or [N, V]. target_ids: [B, T] or [N], integer ids.
        Returns a scalar.
    """
    check_loss_arguments(smoothing, reduction)
    _check_inputs(logits, target_ids, ignore_index)
    vocabulary_size = logits.shape[-1]
    if smoothing > 0.0 and vocabulary_size < 2:
        raise ValueError(f"logits: label smoothing needs a vocabulary of at least 2, got V={vocabulary_size}")
    # Flattening lets one code path serve both [B, T, V] and [N, V].
    flat_logits = logits.reshape(-1, vocabulary_size)  # [N, V]
    flat_target_ids = target_ids.reshape(-1).long()  # [N]
    keep_mask = flat_target_ids != ignore_index  # [N], True = a real token
    if smoothing == 0.0:
        log_probs = F.log_softmax(flat_logits.float(), dim=-1)  # [N, V]
        if reduction == "mean" and host_reads.host_reads_wait(keep_mask.device):
            # Counted on the device: reading whether any token is real would wait for it (nn/host_reads.py).
            summed = F.nll_loss(log_probs, flat_target_ids, ignore_index=ignore_index, reduction="sum")
            return summed / _real_tokens(keep_mask)
        if reduction == "mean" and not keep_mask.any():
            # Zero that still depends on the logits, so backward() works and adds nothing.
            return log_probs.sum() * 0.0
        # nll_loss with the requested reduction: F.cross_entropy's result to the last bit
        # (same summation order). It skips ignored positions, so their logits never count.
        return F.nll_loss(log_probs, flat_target_ids, ignore_index=ignore_index, reduction=reduction)
    # Ignored positions read class 0 instead of the ignore id (which may be out of range);
    # their loss and gradient are zeroed in the function.
    safe_target_ids = flat_target_ids.masked_fill(~keep_mask, 0)  # [N]
    per_token = _SmoothedCrossEntropy.apply(flat_logits, safe_target_ids, keep_mask, smoothing)  # [N]
    total = per_token.sum()
    if reduction == "mean":
        # With no real token this is 0 (the sum of zeros), not 0 / 0.
        return total / _real_tokens(keep_mask)
    return total


def _real_tokens(keep_mask: torch.Tensor) -> torch.Tensor:
    """The count of real tokens, at least 1, kept on the mask's device (no read)."""
    return keep_mask.sum().clamp(min=1)


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Per-token label-smoothed cross-entropy from logits, with a hand-written backward.

    With ``w = smoothing / (V - 1)`` and ``log Z`` the log-sum-exp of a row, the loss of a
    token with true class ``y`` is

        log Z - (1 - smoothing - w) * x_y - w * sum_k x_k,

    and its gradient ``softmax(x) - w - (1 - smoothing - w) * onehot(y)``. Written out, the
    forward reads the logits three times and the backward builds the gradient in place;
    composed from ``log_softmax`` and two ``nll_loss`` (two [N, V] zero-fills, more passes)
    it is slower, and so is ``F.cross_entropy`` (``benchmarks/bench_elementwise.py``).
    Positions outside ``keep_mask`` get loss 0 and gradient 0.

    Shape: logits [N, V] (any float dtype; computed in float32 at least), target_ids [N]
    valid class ids, keep_mask [N] bool; returns [N] in that precision.
    """

    # ctx is Any, as in torch's own signatures: FunctionCtx declares no attributes, and torch
    # documents setting them on it to reach backward.
    @staticmethod
    def forward(
        ctx: Any,
        logits: torch.Tensor,
        target_ids: torch.Tensor,
        keep_mask: torch.Tensor,
        smoothing: float,
    ) -> torch.Tensor:
        wrong_weight = smoothing / (logits.shape[-1] - 1)
        true_weight = 1.0 - smoothing - wrong_weight  # the true class's weight beyond w
        # float32 at least (bf16 logits under autocast), float64 kept for gradcheck.
        scores = logits.to(torch.promote_types(logits.dtype, torch.float32))  # [N, V]
        log_normaliser = torch.logsumexp(scores, dim=-1)  # [N]
        true_scores = scores.gather(1, target_ids.unsqueeze(1)).squeeze(1)  # [N]
        per_token = log_normaliser - true_weight * true_scores - wrong_weight * scores.sum(dim=-1)  # [N]
        # masked_fill, not a multiplication by the mask, so that a non-finite logit at an
        # ignored position cannot leak in as 0 * inf = NaN.
        per_token = per_token.masked_fill(~keep_mask, 0.0)
        # The float32 scores, not the logits, are kept: a mixed bf16 - float32 subtraction
        # in backward is several times slower on the CPU than casting once here.
        ctx.save_for_backward(scores, log_normaliser, target_ids, keep_mask)
        ctx.logits_dtype = logits.dtype
        ctx.weights = (true_weight, wrong_weight)
        return per_token

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        (grad_per_token,) = grad_outputs  # [N]: one output, one gradient
        scores, log_normaliser, target_ids, keep_mask = ctx.saved_tensors
        true_weight, wrong_weight = ctx.weights
        row_weight = grad_per_token.to(log_normaliser.dtype).masked_fill(~keep_mask, 0.0).unsqueeze(1)  # [N, 1]
        grad = torch.sub(scores, log_normaliser.unsqueeze(1)).exp_()  # [N, V]: the softmax
        grad.mul_(row_weight).sub_(wrong_weight * row_weight)  # [N, V]
        grad.scatter_add_(1, target_ids.unsqueeze(1), -true_weight * row_weight)  # [N, V]
        return grad.to(ctx.logits_dtype), None, None, None
