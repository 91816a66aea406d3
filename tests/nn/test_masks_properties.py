"""Property tests: every mask helper against a brute-force loop over positions (hypothesis)."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lab.nn import masks

PROPERTY_SETTINGS = settings(max_examples=60, deadline=None)


@st.composite
def bool_grids(draw: st.DrawFn, *shape: int) -> torch.Tensor:
    count = 1
    for size in shape:
        count *= size
    return torch.tensor(draw(st.lists(st.booleans(), min_size=count, max_size=count))).view(*shape)


@PROPERTY_SETTINGS
@given(query_len=st.integers(1, 8), extra=st.integers(0, 8))
def test_causal_mask(query_len: int, extra: int) -> None:
    key_len = query_len + extra
    expected = [[key > query + extra for key in range(key_len)] for query in range(query_len)]
    assert masks.causal_mask(query_len, key_len).tolist() == expected


@PROPERTY_SETTINGS
@given(
    ids=st.lists(st.lists(st.integers(0, 4), min_size=5, max_size=5), min_size=1, max_size=4), pad_id=st.integers(0, 4)
)
def test_padding_mask(ids: list[list[int]], pad_id: int) -> None:
    expected = [[token == pad_id for token in row] for row in ids]
    assert masks.padding_mask(torch.tensor(ids), pad_id).tolist() == expected


@PROPERTY_SETTINGS
@given(lengths=st.lists(st.integers(0, 7), min_size=1, max_size=5), slack=st.integers(0, 3))
def test_lengths_to_padding_mask(lengths: list[int], slack: int) -> None:
    max_len = max(lengths) + slack
    expected = [[position >= length for position in range(max_len)] for length in lengths]
    assert masks.lengths_to_padding_mask(torch.tensor(lengths), max_len).tolist() == expected


@st.composite
def mask_problems(draw: st.DrawFn) -> tuple:
    batch, heads, query_len, key_len = (draw(st.integers(1, 3)) for _ in range(4))
    per_head = draw(st.booleans())
    attn = draw(bool_grids(batch * heads, query_len, key_len)) if per_head else draw(bool_grids(query_len, key_len))
    padding = draw(bool_grids(batch, key_len))
    return batch, heads, query_len, key_len, attn, padding


def brute_hidden(
    batch: int, heads: int, query_len: int, key_len: int, attn: torch.Tensor, padding: torch.Tensor
) -> list:
    """hidden[b][h][i][j]: hidden by the attention mask (2-D, or row b*H+h of 3-D) or by padding."""

    def attn_hides(b: int, h: int, i: int, j: int) -> bool:
        return bool(attn[i, j]) if attn.dim() == 2 else bool(attn[b * heads + h, i, j])

    return [
        [
            [[attn_hides(b, h, i, j) or bool(padding[b, j]) for j in range(key_len)] for i in range(query_len)]
            for h in range(heads)
        ]
        for b in range(batch)
    ]


@PROPERTY_SETTINGS
@given(problem=mask_problems(), as_float=st.booleans())
def test_merge_masks(problem: tuple, as_float: bool) -> None:
    batch, heads, query_len, key_len, attn, padding = problem
    attn_in = attn.float().masked_fill(attn, float("-inf")) if as_float else attn
    merged = masks.merge_masks(attn_in, padding, batch_size=batch, num_heads=heads, dtype=torch.float32)
    hidden = merged if merged.dtype == torch.bool else torch.isneginf(merged)
    assert merged.dtype == (torch.float32 if as_float else torch.bool)
    assert hidden.expand(batch, heads, query_len, key_len).tolist() == brute_hidden(
        batch, heads, query_len, key_len, attn, padding
    )
    if as_float:  # nothing but 0 and -inf: no mask leaks a finite offset into the scores
        assert torch.all((merged == 0) | torch.isneginf(merged))


@PROPERTY_SETTINGS
@given(problem=mask_problems())
def test_fully_hidden_rows_and_unhide_rows(problem: tuple) -> None:
    batch, heads, query_len, key_len, attn, padding = problem
    merged = masks.merge_masks(attn, padding, batch_size=batch, num_heads=heads, dtype=torch.float32)
    hidden = merged.expand(batch, heads, query_len, key_len)
    rows = masks.fully_hidden_rows(hidden)
    expected = [[[[all(row)] for row in head] for head in sample] for sample in hidden.tolist()]
    assert rows.tolist() == expected
    unhidden = masks.unhide_rows(hidden, rows)
    # A fully hidden row becomes fully visible; every other row is left exactly as it was.
    assert torch.equal(unhidden, torch.where(rows, torch.zeros_like(hidden), hidden))


@PROPERTY_SETTINGS
@given(
    padding=st.integers(1, 3).flatmap(lambda batch: bool_grids(batch, 4)), heads=st.integers(1, 3), causal=st.booleans()
)
def test_padded_query_rows_mask(padding: torch.Tensor, heads: int, causal: bool) -> None:
    batch, length = padding.shape
    attn = masks.causal_mask(length) if causal else None
    result = masks.padded_query_rows_mask(padding, heads, attn_mask=attn)
    expected = [
        [[bool(padding[b, i]) or (causal and j > i) for j in range(length)] for i in range(length)]
        for b in range(batch)
        for _ in range(heads)
    ]
    assert result.tolist() == expected


@PROPERTY_SETTINGS
@given(keep=st.integers(1, 4).flatmap(lambda size: bool_grids(size, size)))
def test_polarity_conversions_are_inverses(keep: torch.Tensor) -> None:
    hidden = masks.keep_to_hidden(keep)
    assert hidden.tolist() == [[not value for value in row] for row in keep.tolist()]
    assert torch.equal(masks.to_sdpa_mask(hidden), keep)
