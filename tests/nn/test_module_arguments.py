"""The modules refuse bad constructor values and inputs at once, naming the argument, with torch's error kinds."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest
import torch

from tests.models.helpers import small_model
from transformer_lab import nn as ours


@pytest.mark.parametrize(
    ("build", "kind", "message"),
    [
        # A float head count was accepted and failed at the first call, inside unflatten().
        (lambda: ours.MultiheadAttention(8, 2.0), TypeError, r"num_heads: expected an int >= 1, got 2.0"),
        (lambda: ours.MultiheadAttention(8.0, 2), TypeError, r"embed_dim: expected an int >= 1, got 8.0"),
        (lambda: ours.MultiheadAttention("8", 2), TypeError, r"embed_dim: expected an int >= 1, got '8'"),
        (lambda: ours.MultiheadAttention(8, None), TypeError, r"num_heads: expected an int >= 1, got None"),
        (lambda: ours.MultiheadAttention(8, 2, kdim=-3), ValueError, r"kdim: expected an int >= 1 or None, got -3"),
        (lambda: ours.MultiheadAttention(8, 2, vdim=0), ValueError, r"vdim: expected an int >= 1 or None, got 0"),
        (lambda: ours.MultiheadAttention(8, 2, dropout="0.1"), TypeError, r"dropout: expected a float in \[0, 1\)"),
        (lambda: ours.MultiheadAttention(8, 2, dropout=1.0), ValueError, r"dropout: expected a float in \[0, 1\)"),
        (lambda: ours.MultiheadAttention(0, 2), ValueError, r"embed_dim: expected an int >= 1, got 0"),
        (lambda: ours.Transformer(8, 2.0, 1, 1, 16), TypeError, r"nhead: expected an int >= 1, got 2.0"),
        (lambda: ours.Transformer(8, 2, 1, 1, dim_feedforward=-4), ValueError, r"dim_feedforward: .* got -4"),
        (lambda: ours.Transformer(8, 2, 1, 1, dim_feedforward=16.0), TypeError, r"dim_feedforward: .* got 16.0"),
        (lambda: ours.Transformer(8, 2, 1.0, 1, 16), TypeError, r"num_encoder_layers: expected an int >= 1, got 1.0"),
        (lambda: ours.Transformer(8, 2, 1, 0, 16), ValueError, r"num_decoder_layers: expected an int >= 1, got 0"),
        (lambda: ours.Transformer(8, 2, 1, 1, 16, layer_norm_eps="x"), TypeError, r"layer_norm_eps: expected a float"),
        (lambda: ours.TransformerDecoderLayer(8.5, 2), TypeError, r"d_model: expected an int >= 1, got 8.5"),
        (
            lambda: ours.TransformerEncoder(ours.TransformerEncoderLayer(8, 2), 2.0),
            TypeError,
            r"num_layers: expected an int >= 1, got 2.0",
        ),
        # A true string was read as True: batch_first="no" read [L, N, E] as [N, L, E], norm_first="no" ran pre-norm.
        (lambda: ours.MultiheadAttention(8, 2, batch_first="no"), TypeError, r"batch_first: expected a bool, got 'no'"),
        (lambda: ours.MultiheadAttention(8, 2, bias="no"), TypeError, r"bias: expected a bool, got 'no'"),
        (lambda: ours.MultiheadAttention(8, 2, add_zero_attn=1), TypeError, r"add_zero_attn: expected a bool, got 1"),
        (lambda: ours.TransformerEncoderLayer(8, 2, norm_first="no"), TypeError, r"norm_first: expected a bool"),
        (lambda: ours.TransformerDecoderLayer(8, 2, batch_first=None), TypeError, r"batch_first: expected a bool"),
        (lambda: ours.Transformer(8, 2, 1, 1, 16, norm_first="False"), TypeError, r"norm_first: expected a bool"),
        # Failed inside torch's LayerNorm, naming no argument ("'float' object is not iterable").
        (lambda: ours.Transformer(d_model=8.0, nhead=2), TypeError, r"^d_model: expected an int >= 1, got 8.0$"),
        (lambda: ours.Transformer(d_model=-8, nhead=2), ValueError, r"^d_model: expected an int >= 1, got -8$"),
        (lambda: ours.Transformer(d_model=True, nhead=1), TypeError, r"^d_model: expected an int >= 1, got True$"),
    ],
)
def test_constructors_refuse_bad_values(build: Callable[[], object], kind: type[Exception], message: str) -> None:
    with pytest.raises(kind, match=message):
        build()


def test_numpy_bools_are_flags_and_apply_generator_is_one_too() -> None:
    attention = ours.MultiheadAttention(8, 2, batch_first=np.bool_(True))  # type: ignore[arg-type]
    assert attention.batch_first is True
    model = small_model()
    ids = torch.randint(4, 40, (2, 3))
    with pytest.raises(TypeError, match=r"apply_generator: expected a bool, got 'no'"):
        model(ids, ids, apply_generator="no")  # type: ignore[arg-type]  # was: the logits


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda a, m, x: a(x, x, x, is_causal="no"), r"^is_causal: expected a bool, got 'no'$"),
        (lambda a, m, x: a(x, x, x, need_weights="no"), r"^need_weights: expected a bool, got 'no'$"),
        (lambda a, m, x: a(x, x, x, average_attn_weights=1), r"^average_attn_weights: expected a bool, got 1$"),
        (lambda a, m, x: m(x, x, src_is_causal="False"), r"^src_is_causal: expected a bool or None, got 'False'$"),
        (lambda a, m, x: m(x, x, tgt_is_causal="no"), r"^tgt_is_causal: expected a bool or None, got 'no'$"),
        (lambda a, m, x: m(x, x, memory_is_causal=None), r"^memory_is_causal: expected a bool, got None$"),
        (lambda a, m, x: m.encoder(x, is_causal="no"), r"^is_causal: expected a bool or None, got 'no'$"),
        (lambda a, m, x: m.encoder.layers[0](x, is_causal="no"), r"^is_causal: expected a bool, got 'no'$"),
        (lambda a, m, x: m.decoder(x, x, tgt_is_causal="no"), r"^tgt_is_causal: expected a bool or None, got 'no'$"),
        (lambda a, m, x: m.decoder.layers[0](x, x, memory_is_causal="no"), r"^memory_is_causal: expected a bool"),
        (lambda a, m, x: ours.dropout(x, 0.5, training="no"), r"^training: expected a bool, got 'no'$"),
        (lambda a, m, x: ours.dropout(x, 0.5, inplace="no"), r"^inplace: expected a bool, got 'no'$"),
    ],
)
def test_forward_flags_refuse_a_true_string(call: Callable[..., object], message: str) -> None:
    # A string is true: is_causal="no" hid the future keys, training="no" dropped, without a word.
    attention = ours.MultiheadAttention(8, 2).eval()
    model = ours.Transformer(8, 2, 1, 1, 16).eval()
    with pytest.raises(TypeError, match=message):
        call(attention, model, torch.randn(4, 2, 8))


def test_numpy_ints_are_still_sizes() -> None:
    attention = ours.MultiheadAttention(np.int64(8), np.int64(2), kdim=np.int64(4))  # type: ignore[arg-type]
    assert (attention.num_heads, attention.head_dim, attention.kdim) == (2, 4, 4)
    assert type(attention.num_heads) is int


def test_an_input_of_another_dtype_is_named_with_the_module() -> None:
    # Was torch's "mat1 and mat2 must have the same dtype", naming neither.
    attention = ours.MultiheadAttention(8, 2, batch_first=True)
    query = torch.randn(2, 3, 8)
    message = r"query: expected dtype torch.float32 \(the dtype of the MultiheadAttention's parameters\), got .*64"
    with pytest.raises(ValueError, match=message):
        attention(query.double(), query.double(), query.double())
    with pytest.raises(ValueError, match=r"value: expected dtype torch.float32 .* got torch.int64; convert the input$"):
        attention(query, query, query.long(), need_weights=False)
    model = ours.Transformer(8, 2, 1, 1, 16, batch_first=True)
    with pytest.raises(ValueError, match=r"src: expected dtype torch.float32 .*TransformerEncoderLayer"):
        model(torch.randn(2, 4, 8, dtype=torch.float64), torch.randn(2, 3, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"memory: expected dtype torch.float32 .*TransformerDecoderLayer"):
        model.decoder(torch.randn(2, 3, 8), torch.randn(2, 4, 8, dtype=torch.float64))


def test_a_module_converted_to_the_inputs_dtype_and_autocast_still_run() -> None:
    attention = ours.MultiheadAttention(8, 2, batch_first=True)
    query = torch.randn(2, 3, 8)
    assert attention.double()(query.double(), query.double(), query.double())[0].dtype == torch.float64
    attention.float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output, _ = attention(query.bfloat16(), query.bfloat16(), query.bfloat16(), need_weights=False)
    assert output.dtype == torch.bfloat16


def test_inputs_and_masks_that_are_not_tensors_are_named() -> None:
    attention = ours.MultiheadAttention(8, 2, batch_first=True)
    query = torch.randn(2, 3, 8)
    with pytest.raises(TypeError, match=r"attn_mask: expected a torch.Tensor, got numpy.ndarray"):
        attention(query, query, query, attn_mask=np.zeros((3, 3), dtype=bool))
    with pytest.raises(TypeError, match=r"key_padding_mask: expected a torch.Tensor, got numpy.ndarray"):
        attention(query[0], query[0], query[0], key_padding_mask=np.zeros(3, dtype=bool))
    with pytest.raises(TypeError, match=r"query: expected a torch.Tensor, got list"):
        attention([[0.0] * 8], query, query)
    with pytest.raises(TypeError, match=r"tgt: expected a torch.Tensor, got list"):
        ours.Transformer(8, 2, 1, 1, 16)(torch.randn(4, 2, 8), [[0.0] * 8])
    with pytest.raises(TypeError, match=r"^cache: expected an AttentionCache, got dict$"):  # was an AttributeError
        attention(query, query, query, cache={})  # type: ignore[arg-type]


def test_an_unbatched_key_padding_mask_of_another_shape_is_named_in_the_shape_given() -> None:
    # Was: "must have shape [batch, src_len] = [1, 5], got [1, 1, 5]", the shape it was given
    # asked for, and the shape of its own unsqueeze reported.
    attention = ours.MultiheadAttention(8, 2)
    query, key = torch.randn(4, 8), torch.randn(5, 8)
    with pytest.raises(ValueError, match=r"^key_padding_mask must have shape \[src_len\] = \[5\] with unbatched "):
        attention(query, key, key, key_padding_mask=torch.zeros(1, 5, dtype=torch.bool))
