"""Shared builders for the nn tests: random inputs and masks that never hide a whole row."""

from __future__ import annotations

import torch
from torch import Tensor


def random_key_padding_mask(batch: int, length: int, kind: str) -> Tensor:
    """Pad the tail of every other sequence; the first key always stays visible."""
    hidden = torch.zeros(batch, length, dtype=torch.bool)
    for row in range(0, batch, 2):
        hidden[row, max(1, length - 1 - row) :] = True
    if kind == "bool":
        return hidden
    return torch.zeros(batch, length).masked_fill(hidden, float("-inf"))


def random_attn_mask(shape: tuple[int, ...], kind: str) -> Tensor:
    """Random hidden pairs, with key 0 always visible so that no row is fully hidden."""
    hidden = torch.rand(shape) < 0.3
    hidden[..., 0] = False
    if kind == "bool":
        return hidden
    additive = torch.randn(shape) * 0.5  # a float mask may also just bias the scores
    return additive.masked_fill(hidden, float("-inf"))


def max_difference(first: Tensor, second: Tensor) -> float:
    return (first - second).abs().max().item()
