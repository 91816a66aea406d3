"""The CPU dropout with a cheap mask: same contract as ``torch.nn.functional.dropout``."""

from __future__ import annotations

import math
from typing import Callable

import pytest
import torch
import torch.nn.functional as F

from transformer_lab.nn import Dropout, TransformerDecoderLayer, TransformerEncoderLayer, dropout
from transformer_lab.nn.dropout import activation_dropout, relu_dropout


def binomial_bound(probability: float, trials: int, sigmas: float = 6.0) -> float:
    """Half-width of a ``sigmas``-sigma interval for a frequency over ``trials`` draws."""
    return sigmas * math.sqrt(probability * (1 - probability) / trials)


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_drop_rate_and_scale(p: float) -> None:
    torch.manual_seed(0)
    ones = torch.ones(1000, 1000)
    output = dropout(ones, p)
    dropped = output == 0
    # Every element is either dropped (0) or kept and scaled by 1 / (1 - p) for p rounded to 1/65536.
    rounded = round(p * 65536) / 65536
    kept_value = 1 / (1 - rounded)
    assert torch.all(dropped | (output == torch.tensor(kept_value, dtype=output.dtype)))
    assert abs(dropped.float().mean().item() - p) < binomial_bound(p, ones.numel())
    assert abs(output.mean().item() - 1.0) < binomial_bound(p, ones.numel()) * kept_value


def test_every_position_of_a_random_word_drops_at_the_rate() -> None:
    """Each 64-bit word feeds four consecutive elements: none of the four lanes may be biased."""
    torch.manual_seed(1)
    p, rows = 0.25, 200_000
    dropped = dropout(torch.ones(rows, 4), p) == 0  # [rows, 4]: one random word per row
    rates = dropped.float().mean(dim=0)  # [4]
    assert torch.all((rates - p).abs() < binomial_bound(p, rows)), rates
    # Lanes are independent: the joint rate of two lanes is the product of their rates.
    both = (dropped[:, 0] & dropped[:, 3]).float().mean().item()
    assert abs(both - p * p) < binomial_bound(p * p, rows)


def test_gradient_is_the_mask_times_the_scale() -> None:
    torch.manual_seed(2)
    inputs = torch.randn(64, 48, requires_grad=True)
    output = dropout(inputs, 0.2)
    output.backward(torch.ones_like(output))
    kept = output != 0
    scale = 1 / (1 - round(0.2 * 65536) / 65536)
    expected = kept.float() * scale
    torch.testing.assert_close(inputs.grad, expected)
    torch.testing.assert_close(output[kept], inputs.detach()[kept] * scale)


def test_same_seed_same_mask_and_fresh_masks_otherwise() -> None:
    ones = torch.ones(32, 32)
    torch.manual_seed(3)
    first = dropout(ones, 0.5)
    second = dropout(ones, 0.5)
    torch.manual_seed(3)
    again = dropout(ones, 0.5)
    assert torch.equal(first, again)
    assert not torch.equal(first, second)


def test_identity_outside_training_and_at_zero() -> None:
    inputs = torch.randn(5, 7)
    assert dropout(inputs, 0.5, training=False) is inputs
    assert dropout(inputs, 0.0) is inputs
    module = Dropout(0.5).eval()
    assert module(inputs) is inputs


def test_p_one_drops_everything() -> None:
    assert torch.equal(dropout(torch.randn(3, 4), 1.0), torch.zeros(3, 4))


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_bad_probability_is_named(p: float) -> None:
    with pytest.raises(ValueError, match=r"dropout probability p must be in \[0, 1\], got"):
        Dropout(p)
    with pytest.raises(ValueError, match="dropout probability p"):
        dropout(torch.ones(2), p)


def test_dtype_shape_layout_and_inplace() -> None:
    torch.manual_seed(4)
    half = torch.randn(16, 8, 4).to(torch.bfloat16)
    output = dropout(half, 0.1)
    assert output.dtype == torch.bfloat16 and output.shape == half.shape
    # A non-contiguous view is masked element by element like any other tensor.
    transposed = torch.ones(6, 10).t()  # [10, 6], strides (1, 10)
    output = dropout(transposed, 0.5)
    assert output.shape == (10, 6)
    assert torch.all((output == 0) | (output == 2.0))
    # inplace writes into the given tensor and returns it.
    target = torch.ones(100)
    returned = dropout(target, 0.5, inplace=True)
    assert returned is target and bool((target == 0).any()) and bool((target == 2.0).any())
    empty = torch.empty(0, 3)
    assert dropout(empty, 0.5).shape == (0, 3)


