"""Seeded, stratified splits of a labelled dataset into two disjoint parts.

Used to carve a validation set out of a training file (the test set is never touched for
model selection). Every class gives the same share of its examples to the held-out part,
so the class proportions of both parts follow the whole's; which examples go is drawn
from a generator seeded by `seed` alone, so the split is the same on every machine and
in every run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from transformer_lab.data._checks import check_integer, is_integer


def stratified_split(labels: Sequence[int], fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Split example indices into (kept, held out), class by class.

    Of each class's `n` examples, `round(fraction * n)` are held out, drawn at random
    with `seed`. Both lists are in increasing index order; together they hold every
    index exactly once.

    Args:
        labels: the class of each example (any integers).
        fraction: the share held out, in [0, 1).
        seed: selects the random draw (>= 0).

    Returns:
        (kept indices, held-out indices).
    """
    if isinstance(labels, (str, bytes)) or len(labels) == 0:
        raise ValueError(f"labels must be a non-empty sequence of integer classes, got {labels!r:.80}")
    _check_fraction(fraction)
    for index, label in enumerate(labels):
        if not is_integer(label):
            raise ValueError(f"labels[{index}] must be an integer class, got {label!r}")
    held_out = stratified_held_out(np.asarray([int(label) for label in labels], dtype=np.int64), fraction, seed)
    held_set = set(held_out.tolist())
    kept = [index for index in range(len(labels)) if index not in held_set]
    return kept, held_out.tolist()


def stratified_held_out(labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """The held-out indices of `stratified_split` (increasing) from the classes as one int64 array [N].

    What a corpus too large for lists needs: the labels at 8 bytes a row, no list of the kept rows.
    """
    _check_fraction(fraction)
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


def _check_fraction(fraction: object) -> None:
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 <= fraction < 1.0:
        raise ValueError(f"fraction must be a number in [0, 1), got {fraction!r}")
