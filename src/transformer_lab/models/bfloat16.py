"""bf16 inference: a copy of the model whose weights are bfloat16, for decoding.

Decoding under ``torch.autocast(bfloat16)`` keeps the weights in float32 and casts
operands at every call, and autocast closes the decoder's single-position step
(``nn/decoder_step.py``: it steps aside for autocast, whose casting rules it does not
follow), so every step pays the modules' ~650 operator calls plus the casts. A copy whose
parameters and buffers are bfloat16 needs neither: every product reads bf16 weights
directly (oneDNN's AMX or AVX512-BF16 kernels on the CPUs that have them), and the
single-position step applies as it does in float32.

Where the copy computes differently from autocast: autocast keeps layer norms, softmax and
the residual stream in float32, the copy keeps them in bf16 (torch's CPU kernels still
accumulate in float32). Log-probabilities and beam scores stay float32 either way
(``decoding.protocol`` takes the log-softmax of ``logits.float()``). The test-set BLEU of
both is in docs/results.md#bf16-decoding.

The copy is for decoding only (no gradients, no saving); the checkpoint keeps its float32
weights.
"""

from __future__ import annotations

import copy
from typing import TypeVar

import torch
from torch import nn

from transformer_lab.models.quantization import holds_int8

ModelType = TypeVar("ModelType", bound=nn.Module)


def bf16_for_inference(model: ModelType) -> ModelType:
    """A copy of ``model`` in eval mode whose floating-point parameters and buffers are bfloat16.

    The original is left as it is (tied weights stay tied in the copy). Raises
    ``ValueError`` for a model with no floating-point parameter (nothing to convert) and
    for one holding quantized layers (an int8 copy: convert the float model instead).
    """
    parameters = list(model.parameters())
    if not any(parameter.is_floating_point() for parameter in parameters):
        raise ValueError(
            f"model: expected floating-point parameters to convert to bf16, got a {type(model).__name__} with none"
        )
    if holds_int8(model):
        raise ValueError(
            f"model: expected a float model, got a {type(model).__name__} with int8 layers: "
            "convert the float model to bf16, not its int8 copy"
        )
    return copy.deepcopy(model).eval().to(torch.bfloat16)


def as_bf16(model: ModelType) -> ModelType:
    """``model`` itself where it is already bf16 (a :func:`bf16_for_inference` copy), else its bf16 copy."""
    return model if holds_bf16(model) else bf16_for_inference(model)


def holds_bf16(model: nn.Module) -> bool:
    """Whether every floating-point parameter of ``model`` is bfloat16 (a :func:`bf16_for_inference` copy)."""
    floating = [parameter for parameter in model.parameters() if parameter.is_floating_point()]
    return bool(floating) and all(parameter.dtype == torch.bfloat16 for parameter in floating)
