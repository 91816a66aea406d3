"""The lab's four mask panels for a batch, against the masks' definitions written out by hand."""

from __future__ import annotations

import pytest
import torch

from transformer_lab.lab.mask_panels import PANEL_TITLES, mask_panels


def expected_panel(name: str, real: int, length: int) -> torch.Tensor:
    query = torch.arange(length).unsqueeze(1)  # [L, 1]
    key = torch.arange(length).unsqueeze(0)  # [1, L]
    rules = {
        "causal": key > query,
        "key_padding": (key >= real).expand(length, length),
        "decoder": (key > query) | (key >= real),
        "rows_and_columns": (query >= real) | (key >= real),
    }
    return rules[name]


@pytest.mark.parametrize(("lengths", "length"), [([3], None), ([5, 2, 4], None), ([1, 2], 6)])
def test_every_panel_of_every_sentence_matches_its_definition(lengths: list[int], length: int | None) -> None:
    panels = mask_panels(lengths, length)
    padded = length or max(lengths)
    assert len(panels) == len(lengths)
    for real, sentence in zip(lengths, panels):
        assert [panel.name for panel in sentence] == list(PANEL_TITLES)
        for panel in sentence:
            assert panel.hidden.dtype == torch.bool and panel.title == PANEL_TITLES[panel.name]
            assert torch.equal(panel.hidden, expected_panel(panel.name, real, padded)), (panel.name, real)


@pytest.mark.parametrize(
    ("lengths", "length", "message"),
    [([], None, "lengths"), ([2, 0], None, "lengths"), ([4], 3, "at least the longest length 4")],
)
def test_bad_lengths_are_refused(lengths: list[int], length: int | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        mask_panels(lengths, length)
