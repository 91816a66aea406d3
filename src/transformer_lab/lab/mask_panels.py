"""The four mask pictures the lab explains, for a batch of sentences of different lengths.

Every panel is a ``[query, key]`` bool grid built by :mod:`transformer_lab.nn.masks`
(True = hidden): the causal mask, the key padding mask (padded columns), the two merged
(what a decoder's self-attention uses), and the padded rows hidden as well (what the
tutorials ask about and the model never needs). :func:`~transformer_lab.lab.figures.plot_masks`
draws them and the web page of ``transformer-lab serve`` shows them.

Shape legend: B batch, L the longest length (every sentence is padded to it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from transformer_lab.nn import masks

__all__ = ["MaskPanel", "PANEL_TITLES", "mask_panels"]

# name -> title, in the order the lab shows them.
PANEL_TITLES: dict[str, str] = {
    "causal": "causal_mask: the future",
    "key_padding": "key padding: padded columns",
    "decoder": "causal | key padding",
    "rows_and_columns": "padded rows and columns",
}


@dataclass(frozen=True)
class MaskPanel:
    """One mask of one sentence.

    Shape:
        hidden ``[L, L]`` bool, True where the query (row) may not attend to the key (column).
    """

    name: str
    title: str
    hidden: Tensor


def mask_panels(lengths: Sequence[int], length: int | None = None) -> list[list[MaskPanel]]:
    """The four panels of :data:`PANEL_TITLES` for each sentence of a batch.

    ``lengths`` are the real lengths; the batch is padded to ``length`` (default: the
    longest), so a shorter sentence's last positions are padding.

    Shape:
        returns B lists of panels, each ``[L, L]``.
    """
    if len(lengths) == 0 or any(not isinstance(value, int) or value < 1 for value in lengths):
        raise ValueError(f"lengths: expected one or more ints >= 1, got {list(lengths)!r}")
    length = max(lengths) if length is None else length
    if length < max(lengths):
        raise ValueError(f"length: expected at least the longest length {max(lengths)}, got {length}")
    batch_size = len(lengths)
    key_padding = masks.lengths_to_padding_mask(torch.tensor(list(lengths)), length)  # [B, L]
    causal = masks.causal_mask(length)  # [L, L]
    columns = masks.merge_masks(None, key_padding, batch_size=batch_size, num_heads=1, dtype=torch.float32)
    assert columns is not None  # a key padding mask was given
    columns = columns.expand(batch_size, 1, length, length)[:, 0]  # [B, L, L]
    decoder = masks.merge_masks(causal, key_padding, batch_size=batch_size, num_heads=1, dtype=torch.float32)
    assert decoder is not None
    rows_and_columns = masks.padded_query_rows_mask(key_padding, 1) | columns  # [B, L, L]
    grids = {
        "causal": causal.expand(batch_size, length, length),  # [B, L, L]
        "key_padding": columns,
        "decoder": decoder[:, 0],  # [B, L, L]
        "rows_and_columns": rows_and_columns,
    }
    return [
        [MaskPanel(name, title, grids[name][sentence]) for name, title in PANEL_TITLES.items()]
        for sentence in range(batch_size)
    ]
