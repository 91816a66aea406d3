"""Which device a model runs on: ``"auto"`` (CUDA where present, else the CPU), ``"cpu"``, ``"cuda"``, ``"cuda:N"``.

Every inference command's ``--device`` and the Python API's ``device=`` are read by
:func:`resolve_device`, so that a device this machine lacks is refused before a
checkpoint is loaded, in one line naming the option, instead of by torch's own error
from the middle of a ``model.to`` ("Torch not compiled with CUDA enabled").
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["DEVICE_CHOICES", "load_on", "resolve_device"]

# What a user may write; "cuda:N" stands for any CUDA device index.
DEVICE_CHOICES = ("auto", "cpu", "cuda", "cuda:N")
_CUDA_INDEX = re.compile(r"cuda:(\d+)")


def resolve_device(requested: str | torch.device, *, name: str = "device") -> torch.device:
    """The torch device for ``requested``, one of :data:`DEVICE_CHOICES` (or a ``torch.device``).

    ``"auto"`` is CUDA where ``torch.cuda.is_available()``, else the CPU. ``"cuda"`` or
    ``"cuda:N"`` where CUDA is absent, or an index past the last GPU, is a ValueError
    naming ``name`` (the option or argument that gave it), what was expected and what was
    given.
    """
    if isinstance(requested, torch.device):
        if requested.type == "cpu":  # torch.device("cpu", 0) too: a machine's CPU is one device
            return torch.device("cpu")
        text = str(requested)
    elif isinstance(requested, str):
        text = requested
    else:
        raise ValueError(f"{name}: expected one of {', '.join(DEVICE_CHOICES)}, got {requested!r}")
    if text == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if text == "cpu":
        return torch.device("cpu")
    index_match = _CUDA_INDEX.fullmatch(text)
    if text != "cuda" and index_match is None:
        raise ValueError(
            f"{name}: expected one of {', '.join(DEVICE_CHOICES)} (N: a GPU's index, from 0), got {text!r}"
        )
    if not torch.cuda.is_available():
        raise ValueError(
            f"{name}: expected a device this machine has, got {text!r}, but torch.cuda.is_available() is False "
            "(no NVIDIA GPU or driver, or a CPU build of PyTorch); use cpu, or auto to take CUDA where present"
        )
    if index_match is None:
        return torch.device("cuda")
    index, count = int(index_match.group(1)), torch.cuda.device_count()
    if index >= count:
        raise ValueError(f"{name}: expected a CUDA index below {count} (this machine's GPU count), got {text!r}")
    return torch.device("cuda", index)


def load_on(
    load: Callable[[str | os.PathLike[str]], tuple[Any, Any, Any]],
    checkpoint: str | os.PathLike[str],
    device: str | torch.device,
) -> tuple[Any, Any, Any, torch.device]:
    """(model, vocabulary, config, device): what ``load`` rebuilds from ``checkpoint``, and ``device`` resolved."""
    resolved = resolve_device(device)  # before the load: a device this machine lacks costs nothing
    return (*load(checkpoint), resolved)
