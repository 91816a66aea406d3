"""A predictor's bf16 or int8 copy follows the weights of its model: made once, made again when they change.

A notebook loads other weights into ``translator.model`` (or fine-tunes it a few steps) and
translates again; the answer must come from the new weights, not a copy of the old ones.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tests.decoding.test_real_model import tiny_model
from transformer_lab.decoding import DecodeConfig
from transformer_lab.decoding.predictor import Seq2SeqPredictor


def _predictor() -> Seq2SeqPredictor:
    torch.manual_seed(0)
    return Seq2SeqPredictor(tiny_model(), SimpleNamespace(decode=DecodeConfig(precision="fp32")), "cpu")


def _generator_weight(model: torch.nn.Module) -> torch.Tensor:
    for name, module in model.named_modules():
        if name == "generator":
            weight = module.weight
            return (weight() if callable(weight) else weight).dequantize().float()  # an int8 layer's is a method
    raise AssertionError("no generator")


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_the_copy_is_reused_while_the_weights_stay(precision: str) -> None:
    predictor = _predictor()
    first, _ = predictor.decoding(precision=precision)
    second, _ = predictor.decoding(precision=precision)
    assert first is second
    assert first is not predictor.model


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_weights_loaded_into_the_model_are_the_ones_decoded(precision: str) -> None:
    predictor = _predictor()
    predictor.decoding(precision=precision)
    torch.manual_seed(1)
    predictor.model.load_state_dict(tiny_model().state_dict())  # was: the copy of the old weights kept answering
    copy, _ = predictor.decoding(precision=precision)
    expected = _generator_weight(predictor.model)
    torch.testing.assert_close(_generator_weight(copy), expected, atol=0.05 * expected.abs().max().item(), rtol=0)


def test_a_model_put_in_the_place_of_the_old_one_is_the_one_decoded() -> None:
    predictor = _predictor()
    before, _ = predictor.decoding(precision="bf16")
    torch.manual_seed(1)
    predictor.model = tiny_model()
    after, _ = predictor.decoding(precision="bf16")
    assert after is not before
    torch.testing.assert_close(_generator_weight(after), _generator_weight(predictor.model), atol=0.02, rtol=0.02)
