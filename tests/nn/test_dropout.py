"""The CPU dropout with a cheap mask: same contract as ``torch.nn.functional.dropout``."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_lab.nn import Dropout, dropout


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
