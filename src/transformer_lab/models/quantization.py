"""int8 inference: PyTorch's dynamic quantization of the model's feed-forward and output layers.

``torch.ao.quantization.quantize_dynamic`` stores a Linear layer's weight in int8 and
quantizes its input on the fly, per call; on an x86 CPU (fbgemm) the matrix product then
runs in int8. Only the position-wise feed-forward layers (``linear1``, ``linear2``) and the
generator are converted: they hold most of the multiply-adds of a decoder step, while the
attention projections are parameters read by the explicit attention path (not Linear
calls) and stay float32. The result is a copy for decoding only (no gradients, no saving):
the checkpoint keeps its float32 weights.
"""

from __future__ import annotations

import copy
import warnings
from typing import TypeVar

import torch
from torch import nn

# The layers converted: the feed-forward's two Linear layers and the generator.
QUANTIZED_LAYER_NAMES = ("linear1", "linear2", "generator")


ModelType = TypeVar("ModelType", bound=nn.Module)


def int8_for_inference(model: ModelType) -> ModelType:
    """A copy of ``model`` (in eval mode) whose feed-forward and generator Linear layers compute in int8.

    The original model is left as it is; the copy is of the model's own class, in float32 whatever the
    model's dtype (only the named Linear layers inside it are swapped). Raises ``ValueError`` if the model has none
    of those layers (nothing would be quantized).
    """
    names = {
        name
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and name.rsplit(".", 1)[-1] in QUANTIZED_LAYER_NAMES
    }
    if not names:
        raise ValueError(
            f"model: expected Linear layers named {', '.join(QUANTIZED_LAYER_NAMES)} to quantize, "
            f"got a {type(model).__name__} with none"
        )
    # Dynamic quantization reads float32 weights and activations: a model in float64 or bf16 is copied as float32
    # (else "expected scalar type Float but found Double" from inside torch at the first product).
    quantizable = copy.deepcopy(model).float().eval()
    with warnings.catch_warnings():
        # torch announces the quantized tensor types' move to torchao; the kernels are
        # today's and tested here.
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.ao.quantization.quantize_dynamic(
            quantizable, {name: torch.ao.quantization.default_dynamic_qconfig for name in names}, dtype=torch.qint8
        )


def holds_int8(model: nn.Module) -> bool:
    """Whether ``model`` holds layers of PyTorch's quantization (an :func:`int8_for_inference` copy)."""
    return any(type(module).__module__.startswith("torch.ao") for module in model.modules())
