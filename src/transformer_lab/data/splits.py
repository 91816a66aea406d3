"""Seeded, stratified splits of a labelled dataset into two disjoint parts.

Used to carve a validation set out of a training file (the test set is never touched for
model selection). Every class gives the same share of its examples to the held-out part,
so the class proportions of both parts follow the whole's; which examples go is drawn
from a generator seeded by `seed` alone, so the split is the same on every machine and
in every run.
"""

from __future__ import annotations

import numpy as np
import torch

from transformer_lab.data._checks import check_integer


def stratified_held_out(labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """The held-out example indices (increasing), class by class, from the classes as one int64 array [N].

    Of each class's `n` examples, `round(fraction * n)` are held out, drawn at random with
    `seed` (>= 0); `fraction` is in [0, 1). The labels take 8 bytes a row and no list of the
    kept rows is made, so a corpus too large for lists can be split.
    """
    check_fraction(fraction)
    seed = check_integer("seed", seed, minimum=0)
    generator = torch.Generator().manual_seed(seed)
    held_out = []
    # Classes in sorted order, so the draw does not depend on which class comes first.
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        count = round(fraction * len(members))
        order = torch.randperm(len(members), generator=generator).numpy()
        held_out.append(members[order[:count]])
    return np.sort(np.concatenate(held_out)) if held_out else np.zeros(0, dtype=np.int64)


def check_fraction(fraction: object, name: str = "fraction") -> None:
    """Refuse a share to hold out that is not a number in [0, 1); ``name`` is the setting that gave it."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 <= fraction < 1.0:
        raise ValueError(f"{name}: expected a number in [0, 1), got {fraction!r}")
