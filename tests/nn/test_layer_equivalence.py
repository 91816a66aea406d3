"""Encoder/decoder layers, stacks and the whole Transformer against torch's, same weights."""

from __future__ import annotations

import itertools

import pytest
import torch

from tests.nn.helpers import max_difference, random_key_padding_mask
from transformer_lab import nn as ours

D_MODEL, NHEAD, FEEDFORWARD = 16, 2, 32
BATCH, SRC_LEN, TGT_LEN = 3, 7, 5

LAYER_CONFIGS = [
    dict(batch_first=batch_first, norm_first=norm_first, activation=activation, bias=bias)
    for batch_first, norm_first, activation, bias in itertools.product(
        [False, True], [False, True], ["relu", "gelu"], [True, False]
    )
]


def config_id(config: dict) -> str:
    return "-".join(f"{key}={value}" for key, value in config.items())


def sequence(length: int, batch_first: bool, requires_grad: bool = True) -> torch.Tensor:
    shape = (BATCH, length, D_MODEL) if batch_first else (length, BATCH, D_MODEL)
    return torch.randn(shape, requires_grad=requires_grad)


def assert_same_outputs_and_gradients(reference, twin, expected, actual, inputs) -> None:  # type: ignore[no-untyped-def]
    assert actual.shape == expected.shape
    assert max_difference(actual, expected) <= 1e-5
    upstream = torch.randn_like(expected)
    expected_grads = torch.autograd.grad(expected, [*inputs, *reference.parameters()], upstream)
    actual_grads = torch.autograd.grad(actual, [*inputs, *twin.parameters()], upstream)
    assert len(expected_grads) == len(actual_grads)
    for expected_grad, actual_grad in zip(expected_grads, actual_grads):
        assert max_difference(actual_grad, expected_grad) <= 1e-5


@pytest.mark.parametrize("config", LAYER_CONFIGS, ids=config_id)
@pytest.mark.parametrize("mask_kind", ["none", "bool", "float"])
def test_encoder_layer_matches_torch(config: dict, mask_kind: str) -> None:
    reference = torch.nn.TransformerEncoderLayer(D_MODEL, NHEAD, FEEDFORWARD, dropout=0.0, **config)
    twin = ours.TransformerEncoderLayer(D_MODEL, NHEAD, FEEDFORWARD, dropout=0.0, **config)
    twin.load_state_dict(reference.state_dict(), strict=True)
    src = sequence(SRC_LEN, config["batch_first"])
    masks = {}
    if mask_kind != "none":
        masks["src_key_padding_mask"] = random_key_padding_mask(BATCH, SRC_LEN, mask_kind)
        causal = torch.nn.Transformer.generate_square_subsequent_mask(SRC_LEN)
        masks["src_mask"] = causal if mask_kind == "float" else causal.isinf()
    assert_same_outputs_and_gradients(reference, twin, reference(src, **masks), twin(src, **masks), [src])


