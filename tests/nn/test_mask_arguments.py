"""The mask helpers refuse arguments of the wrong type, sign or size, naming the helper and the argument."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from transformer_lab.nn import masks


@pytest.mark.parametrize("pad_id", [None, 0.0, "0", True])
def test_padding_mask_refuses_a_pad_id_that_is_not_an_int(pad_id: object) -> None:
    # None == tensor gave the bool False, a "mask" that hides nothing.
    with pytest.raises(TypeError, match=rf"padding_mask: pad_id: expected an int, got {pad_id!r}"):
        masks.padding_mask(torch.tensor([[1, 0]]), pad_id)  # type: ignore[arg-type]


def test_padding_mask_takes_numpy_ints() -> None:
    ids = torch.tensor([[1, 0]])
    assert masks.padding_mask(ids, np.int64(0)).tolist() == [[False, True]]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("dtype", "pad_id", "shown"),
    [(torch.uint8, 256, "[0, 255]"), (torch.int8, 300, "[-128, 127]"), (torch.int64, 2**70, "[-9223372036854775808, ")],
)
def test_padding_mask_refuses_a_pad_id_the_ids_dtype_cannot_hold(dtype: torch.dtype, pad_id: int, shown: str) -> None:
    # Was a silent wrap: 256 against uint8 ids marked token 0 as padding, 300 against int8 ids token 44.
    ids = torch.tensor([[1, 44, 0]], dtype=dtype)
    with pytest.raises(ValueError, match=rf"padding_mask: pad_id: expected an int in {re.escape(shown)}"):
        masks.padding_mask(ids, pad_id)
    assert masks.padding_mask(ids, 0).tolist() == [[False, False, True]]


def test_helpers_refuse_lists_instead_of_tensors() -> None:
    with pytest.raises(TypeError, match=r"padding_mask: token_ids: expected a torch.Tensor, got list"):
        masks.padding_mask([[1, 0]], 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"lengths_to_padding_mask: lengths: expected a torch.Tensor, got list"):
        masks.lengths_to_padding_mask([1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "kind", "message"),
    [
        # Each was an AttributeError ('list' object has no attribute 'dim' / 'dtype') or torch's own error.
        (lambda: masks.padded_query_rows_mask([[True, False]], 2), TypeError, r"query_padding_mask: expected a torch"),
        (lambda: masks.padded_query_rows_mask(torch.zeros(1, 3, dtype=torch.bool), "2"), TypeError, r"num_heads: "),
        (lambda: masks.padded_query_rows_mask(torch.zeros(1, 3, dtype=torch.bool), 2.5), TypeError, r"num_heads: "),
        (
            lambda: masks.padded_query_rows_mask(torch.zeros(1, 2, dtype=torch.bool), 1, [[True]]),
            TypeError,
            "attn_mask",
        ),
        (lambda: masks.keep_to_hidden([[True]]), TypeError, r"keep_to_hidden: keep_mask: expected a torch.Tensor"),
        (lambda: masks.folded_additive_key_mask([[True]], 2, torch.float32), TypeError, r"key_padding_mask: expected"),
        (
            lambda: masks.folded_additive_key_mask(torch.zeros(1, 3, dtype=torch.bool), 2, torch.int64),
            ValueError,
            r"folded_additive_key_mask: dtype: expected a floating dtype, got torch.int64",
        ),
        (
            lambda: masks.folded_additive_key_mask(torch.zeros(1, 3, dtype=torch.bool), 0, torch.float32),
            ValueError,
            "num_heads",
        ),
    ],
)
def test_the_row_and_folded_mask_helpers_name_a_bad_argument(call: object, kind: type, message: str) -> None:
    with pytest.raises(kind, match=message):
        call()  # type: ignore[operator]


def test_lengths_must_be_non_negative_integers() -> None:
    # A negative length gave a row of padding only.
    with pytest.raises(ValueError, match=r"lengths: expected non-negative ints, got -2 at index 1"):
        masks.lengths_to_padding_mask(torch.tensor([3, -2]))
    with pytest.raises(ValueError, match=r"lengths must be an integer tensor of shape \[batch\], got dtype torch.bool"):
        masks.lengths_to_padding_mask(torch.tensor([True, False]))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: masks.causal_mask(2.5), r"causal_mask: query_len: expected an int, got 2.5"),  # was 3 x 3
        (lambda: masks.causal_mask(2, 3.7), r"causal_mask: key_len: expected an int, got 3.7"),  # was 2 x 4
        (lambda: masks.causal_mask("4"), r"causal_mask: query_len: expected an int, got '4'"),
        (lambda: masks.square_subsequent_mask(2.5), r"square_subsequent_mask: size: expected an int, got 2.5"),
        (
            lambda: masks.lengths_to_padding_mask(torch.tensor([1, 2]), 3.5),  # was 4 columns
            r"lengths_to_padding_mask: max_len: expected an int, got 3.5",
        ),
    ],
)
def test_sizes_must_be_ints(call: object, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        call()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: masks.causal_mask(10**6), r"causal_mask: query_len: expected an int in \[1, 65,536\], got 1,000,000"),
        (lambda: masks.causal_mask(1, 10**6), r"causal_mask: key_len: expected an int in \[1, 65,536\]"),
        (
            lambda: masks.lengths_to_padding_mask(torch.tensor([1, 2]), 10**12),
            r"lengths_to_padding_mask: max_len: expected an int in \[0, 65,536\], got 1,000,000,000,000",
        ),
        (
            lambda: masks.lengths_to_padding_mask(torch.tensor([1, 10**9])),
            r"lengths_to_padding_mask: lengths: expected lengths of at most 65,536 .*got 1,000,000,000",
        ),
    ],
)
def test_sizes_past_the_cap_are_refused_before_allocating(call: object, message: str) -> None:
    # These asked the allocator for 1 TB to 8 TB.
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_integer_scalars_of_other_kinds_are_still_sizes() -> None:
    assert masks.causal_mask(np.int64(2), torch.tensor(3)).shape == (2, 3)  # type: ignore[arg-type]
    assert masks.causal_mask(masks.MAX_MASK_LENGTH, masks.MAX_MASK_LENGTH, device="meta").shape == (65_536, 65_536)
    assert masks.lengths_to_padding_mask(torch.tensor([0, 0]), 0).shape == (2, 0)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.uint8])
def test_the_float_causal_mask_refuses_a_dtype_that_is_not_floating(dtype: torch.dtype) -> None:
    # int64 failed inside masked_fill ("value cannot be converted to type int64_t without overflow").
    with pytest.raises(ValueError, match=rf"square_subsequent_mask: dtype: expected a floating dtype .*got {dtype}$"):
        masks.square_subsequent_mask(3, dtype=dtype)


def test_the_float_causal_mask_refuses_a_dtype_that_is_no_dtype() -> None:
    with pytest.raises(TypeError, match=r"square_subsequent_mask: dtype: expected a torch.dtype .*got 'float32'"):
        masks.square_subsequent_mask(3, dtype="float32")  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_the_float_causal_mask_takes_every_floating_dtype(dtype: torch.dtype) -> None:
    mask = masks.square_subsequent_mask(3, dtype=dtype)
    assert mask.dtype == dtype
    assert torch.equal(mask == float("-inf"), masks.causal_mask(3))


@pytest.mark.parametrize("mask_name", ["tgt_mask", "src_key_padding_mask"])
def test_a_mask_on_another_device_than_the_inputs_is_refused_naming_it(mask_name: str) -> None:
    from transformer_lab.nn import Transformer

    torch.manual_seed(0)
    model = Transformer(
        d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16, batch_first=True
    ).eval()
    source, target = torch.randn(2, 5, 8), torch.randn(2, 4, 8)  # [N, S, E], [N, T, E] (batch first)
    # The meta device stands for any other one (a CUDA mask with CPU inputs) on a machine without a GPU.
    masks_given = {
        "tgt_mask": masks.causal_mask(4, device="meta"),  # [T, T]
        "src_key_padding_mask": torch.zeros(2, 5, dtype=torch.bool, device="meta"),  # [N, S]
    }
    name = "attn_mask" if mask_name == "tgt_mask" else "key_padding_mask"
    with pytest.raises(ValueError, match=rf"^{name}: expected a mask on the inputs' device \(cpu\), got one on meta$"):
        model(source, target, **{mask_name: masks_given[mask_name]})
