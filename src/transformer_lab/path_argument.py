"""`path_argument`: a path the Python API was given, as a Path, or one error naming the argument."""

from __future__ import annotations

import os
from pathlib import Path

from transformer_lab.shortened import shortened

__all__ = ["path_argument"]


def path_argument(path: object, name: str) -> Path:
    """``path`` as a Path, ``~`` expanded (as the command line's); bytes, or anything but a str or an
    os.PathLike of str, is a TypeError naming ``name``.

    pathlib's own message ("argument should be a str object ...") names no argument.
    """
    if isinstance(path, (str, os.PathLike)):
        text = os.fspath(path)
        if isinstance(text, str):
            return Path(text).expanduser()
    if isinstance(path, bytes):
        given = f"bytes {shortened(repr(path), 80)}; decode it with os.fsdecode"
    else:
        given = type(path).__name__
    raise TypeError(f"{name}: expected a str or an os.PathLike path such as pathlib.Path, got {given}")
