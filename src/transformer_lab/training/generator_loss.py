"""The generator and the label-smoothed loss in one pass, a chunk of rows at a time.

A seq2seq batch of N target tokens over a vocabulary of V classes has N x V logits: 4,096
tokens over 8,000 subwords are 131 MB in float32, and backward holds them and their
gradient at once, on top of every saved activation. That pair is the largest single item of
a training step's peak memory. Here the generator's rows are taken ``chunk_rows`` at a time:
each chunk's logits give its loss and, right away, its gradient, which is multiplied back
through the generator into the hidden states, the weight and the bias, and then freed. The
full logits never exist; what is kept for backward is the gradient of the hidden states
(N x D) and of the generator (V x D), scaled by the loss's own gradient there.

The numbers are those of ``label_smoothed_cross_entropy(generator(hidden), ...)`` (the
same formula and gradient, see :mod:`.losses`) up to float rounding: the sums run a chunk
at a time. The same idea is the "fused linear cross-entropy" of memory-bound LLM training.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from .losses import check_loss_arguments, check_target_ids, label_smoothed_cross_entropy

__all__ = ["DEFAULT_CHUNK_ROWS", "default_chunk_rows", "generator_cross_entropy"]

# 512 rows of 8,000 float32 logits are 16 MB; larger chunks kept more and were no faster on
# the CPU. On a GPU every chunk is a few kernel launches and a small product that leaves the
# chip idle, so there the chunk is sized by memory instead (:func:`default_chunk_rows`).
DEFAULT_CHUNK_ROWS = 512
# On CUDA: the chunk's float32 logits take at most this share of the free device memory...
CUDA_LOGITS_MEMORY_SHARE = 1 / 16
# ...and at most this many bytes (2 GiB: 65,536 rows of an 8,000-word vocabulary).
CUDA_LOGITS_MAX_BYTES = 2 << 30


def default_chunk_rows(device: torch.device, vocabulary_size: int) -> int:
    """Rows per chunk: :data:`DEFAULT_CHUNK_ROWS` on the CPU, on CUDA as many as the memory share allows.

    The logits of a chunk are ``rows x vocabulary_size`` float32 values, and the softmax
    gradient made from them is as large, so the share is kept small.
    """
    if device.type != "cuda":
        return DEFAULT_CHUNK_ROWS
    free_bytes, _ = torch.cuda.mem_get_info(device)
    budget = min(free_bytes * CUDA_LOGITS_MEMORY_SHARE, CUDA_LOGITS_MAX_BYTES)
    return max(DEFAULT_CHUNK_ROWS, int(budget // (4 * max(vocabulary_size, 1))))


def generator_cross_entropy(
    hidden: torch.Tensor,
    generator: nn.Module,
    target_ids: torch.Tensor,
    smoothing: float,
    ignore_index: int,
    reduction: Literal["mean", "sum"] = "mean",
    chunk_rows: int | None = None,
) -> torch.Tensor:
    """``label_smoothed_cross_entropy(generator(hidden), target_ids, ...)`` without the [N, V] logits.

    ``generator`` is the model's ``nn.Linear`` to the vocabulary. Anything else (a
    quantized copy, a module with hooks) is applied whole and scored by
    :func:`label_smoothed_cross_entropy`, as are inputs that need no gradient. Under
    autocast the chunks' matrix products run in the autocast dtype, as ``generator``
    would; the loss itself is computed in float32. ``chunk_rows`` None: :func:`default_chunk_rows`.

    Shape:
        hidden: [B, T, D] or [N, D]. target_ids: [B, T] or [N]. Returns a scalar.
    """
    check_loss_arguments(smoothing, reduction)
    if chunk_rows is not None and chunk_rows < 1:
        raise ValueError(f"chunk_rows: expected a positive number of rows, got {chunk_rows}")
    plain_linear = type(generator) is nn.Linear and not generator._forward_hooks and not generator._forward_pre_hooks
    parameters = [generator.weight, generator.bias] if plain_linear else []
    needs_gradient = torch.is_grad_enabled() and any(
        tensor is not None and tensor.requires_grad for tensor in [hidden, *parameters]
    )
    if not (plain_linear and needs_gradient):
        return label_smoothed_cross_entropy(generator(hidden), target_ids, smoothing, ignore_index, reduction)
    assert isinstance(generator, nn.Linear)  # plain_linear says so; mypy does not follow type() is
    vocabulary_size = generator.weight.shape[0]
    shape_from = f"the hidden states' shape {tuple(hidden.shape)} without the model axis"
    check_target_ids(target_ids, hidden.shape[:-1], vocabulary_size, ignore_index, shape_from)
    if smoothing > 0.0 and vocabulary_size < 2:
        raise ValueError(f"generator: label smoothing needs a vocabulary of at least 2, got V={vocabulary_size}")
    flat_hidden = hidden.reshape(-1, hidden.shape[-1])  # [N, D]
    flat_target_ids = target_ids.reshape(-1).long()  # [N]
    keep_mask = flat_target_ids != ignore_index  # [N], True = a real token
    safe_target_ids = flat_target_ids.masked_fill(~keep_mask, 0)  # [N]: ignored rows read class 0
    if chunk_rows is None:
        chunk_rows = default_chunk_rows(hidden.device, vocabulary_size)
    total = _ChunkedGeneratorLoss.apply(
        flat_hidden, generator.weight, generator.bias, safe_target_ids, keep_mask, smoothing, chunk_rows
    )
    if reduction == "mean":
        # With no real token this is 0 (the sum of zeros), not 0 / 0. The count stays a
        # tensor: reading it to the host would make a GPU wait for the loss at every batch.
        return total / keep_mask.sum().clamp(min=1)
    return total


def _compute_dtype(device: torch.device, parameter_dtype: torch.dtype) -> torch.dtype:
    """The dtype ``F.linear`` would compute in here: autocast's where it is on, else the weight's."""
    if torch.is_autocast_enabled(device.type):
        return torch.get_autocast_dtype(device.type)
    return parameter_dtype


class _ChunkedGeneratorLoss(torch.autograd.Function):
    """The summed per-token loss of ``hidden @ W^T + b``; gradients made in forward, chunk by chunk.

    With ``w = smoothing / (V - 1)`` a row's loss is ``log Z - (1 - smoothing - w) x_y -
    w sum_k x_k`` and its logits' gradient ``softmax(x) - w - (1 - smoothing - w)
    onehot(y)`` (zero for an ignored row), as in :mod:`.losses`. The output is a sum, so
    backward only scales the stored gradients by the one incoming number.

    Shape: hidden [N, D], weight [V, D], bias [V] or None, target_ids [N] valid class ids,
    keep_mask [N] bool; returns a scalar, float32 at least.
    """

    @staticmethod
    def forward(
        ctx: Any,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        target_ids: torch.Tensor,
        keep_mask: torch.Tensor,
        smoothing: float,
        chunk_rows: int,
    ) -> torch.Tensor:
        vocabulary_size = weight.shape[0]
        wrong_weight = smoothing / (vocabulary_size - 1) if vocabulary_size > 1 else 0.0
        true_weight = 1.0 - smoothing - wrong_weight  # the true class's weight beyond w
        compute_dtype = _compute_dtype(hidden.device, weight.dtype)
        # Casts made once, not per chunk; autocast is off inside, the dtypes are explicit.
        compute_weight = weight.detach().to(compute_dtype)  # [V, D]
        compute_bias = None if bias is None else bias.detach().to(compute_dtype)  # [V]
        loss_dtype = torch.promote_types(compute_dtype, torch.float32)  # float32 at least; float64 for gradcheck
        total = torch.zeros((), dtype=loss_dtype, device=hidden.device)
        grad_hidden = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None  # [N, D]
        grad_weight = torch.zeros_like(weight) if ctx.needs_input_grad[1] else None  # [V, D]
        grad_bias = torch.zeros_like(bias) if bias is not None and ctx.needs_input_grad[2] else None  # [V]
        with torch.autocast(hidden.device.type, enabled=False):
            for start in range(0, hidden.shape[0], chunk_rows):
                rows = slice(start, start + chunk_rows)
                chunk_hidden = hidden[rows].detach().to(compute_dtype)  # [C, D]
                chunk_target_ids = target_ids[rows].unsqueeze(1)  # [C, 1]
                row_weight = keep_mask[rows].to(loss_dtype).unsqueeze(1)  # [C, 1]: 0 for an ignored row
                logits = F.linear(chunk_hidden, compute_weight, compute_bias)  # [C, V]
                scores = logits.to(loss_dtype)  # [C, V]; the same tensor when the dtypes agree
                log_normaliser = torch.logsumexp(scores, dim=-1, keepdim=True)  # [C, 1]
                true_scores = scores.gather(1, chunk_target_ids)  # [C, 1]
                per_token = log_normaliser - true_weight * true_scores - wrong_weight * scores.sum(-1, keepdim=True)
                # masked_fill, not a product, so that a non-finite ignored row cannot add NaN.
                total += per_token.masked_fill(row_weight == 0, 0.0).sum()
                gradient = scores.sub_(log_normaliser).exp_()  # [C, V]: the softmax, in place
                gradient.mul_(row_weight).sub_(wrong_weight * row_weight)
                gradient.scatter_add_(1, chunk_target_ids, -true_weight * row_weight)
                gradient = gradient.to(compute_dtype)  # [C, V]
                if grad_hidden is not None:
                    grad_hidden[rows] = gradient @ compute_weight  # [C, D]
                if grad_weight is not None and grad_weight.dtype == compute_dtype:
                    grad_weight.addmm_(gradient.t(), chunk_hidden)  # [V, D]
                elif grad_weight is not None:
                    grad_weight.add_(gradient.t() @ chunk_hidden)  # [V, D]: the product in the autocast dtype
                if grad_bias is not None:
                    grad_bias.add_(gradient.sum(0))  # [V]
        ctx.save_for_backward(grad_hidden, grad_weight, grad_bias)
        return total

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        (grad_total,) = grad_outputs  # a scalar: the loss's gradient at the sum
        grad_hidden, grad_weight, grad_bias = ctx.saved_tensors
        scaled = [
            None if grad is None else grad * grad_total.to(grad.dtype) for grad in (grad_hidden, grad_weight, grad_bias)
        ]
        return (*scaled, None, None, None, None)
