"""The check that every pair of a corpus fits the model's positional table, made before the first step."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from transformer_lab.data.batching import longer_than
from transformer_lab.data.prepared_pairs import training_pair_origin

Pair = tuple[str, str]


def max_len_advice(architecture_fixed: bool) -> str:
    """What to do with an example longer than model.max_len: raise it (unless a checkpoint fixes it) or leave it out."""
    if architecture_fixed:
        return "leave it out (a fine-tune or a resume keeps the checkpoint's model.max_len)"
    return "raise model.max_len or leave it out"


def check_fits_positional_table(
    lengths: np.ndarray | Sequence[tuple[int, int]],
    pairs: Sequence[Pair] | Path | None,
    max_len: int,
    name: str,
    architecture_fixed: bool = False,
    origin: Callable[[int], str | None] | None = None,
    unit: str = "subword tokens",
) -> None:
    """Refuse, before training starts, a pair whose collated source or target (``lengths`` [N, 2]) exceeds ``max_len``.

    Otherwise the first batch that holds it fails deep in the model, maybe hours in;
    nothing is cut or dropped here either: the user raises model.max_len (where no checkpoint's
    architecture is kept: ``architecture_fixed``) or removes it.
    The first such pair is named by the file and line it was read from (``origin`` of its index,
    where given, or ``pairs`` the folder of a prepared corpus, which keeps no text), else by its
    row and text. ``unit`` is what the task's tokens are ("characters" for couplets).
    """
    too_long = longer_than(lengths, max_len)
    if not too_long.size:
        return
    index = int(too_long[0])
    where = None if origin is None else origin(index)
    if where is not None:
        pair = f"the pair at {where}"
    elif isinstance(pairs, Sequence):
        source, target = pairs[index]
        pair = f"pair {index + 1} ({source[:40]!r} -> {target[:40]!r})"
    else:
        where = None if pairs is None else training_pair_origin(pairs, index)
        pair = f"training pair {index + 1} of the prepared corpus {pairs}" if where is None else f"the pair at {where}"
    raise ValueError(
        f"{name}: {pair} has {int(np.max(lengths[index]))} {unit} on one side (with bos/eos), "
        f"expected at most model.max_len={max_len} ({too_long.size} pair(s) in all); "
        f"{max_len_advice(architecture_fixed)}"
    )
