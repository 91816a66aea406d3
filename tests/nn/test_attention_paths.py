"""The explicit attention path and the fast (SDPA) path compute the same thing; hidden rows."""

from __future__ import annotations

import pytest
import torch

from tests.nn.helpers import max_difference, random_key_padding_mask
from transformer_lab import nn as ours
from transformer_lab.nn import masks
from transformer_lab.nn.tracing import recording_shapes


def run_transformer(model: ours.Transformer, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    padding = random_key_padding_mask(src.shape[0], src.shape[1], "bool")
    return model(
        src,
        tgt,
        tgt_mask=ours.causal_mask(tgt.shape[1]),
        src_key_padding_mask=padding,
        memory_key_padding_mask=padding,
        tgt_key_padding_mask=random_key_padding_mask(tgt.shape[0], tgt.shape[1], "bool"),
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_explicit_and_fast_paths_agree_in_outputs_and_gradients(norm_first: bool) -> None:
    model = ours.Transformer(16, 2, 2, 2, 32, dropout=0.0, batch_first=True, norm_first=norm_first)
    src, tgt = torch.randn(3, 6, 16), torch.randn(3, 5, 16)
    results = {}
    for path in ("fast", "explicit"):
        ours.set_attention_path(model, path)
        torch.manual_seed(1)
        output = run_transformer(model, src, tgt)
        gradients = torch.autograd.grad(output.square().sum(), list(model.parameters()))
        results[path] = (output, gradients)
    assert max_difference(results["fast"][0], results["explicit"][0]) <= 1e-5
    for fast_grad, explicit_grad in zip(results["fast"][1], results["explicit"][1]):
        # Gradients of a sum of squares reach ~60 here: compare relative to their size.
        torch.testing.assert_close(fast_grad, explicit_grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("mask_dtype", ["bool", "float"])
def test_fully_hidden_row_gives_zero_mixture_and_finite_gradients(need_weights: bool, mask_dtype: str) -> None:
    attention = ours.MultiheadAttention(8, 2, batch_first=True)
    query = torch.randn(2, 3, 8, requires_grad=True)
    memory = torch.randn(2, 4, 8, requires_grad=True)
    hidden = torch.zeros(2, 4, dtype=torch.bool)
    hidden[1] = True  # the second sequence is nothing but padding
    key_padding_mask = hidden if mask_dtype == "bool" else torch.zeros(2, 4).masked_fill(hidden, float("-inf"))
    output, weights = attention(query, memory, memory, key_padding_mask=key_padding_mask, need_weights=need_weights)
    # The value mixture is zero, so only the output projection's bias remains.
    assert torch.allclose(output[1], attention.out_proj.bias.expand(3, 8))
    assert torch.isfinite(output).all()
    if need_weights:
        assert torch.equal(weights[1], torch.zeros(3, 4))
        assert torch.allclose(weights[0].sum(-1), torch.ones(3))
    output.sum().backward()
    for tensor in (query.grad, memory.grad, attention.in_proj_weight.grad):
        assert torch.isfinite(tensor).all()


def test_torch_gives_nan_where_we_give_zeros() -> None:
    """Documents the difference from torch (skipped if a later torch stops returning NaN)."""
    reference = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    query = torch.randn(1, 3, 8)
    hidden = torch.ones(1, 4, dtype=torch.bool)
    output, _ = reference(query, torch.randn(1, 4, 8), torch.randn(1, 4, 8), key_padding_mask=hidden)
    if not torch.isnan(output).any():
        pytest.skip("this torch no longer returns NaN for fully hidden rows")
    assert torch.isnan(output).all()


def test_shape_recorder_sees_every_step_of_the_explicit_path() -> None:
    attention = ours.MultiheadAttention(32, 4)
    query, key = torch.randn(5, 2, 32), torch.randn(7, 2, 32)
    with recording_shapes() as recorder:
        attention(query, key, key, need_weights=False)
    by_name = {record.name: record.shape for record in recorder.records}
    assert by_name["Q (split into heads)"] == (2, 4, 5, 8)
    assert by_name["K (split into heads)"] == (2, 4, 7, 8)
    assert by_name["scores = Q K^T / sqrt(head_dim)"] == (2, 4, 5, 7)
    assert by_name["weights @ V"] == (2, 4, 5, 8)
    assert by_name["output"] == (2, 5, 32)
    # Outside the context nothing is recorded.
    assert masks is not None and len(recorder.records) == len(by_name)
