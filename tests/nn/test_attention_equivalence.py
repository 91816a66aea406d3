"""Our MultiheadAttention against torch.nn.MultiheadAttention with the same weights."""

from __future__ import annotations

import itertools

import pytest
import torch

from tests.nn.helpers import max_difference, random_attn_mask, random_key_padding_mask
from transformer_lab import nn as ours

EMBED_DIM = 16
BATCH, TGT_LEN, SRC_LEN = 3, 4, 6

CONFIGS = [
    dict(
        batch_first=batch_first,
        bias=bias,
        kdim=kdim,
        vdim=vdim,
        add_bias_kv=add_bias_kv,
        add_zero_attn=zero,
        num_heads=heads,
    )
    for batch_first, bias, (kdim, vdim), add_bias_kv, zero, heads in itertools.product(
        [False, True], [True, False], [(None, None), (12, 20)], [False, True], [False, True], [1, 4]
    )
]
MASKS = [
    "none",
    "attn_bool_2d",
    "attn_float_2d",
    "attn_bool_3d",
    "padding_bool",
    "padding_float",
    "both_bool",
    "both_float",
]


def build_pair(config: dict) -> tuple[torch.nn.MultiheadAttention, ours.MultiheadAttention]:
    reference = torch.nn.MultiheadAttention(EMBED_DIM, **config)
    twin = ours.MultiheadAttention(EMBED_DIM, **config)
    twin.load_state_dict(reference.state_dict(), strict=True)
    return reference, twin


def make_masks(kind: str, num_heads: int) -> dict:
    result = {}
    if kind.startswith("attn") or kind.startswith("both"):
        dtype_kind = "bool" if "bool" in kind else "float"
        shape = (BATCH * num_heads, TGT_LEN, SRC_LEN) if kind.endswith("3d") else (TGT_LEN, SRC_LEN)
        result["attn_mask"] = random_attn_mask(shape, dtype_kind)
    if kind.startswith("padding") or kind.startswith("both"):
        result["key_padding_mask"] = random_key_padding_mask(BATCH, SRC_LEN, "bool" if "bool" in kind else "float")
    return result


def make_inputs(config: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    kdim = config["kdim"] or EMBED_DIM
    vdim = config["vdim"] or EMBED_DIM
    if config["batch_first"]:
        shapes = (BATCH, TGT_LEN), (BATCH, SRC_LEN)
    else:
        shapes = (TGT_LEN, BATCH), (SRC_LEN, BATCH)
    query = torch.randn(*shapes[0], EMBED_DIM, requires_grad=True)
    key = torch.randn(*shapes[1], kdim, requires_grad=True)
    value = torch.randn(*shapes[1], vdim, requires_grad=True)
    return query, key, value


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("mask_kind", MASKS)
def test_outputs_weights_and_gradients_match_torch(config: dict, mask_kind: str) -> None:
    reference, twin = build_pair(config)
    query, key, value = make_inputs(config)
    mask_arguments = make_masks(mask_kind, config["num_heads"])
    for average in (True, False):
        expected, expected_weights = reference(query, key, value, average_attn_weights=average, **mask_arguments)
        actual, actual_weights = twin(query, key, value, average_attn_weights=average, **mask_arguments)
        assert actual.shape == expected.shape
        assert max_difference(actual, expected) <= 1e-5
        assert actual_weights.shape == expected_weights.shape
        assert max_difference(actual_weights, expected_weights) <= 1e-5

    # The fast path (no weights) gives the same outputs and the same gradients.
    expected, _ = reference(query, key, value, need_weights=False, **mask_arguments)
    actual, weights = twin(query, key, value, need_weights=False, **mask_arguments)
    assert weights is None
    assert max_difference(actual, expected) <= 1e-5
    upstream = torch.randn_like(expected)
    expected_grads = torch.autograd.grad(expected, [query, key, value, *reference.parameters()], upstream)
    actual_grads = torch.autograd.grad(actual, [query, key, value, *twin.parameters()], upstream)
    for expected_grad, actual_grad in zip(expected_grads, actual_grads):
        assert max_difference(actual_grad, expected_grad) <= 1e-5


def test_state_dict_keys_match_torch_for_both_projection_layouts() -> None:
    for kdim in (None, 8):
        reference = torch.nn.MultiheadAttention(EMBED_DIM, 2, kdim=kdim, vdim=kdim, add_bias_kv=True)
        twin = ours.MultiheadAttention(EMBED_DIM, 2, kdim=kdim, vdim=kdim, add_bias_kv=True)
        assert list(twin.state_dict().keys()) == list(reference.state_dict().keys())


def test_unbatched_inputs_match_torch() -> None:
    reference, twin = build_pair(
        dict(batch_first=False, bias=True, kdim=None, vdim=None, add_bias_kv=False, add_zero_attn=False, num_heads=2)
    )
    query, key = torch.randn(TGT_LEN, EMBED_DIM), torch.randn(SRC_LEN, EMBED_DIM)
    padding = torch.tensor([False] * (SRC_LEN - 2) + [True, True])
    for average in (True, False):
        expected, expected_weights = reference(query, key, key, key_padding_mask=padding, average_attn_weights=average)
        actual, actual_weights = twin(query, key, key, key_padding_mask=padding, average_attn_weights=average)
        assert actual.shape == expected.shape and actual_weights.shape == expected_weights.shape
        assert max_difference(actual, expected) <= 1e-5
        assert max_difference(actual_weights, expected_weights) <= 1e-5


def test_is_causal_with_mask_matches_torch_and_without_mask_builds_it() -> None:
    reference, twin = build_pair(
        dict(batch_first=True, bias=True, kdim=None, vdim=None, add_bias_kv=False, add_zero_attn=False, num_heads=2)
    )
    x = torch.randn(BATCH, TGT_LEN, EMBED_DIM)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(TGT_LEN)
    expected, _ = reference(x, x, x, attn_mask=causal, is_causal=True, need_weights=False)
    actual, _ = twin(x, x, x, attn_mask=causal, is_causal=True, need_weights=False)
    assert max_difference(actual, expected) <= 1e-5
    built, _ = twin(x, x, x, is_causal=True, need_weights=False)
    assert max_difference(built, expected) <= 1e-5
    built_explicit, _ = twin(x, x, x, is_causal=True, need_weights=True)
    assert max_difference(built_explicit, expected) <= 1e-5
