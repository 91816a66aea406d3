"""A new output folder (an export, a built data set): it must not exist, and it appears complete or not at all."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

__all__ = ["check_new_folder", "write_folder"]


def check_new_folder(out_dir: str | os.PathLike[str]) -> Path:
    """``out_dir`` as a Path; a ``ValueError`` naming it if it exists (nothing is overwritten)."""
    out_dir = Path(out_dir)
    if out_dir.exists():
        raise ValueError(f"out_dir: expected a new folder, got {str(out_dir)!r} which exists")
    return out_dir


def write_folder(out_dir: str | os.PathLike[str], write: Callable[[Path], None]) -> Path:
    """Call ``write(folder)`` on a temporary folder beside ``out_dir``, then rename it to ``out_dir``.

    A crash or an error in ``write`` leaves no partial folder behind; returns ``out_dir``.
    """
    out_dir = check_new_folder(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    # Not tempfile.mkdtemp: its folder is private (0700); this one gets the umask's mode.
    partial = out_dir.parent / f".{out_dir.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    partial.mkdir()
    try:
        write(partial)
        os.replace(partial, out_dir)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return out_dir
