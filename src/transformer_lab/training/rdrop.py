"""R-Drop's loss (Liang et al. 2021): one batch under two dropout draws, kept consistent.

The model runs each example twice; dropout makes the two outputs differ. The loss is the
label-smoothed cross-entropy of both copies plus ``alpha`` times their symmetric KL
divergence, ``sum over tokens of (KL(p_1 || p_2) + KL(p_2 || p_1)) / 2``, both divided by
the tokens of both copies. That scale is R-Drop's fairseq recipe, so its published alphas
(5 for translation) mean the same here. Both directions of the divergence carry gradient.

Written as one function with its gradient by hand: composed by autograd from the
cross-entropy and two softmaxes, a step cast and walked the [N, V] logits about twice as
often (``benchmarks/bench_elementwise.py``, ``docs/experiments/2026-12-de-en-recipe.md``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .losses import check_loss_arguments

__all__ = ["check_dropout_for_rdrop", "rdrop_loss"]

# Past this the loss's float32 arithmetic overflows (alpha x the divergence), and long before it
# the divergence drowns the cross-entropy: the paper chose 5 and below.
MAX_ALPHA = 1e6


def check_alpha(alpha: float, name: str = "alpha") -> None:
    """Refuse an ``alpha`` that is not a finite float in [0, :data:`MAX_ALPHA`]."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= MAX_ALPHA:
        raise ValueError(f"{name}: expected a float in [0, {MAX_ALPHA:g}] (0 = off), got {alpha!r}")


def check_dropout_for_rdrop(alpha: float, dropout: float, name: str = "train.rdrop_alpha") -> None:
    """Refuse R-Drop on a model without dropout: its two passes would be one, at twice the cost."""
    if alpha > 0.0 and dropout == 0.0:
        raise ValueError(
            f"{name}: expected it only with model.dropout > 0 (R-Drop compares two dropout draws of each batch; "
            f"without dropout they are the same), got {alpha!r} with model.dropout 0.0"
        )


def rdrop_loss(
    first: torch.Tensor, second: torch.Tensor, target_ids: torch.Tensor, smoothing: float, alpha: float
) -> torch.Tensor:
    """The mean label-smoothed cross-entropy of both copies plus ``alpha`` x their symmetric KL per token.

    ``first`` and ``second`` are the logits of the same N targets under two dropout draws;
    every target counts (pass only the real tokens). The smoothing mass goes to the V - 1
    wrong classes, as in :func:`~transformer_lab.training.losses.label_smoothed_cross_entropy`.
    Computed in float32 whatever the logits' dtype.

    Shape:
        first, second: [N, V]. target_ids: [N], class ids. Returns a scalar.
    """
    check_loss_arguments(smoothing, "mean")
    check_alpha(alpha)
    if first.dim() != 2 or first.shape != second.shape:
        raise ValueError(
            "first, second: expected two [N, V] logits of one shape, "
            f"got {tuple(first.shape)} and {tuple(second.shape)}"
        )
    if target_ids.shape != first.shape[:1]:
        raise ValueError(f"target_ids: expected shape {tuple(first.shape[:1])}, got {tuple(target_ids.shape)}")
    if smoothing > 0.0 and first.shape[1] < 2:
        raise ValueError(f"first: label smoothing needs a vocabulary of at least 2, got V={first.shape[1]}")
    if first.shape[0] == 0:
        # Zero that still depends on the logits, so backward() works and adds nothing.
        return (first.sum() + second.sum()) * 0.0
    # Under autocast vecdot would run in bf16: the sums stay float32.
    with torch.autocast(first.device.type, enabled=False):
        return _RDropLoss.apply(first, second, target_ids.long(), smoothing, alpha)


class _RDropLoss(torch.autograd.Function):
    """:func:`rdrop_loss` with a hand-written backward.

    With ``a``, ``b`` the log-softmaxes of a row's two copies, ``p_a``, ``p_b`` their
    softmaxes, ``d = a - b``, ``r_a = sum p_a d`` (= KL(p_a || p_b)) and ``r_b = sum p_b d``
    (= -KL(p_b || p_a)), and ``q`` the smoothed target distribution, a row's loss is

        -sum q a - sum q b + alpha (r_a - r_b) / 2,

    and its gradients ``p_a - q + alpha (p_a (d - r_a + 1) - p_b) / 2`` for the first logits
    and ``p_b - q + alpha (p_b (r_b - d + 1) - p_a) / 2`` for the second, all over 2N.
    """

    @staticmethod
    def forward(
        ctx: Any, first: torch.Tensor, second: torch.Tensor, target_ids: torch.Tensor, smoothing: float, alpha: float
    ) -> torch.Tensor:
        wrong_weight = smoothing / (first.shape[1] - 1) if smoothing > 0.0 else 0.0
        true_weight = 1.0 - smoothing - wrong_weight  # the true class's weight beyond wrong_weight
        dtype = torch.promote_types(first.dtype, torch.float32)  # float64 kept for gradcheck
        log_a = F.log_softmax(first.to(dtype), dim=-1)  # [N, V]
        log_b = F.log_softmax(second.to(dtype), dim=-1)  # [N, V]
        targets = target_ids.unsqueeze(1)  # [N, 1]
        true_scores = log_a.gather(1, targets) + log_b.gather(1, targets)  # [N, 1]
        cross_entropy = -(true_weight * true_scores.sum() + wrong_weight * (log_a.sum() + log_b.sum()))
        difference = log_a.sub_(log_b)  # [N, V]: a - b, in log_a's memory
        probabilities_a = torch.add(difference, log_b).exp_()  # [N, V]
        probabilities_b = log_b.exp_()  # [N, V], in log_b's memory
        sum_a = torch.linalg.vecdot(probabilities_a, difference)  # [N]
        sum_b = torch.linalg.vecdot(probabilities_b, difference)  # [N]
        count = 2 * first.shape[0]
        ctx.save_for_backward(probabilities_a, probabilities_b, difference, sum_a, sum_b, target_ids)
        ctx.constants = (true_weight, wrong_weight, alpha, count, first.dtype, second.dtype)
        return (cross_entropy + alpha * (sum_a - sum_b).sum() / 2) / count

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None, None, None]:
        (grad_output,) = grad_outputs  # a scalar
        probabilities_a, probabilities_b, difference, sum_a, sum_b, target_ids = ctx.saved_tensors
        true_weight, wrong_weight, alpha, count, first_dtype, second_dtype = ctx.constants
        scale = grad_output.to(difference.dtype) / count
        half_alpha = alpha / 2
        targets = target_ids.unsqueeze(1)  # [N, 1]
        true_part = torch.full_like(sum_a, -true_weight).unsqueeze(1)  # [N, 1]
        # [N, V] each, the saved tensors left as they are (a second backward gives the same):
        # p_a (1 + alpha/2 (d - r_a + 1)) - alpha/2 p_b - q, and its mirror for b.
        grad_a = torch.mul(difference, half_alpha).add_((1 + half_alpha * (1 - sum_a)).unsqueeze(1))
        grad_a.mul_(probabilities_a).sub_(probabilities_b, alpha=half_alpha).sub_(wrong_weight)
        grad_a.scatter_add_(1, targets, true_part).mul_(scale)
        grad_b = torch.mul(difference, -half_alpha).add_((1 + half_alpha * (1 + sum_b)).unsqueeze(1))
        grad_b.mul_(probabilities_b).sub_(probabilities_a, alpha=half_alpha).sub_(wrong_weight)
        grad_b.scatter_add_(1, targets, true_part).mul_(scale)
        return grad_a.to(first_dtype), grad_b.to(second_dtype), None, None, None
