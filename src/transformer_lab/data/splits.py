"""Seeded, stratified splits of a labelled dataset into two disjoint parts.

Used to carve a validation set out of a training file (the test set is never touched for
model selection). Every class gives the same share of its examples to the held-out part,
so the class proportions of both parts follow the whole's; which examples go is drawn
from a generator seeded by `seed` alone, so the split is the same on every machine and
in every run.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 <= fraction < 1.0:
        raise ValueError(f"fraction must be a number in [0, 1), got {fraction!r}")
    seed = check_integer("seed", seed, minimum=0)
    by_class: dict[int, list[int]] = {}
    for index, label in enumerate(labels):
        if not is_integer(label):
            raise ValueError(f"labels[{index}] must be an integer class, got {label!r}")
        by_class.setdefault(int(label), []).append(index)
    generator = torch.Generator().manual_seed(seed)
    held_out: list[int] = []
    # Classes in sorted order, so the draw does not depend on which class comes first.
    for label in sorted(by_class):
        members = by_class[label]
        count = round(fraction * len(members))
        order = torch.randperm(len(members), generator=generator).tolist()
        held_out.extend(members[position] for position in order[:count])
    held_set = set(held_out)
    kept = [index for index in range(len(labels)) if index not in held_set]
    return kept, sorted(held_out)
