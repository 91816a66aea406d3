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

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["LabelSmoothingLoss", "label_smoothed_cross_entropy"]

_REDUCTIONS = ("mean", "sum")


def _check_arguments(smoothing: float, reduction: str) -> None:
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing: expected a float in [0, 1), got {smoothing!r}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction: expected one of {_REDUCTIONS}, got {reduction!r}")


def _check_inputs(logits: torch.Tensor, target_ids: torch.Tensor, ignore_index: int) -> None:
    if logits.dim() not in (2, 3):
        raise ValueError(
            f"logits: expected shape [B, T, V] or [N, V], got {tuple(logits.shape)}"
        )
    if not logits.is_floating_point():
        raise ValueError(f"logits: expected a floating-point tensor, got dtype {logits.dtype}")
    expected_target_shape = tuple(logits.shape[:-1])
    if tuple(target_ids.shape) != expected_target_shape:
        raise ValueError(
            f"target_ids: expected shape {expected_target_shape} (the logits' shape "
            f"{tuple(logits.shape)} without the vocabulary axis), got {tuple(target_ids.shape)}"
        )
    if target_ids.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        raise ValueError(f"target_ids: expected an integer tensor, got dtype {target_ids.dtype}")
    vocabulary_size = logits.shape[-1]
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
    _check_arguments(smoothing, reduction)
    _check_inputs(logits, target_ids, ignore_index)
    vocabulary_size = logits.shape[-1]
    if smoothing > 0.0 and vocabulary_size < 2:
        raise ValueError(
            f"logits: label smoothing needs a vocabulary of at least 2, got V={vocabulary_size}"
        )
    # Flattening lets one code path serve both [B, T, V] and [N, V].
    log_probs = F.log_softmax(logits.float().reshape(-1, vocabulary_size), dim=-1)  # [N, V]
    flat_target_ids = target_ids.reshape(-1).long()  # [N]
    keep_mask = flat_target_ids != ignore_index  # [N], True = a real token
    token_count = int(keep_mask.sum())
    if reduction == "mean" and token_count == 0:
        # Zero that still depends on the logits, so backward() works and adds nothing.
        return log_probs.sum() * 0.0
    # The true-class term goes through nll_loss with the requested reduction, so that with
    # smoothing=0 the result is F.cross_entropy's to the last bit (same summation order).
    # nll_loss skips ignored positions, so their logits never reach the result.
    true_class_term = F.nll_loss(
        log_probs, flat_target_ids, ignore_index=ignore_index, reduction=reduction
    )
    if smoothing == 0.0:
        return true_class_term
    # -sum over the wrong classes of log p = -(sum over all classes) - (-log p(y)).
    negative_log_likelihood = F.nll_loss(
        log_probs, flat_target_ids, ignore_index=ignore_index, reduction="none"
    )  # [N], 0 at ignored positions
    wrong_class_total = -log_probs.sum(dim=-1) - negative_log_likelihood  # [N]
    # masked_fill, not a multiplication by the mask, so that a non-finite logit at a
    # padded position cannot leak in as 0 * inf = NaN.
    wrong_class_total = wrong_class_total.masked_fill(~keep_mask, 0.0).sum()
    if reduction == "mean":
        wrong_class_total = wrong_class_total / token_count
    return (1.0 - smoothing) * true_class_term + (
        smoothing / (vocabulary_size - 1)
    ) * wrong_class_total


class LabelSmoothingLoss(nn.Module):
    """Module form of :func:`label_smoothed_cross_entropy`.

    Args:
        smoothing: the probability mass taken from the true class and spread evenly over
            the ``V - 1`` others; 0 gives the ordinary cross-entropy.
        ignore_index: the target id whose positions are ignored (the padding id).
        reduction: ``"mean"`` over non-ignored tokens, or ``"sum"``.

    Shape:
        logits: [B, T, V] or [N, V]. target_ids: [B, T] or [N]. Returns a scalar.
    """

    def __init__(
        self,
        smoothing: float,
        ignore_index: int,
        reduction: Literal["mean", "sum"] = "mean",
    ) -> None:
        super().__init__()
        _check_arguments(smoothing, reduction)
        self.smoothing = smoothing
        self.ignore_index = ignore_index
        self.reduction = reduction

    def forward(self, logits: torch.Tensor, target_ids: torch.Tensor) -> torch.Tensor:
        """Return the smoothed loss of ``logits`` against ``target_ids``.

        Shape:
            logits: [B, T, V] or [N, V]. target_ids: [B, T] or [N]. Returns a scalar.
        """
        return label_smoothed_cross_entropy(
            logits, target_ids, self.smoothing, self.ignore_index, self.reduction
        )

    def extra_repr(self) -> str:
        return (
            f"smoothing={self.smoothing}, ignore_index={self.ignore_index}, "
            f"reduction={self.reduction!r}"
        )
