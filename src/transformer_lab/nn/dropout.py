"""Dropout whose random mask is cheap to draw on the CPU.

``torch.nn.Dropout`` draws its mask with ``bernoulli_``, one random number per element.
On the 2-core machine of this project that call alone is 15-20 % of a bf16 training
step of the translation model (profile in docs/experiments/2026-11-training-speed.md). The mask needs
far fewer random bits than that: here one 64-bit word of torch's generator gives four
16-bit uniforms, and an element is dropped when its uniform falls below a threshold.
Forward and backward over a bf16 ``[4096, 1024]`` activation this takes 11 ms there
against ``F.dropout``'s 29 ms (``benchmarks/bench_elementwise.py``).

The drop probability is therefore a multiple of 1/65536: ``p`` is rounded to the nearest
one (0.1 becomes 0.100006), and the kept elements are scaled by the inverse of the
*rounded* keep probability, so the output's expectation is the input exactly, as with
torch's dropout. The masks come from torch's default generator, so ``torch.manual_seed``
makes them reproducible; they are not the masks ``torch.nn.Dropout`` would draw.

Off the CPU (CUDA has a fused dropout kernel) and outside training this is exactly
``torch.nn.functional.dropout``.

:func:`relu_dropout` is ReLU and this dropout in one autograd step, for the feed-forward
block: done apart, backward keeps the ReLU's output and the mask besides the dropped
output that the next linear layer keeps anyway; together they keep only the latter, since
an element passes gradient exactly where it is positive there (the scale is at least 1).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from transformer_lab.nn.arguments import check_flag

_LEVELS = 1 << 16  # 16-bit uniforms
_LOWEST = -(1 << 15)  # int16 values run from -32768 to 32767


def _check_probability(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability p must be in [0, 1], got {p}")


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element of ``input`` with probability ``p`` and scale the rest by 1 / (1 - p).

    Same signature and meaning as ``torch.nn.functional.dropout``; see the module's
    docstring for how the CPU mask is drawn.
    """
    _check_probability(p)
    # A string is true: training="no" dropped.
    if type(training) is not bool:
        training = check_flag("training", training)
    if type(inplace) is not bool:
        inplace = check_flag("inplace", inplace)
    if not training or p == 0.0:
        return input
    if input.device.type != "cpu" or p == 1.0 or input.numel() == 0:
        return F.dropout(input, p, training=True, inplace=inplace)
    dropped_levels = round(p * _LEVELS)
    if dropped_levels == _LEVELS:  # p within 2^-17 of 1: nothing survives, as with p = 1
        return F.dropout(input, 1.0, training=True, inplace=inplace)
    scale = _LEVELS / (_LEVELS - dropped_levels)
    kept = _kept_mask(input.shape, dropped_levels)  # same shape as input
    if inplace:
        return input.mul_(kept).mul_(scale)
    return input.mul(kept).mul_(scale)


def _kept_mask(shape: torch.Size, dropped_levels: int) -> Tensor:
    """1 where an element is kept, 0 where dropped (probability ``dropped_levels`` / 65536), as uint8."""
    count = shape.numel()
    # Four 16-bit uniforms per 64-bit word over the full int64 range ([-2^63, 2^63)).
    words = torch.empty((count + 3) // 4, dtype=torch.int64).random_(-(1 << 63), None)  # [ceil(count / 4)]
    uniforms = words.view(torch.int16)[:count].view(shape)  # [*shape]
    # As uint8 rather than bool: a float-by-uint8 multiply is vectorised, several times
    # faster than masked_fill here.
    return (uniforms >= _LOWEST + dropped_levels).view(torch.uint8)  # [*shape]


def relu_dropout(input: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """``dropout(F.relu(input), p, training)``, the same values and masks, keeping less for backward.

    Backward keeps only the output (see the module's docstring); the gradient equals the
    separate ReLU and dropout's wherever it is finite. Off the CPU, and where
    :func:`dropout` would not draw its own mask, it is that composition itself.
    """
    _check_probability(p)
    # A string is true: training="no" dropped.
    if type(training) is not bool:
        training = check_flag("training", training)
    if not training or p == 0.0:
        return F.relu(input)
    dropped_levels = round(p * _LEVELS)
    if input.device.type != "cpu" or input.numel() == 0 or dropped_levels == _LEVELS:
        return dropout(F.relu(input), p, training)
    return _ReluDropout.apply(input, dropped_levels)


class _ReluDropout(torch.autograd.Function):
    """ReLU then the cheap-mask dropout; backward from the output alone."""

    @staticmethod
    def forward(ctx: Any, input: Tensor, dropped_levels: int) -> Tensor:
        scale = _LEVELS / (_LEVELS - dropped_levels)
        kept = _kept_mask(input.shape, dropped_levels)  # same shape as input
        # The ops and their order are dropout(relu(input))'s, so the values are too.
        output = torch.relu(input).mul_(kept).mul_(scale)  # same shape as input
        ctx.save_for_backward(output)
        ctx.scale = scale
        return output

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, *grad_outputs: Tensor) -> tuple[Tensor, None]:
        (grad_output,) = grad_outputs  # [*shape]
        (output,) = ctx.saved_tensors  # [*shape]
        # An element passed gradient exactly where it was both positive and kept, that is
        # where the output is positive (the scale is at least 1, so no positive input rounds to 0).
        grad_input = torch.ops.aten.threshold_backward(grad_output.mul(ctx.scale), output, 0)
        return grad_input, None


class Dropout(nn.Module):
    """Drop-in for ``torch.nn.Dropout`` (same ``p`` and ``inplace``) with the cheaper CPU mask."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        _check_probability(p)
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """Shape: any; the output has the input's shape and dtype."""
        return dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


def activation_dropout(activation: Callable[[Tensor], Tensor], module: nn.Module, input: Tensor) -> Tensor:
    """``module(activation(input))``, the feed-forward block's middle; :func:`relu_dropout` where it is the same.

    That is where ``activation`` is ``F.relu`` and ``module`` a plain :class:`Dropout`
    (without hooks, which expect the module's own call); anything else is called as given.
    """
    plain = type(module) is Dropout and not module._forward_hooks and not module._forward_pre_hooks
    if activation is F.relu and plain:
        assert isinstance(module, Dropout)  # plain says so; mypy does not follow type() is
        return relu_dropout(input, module.p, module.training)
    return module(activation(input))