@pytest.mark.parametrize("config", LAYER_CONFIGS, ids=config_id)
@pytest.mark.parametrize("mask_kind", ["none", "bool", "float"])
def test_decoder_layer_matches_torch(config: dict, mask_kind: str) -> None:
    reference = torch.nn.TransformerDecoderLayer(D_MODEL, NHEAD, FEEDFORWARD, dropout=0.0, **config)
    twin = ours.TransformerDecoderLayer(D_MODEL, NHEAD, FEEDFORWARD, dropout=0.0, **config)
    twin.load_state_dict(reference.state_dict(), strict=True)
    tgt, memory = sequence(TGT_LEN, config["batch_first"]), sequence(SRC_LEN, config["batch_first"])
    masks = {}
    if mask_kind != "none":
        causal = torch.nn.Transformer.generate_square_subsequent_mask(TGT_LEN)
        masks["tgt_mask"] = causal if mask_kind == "float" else causal.isinf()
        masks["tgt_key_padding_mask"] = random_key_padding_mask(BATCH, TGT_LEN, mask_kind)
        masks["memory_key_padding_mask"] = random_key_padding_mask(BATCH, SRC_LEN, mask_kind)
        memory_mask = torch.rand(TGT_LEN, SRC_LEN) < 0.3
        memory_mask[:, 0] = False
        masks["memory_mask"] = (
            memory_mask
            if mask_kind == "bool"
            else torch.zeros(TGT_LEN, SRC_LEN).masked_fill(memory_mask, float("-inf"))
        )
    assert_same_outputs_and_gradients(
        reference, twin, reference(tgt, memory, **masks), twin(tgt, memory, **masks), [tgt, memory]
    )


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_matches_torch_with_padding(batch_first: bool, norm_first: bool) -> None:
    arguments = dict(
        d_model=D_MODEL,
        nhead=NHEAD,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=FEEDFORWARD,
        dropout=0.0,
        batch_first=batch_first,
        norm_first=norm_first,
    )
    reference = torch.nn.Transformer(**arguments)
    twin = ours.Transformer(**arguments)
    twin.load_state_dict(reference.state_dict(), strict=True)
    assert list(twin.state_dict().keys()) == list(reference.state_dict().keys())
    src, tgt = sequence(SRC_LEN, batch_first), sequence(TGT_LEN, batch_first)
    src_padding = random_key_padding_mask(BATCH, SRC_LEN, "bool")
    masks = dict(
        tgt_mask=ours.Transformer.generate_square_subsequent_mask(TGT_LEN),
        src_key_padding_mask=src_padding,
        tgt_key_padding_mask=random_key_padding_mask(BATCH, TGT_LEN, "bool"),
        memory_key_padding_mask=src_padding,
    )
    for mode in ("train", "eval"):  # dropout is 0, so both modes must agree with torch
        reference.train(mode == "train")
        twin.train(mode == "train")
        assert_same_outputs_and_gradients(
            reference, twin, reference(src, tgt, **masks), twin(src, tgt, **masks), [src, tgt]
        )


def test_stacks_copy_layers_and_keep_torch_keys() -> None:
    encoder_layer = ours.TransformerEncoderLayer(D_MODEL, NHEAD, FEEDFORWARD)
    encoder = ours.TransformerEncoder(encoder_layer, num_layers=3, norm=torch.nn.LayerNorm(D_MODEL))
    reference = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(D_MODEL, NHEAD, FEEDFORWARD),
        num_layers=3,
        norm=torch.nn.LayerNorm(D_MODEL),
        enable_nested_tensor=False,
    )
    assert list(encoder.state_dict().keys()) == list(reference.state_dict().keys())
    # Deep copies: the layers do not share parameters.
    assert encoder.layers[0].linear1.weight.data_ptr() != encoder.layers[1].linear1.weight.data_ptr()


def test_generate_square_subsequent_mask_matches_torch() -> None:
    for size in (1, 2, 5):
        assert torch.equal(
            ours.Transformer.generate_square_subsequent_mask(size),
            torch.nn.Transformer.generate_square_subsequent_mask(size),
        )


def test_bf16_autocast_runs_and_stays_close_to_fp32() -> None:
    model = ours.Transformer(D_MODEL, NHEAD, 2, 2, FEEDFORWARD, dropout=0.0, batch_first=True)
    src, tgt = sequence(SRC_LEN, True, False), sequence(TGT_LEN, True, False)
    padding = random_key_padding_mask(BATCH, SRC_LEN, "bool")
    causal = ours.causal_mask(TGT_LEN)
    full = model(src, tgt, tgt_mask=causal, src_key_padding_mask=padding, memory_key_padding_mask=padding)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = model(src, tgt, tgt_mask=causal, src_key_padding_mask=padding, memory_key_padding_mask=padding)
    assert torch.isfinite(low).all()
    assert max_difference(low.float(), full) < 0.1