def test_module_mirrors_torch_dropout_signature() -> None:
    module = Dropout(0.3, inplace=False)
    reference = torch.nn.Dropout(0.3, inplace=False)
    assert (module.p, module.inplace) == (reference.p, reference.inplace)
    assert "p=0.3" in repr(module)
    # Same expectation as torch's dropout on the same input (both unbiased).
    torch.manual_seed(5)
    inputs = torch.rand(400, 500)
    ours_mean = module(inputs).mean().item()
    torch_mean = F.dropout(inputs, 0.3).mean().item()
    assert abs(ours_mean - inputs.mean().item()) < 0.01
    assert abs(torch_mean - inputs.mean().item()) < 0.01


def saved_bytes(function: Callable[[], torch.Tensor]) -> int:
    """Bytes of the distinct storages that autograd keeps for backward while ``function`` runs."""
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        function()
    return sum(storages.values())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_relu_dropout_is_relu_then_dropout_bit_for_bit(dtype: torch.dtype) -> None:
    inputs = torch.randn(96, 130, dtype=dtype, requires_grad=True)
    upstream = torch.randn(96, 130, dtype=dtype)
    torch.manual_seed(6)
    separate = dropout(F.relu(inputs), 0.2)
    (separate_grad,) = torch.autograd.grad(separate, inputs, upstream)
    torch.manual_seed(6)
    fused = relu_dropout(inputs, 0.2)
    (fused_grad,) = torch.autograd.grad(fused, inputs, upstream)
    assert fused.dtype == dtype
    assert torch.equal(fused, separate)  # the same mask drawn from the same generator state
    assert torch.equal(fused_grad, separate_grad)
    # Both kinds of zero occur: dropped elements and negative inputs.
    assert bool(((fused == 0) & (inputs > 0)).any()) and bool(((fused == 0) & (inputs < 0)).any())


def test_relu_dropout_keeps_only_its_output_for_backward() -> None:
    linear1, linear2 = torch.nn.Linear(16, 64), torch.nn.Linear(64, 16)
    inputs = torch.randn(200, 16)
    separate = saved_bytes(lambda: linear2(dropout(F.relu(linear1(inputs)), 0.3)))
    fused = saved_bytes(lambda: linear2(relu_dropout(linear1(inputs), 0.3)))
    # Gone: the ReLU's output (float32) and the uint8 mask, each [200, 64]. linear2 keeps the
    # dropped output, which the fused step shares.
    assert separate - fused == 200 * 64 * (4 + 1)


def test_relu_dropout_outside_training_and_at_the_edges() -> None:
    inputs = torch.randn(5, 7)
    assert torch.equal(relu_dropout(inputs, 0.5, training=False), F.relu(inputs))
    assert torch.equal(relu_dropout(inputs, 0.0), F.relu(inputs))
    assert torch.equal(relu_dropout(inputs, 1.0), torch.zeros(5, 7))
    assert relu_dropout(torch.empty(0, 3, requires_grad=True), 0.5).shape == (0, 3)
    with pytest.raises(ValueError, match=r"dropout probability p must be in \[0, 1\], got 1.5"):
        relu_dropout(inputs, 1.5)


def test_activation_dropout_fuses_only_relu_with_a_plain_dropout() -> None:
    inputs = torch.randn(40, 24, requires_grad=True)
    module = Dropout(0.25)
    torch.manual_seed(7)
    fused = activation_dropout(F.relu, module, inputs)
    torch.manual_seed(7)
    assert torch.equal(fused, module(F.relu(inputs)))
    assert fused.grad_fn is not None and "ReluDropout" in type(fused.grad_fn).__name__
    # Another activation, another dropout module, or a hook: the composition as given.
    assert "ReluDropout" not in type(activation_dropout(F.gelu, module, inputs).grad_fn).__name__
    assert "ReluDropout" not in type(activation_dropout(F.relu, torch.nn.Dropout(0.25), inputs).grad_fn).__name__
    calls = []
    module.register_forward_hook(lambda *arguments: calls.append(1))
    activation_dropout(F.relu, module, inputs)
    assert calls == [1]


@pytest.mark.parametrize("layer_class", [TransformerEncoderLayer, TransformerDecoderLayer])
def test_layers_train_the_same_with_the_fused_feed_forward(layer_class: type) -> None:
    """The layers' ReLU takes the fused step; a ReLU they cannot recognise takes the separate one."""
    torch.manual_seed(8)
    layer = layer_class(32, 4, dim_feedforward=64, dropout=0.3, batch_first=True)
    inputs = torch.randn(3, 9, 32)
    arguments = (inputs, torch.randn(3, 5, 32)) if layer_class is TransformerDecoderLayer else (inputs,)
    results = []
    for activation in (F.relu, lambda tensor: F.relu(tensor)):
        layer.activation = activation
        layer.zero_grad()
        torch.manual_seed(9)
        output = layer(*arguments)
        output.square().sum().backward()
        results.append((output.detach(), [parameter.grad.clone() for parameter in layer.parameters()]))
    (fused_output, fused_grads), (separate_output, separate_grads) = results
    assert torch.equal(fused_output, separate_output)
    assert all(torch.equal(fused, separate) for fused, separate in zip(fused_grads, separate_grads))
