"""One output file written whole or not at all: a temporary file beside it, flushed to disk, then renamed.

A reader (or the next run) sees the previous file or the complete new one, never a part: a
crash, a full disk or Ctrl-C while writing leaves the previous file as it was and removes the
temporary one. Used for every text file a command writes beside its answers: evaluation
outputs, ``--output`` files, model cards, tokenizers.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["check_not_an_input", "write_text_atomically"]


def _same_file(first: Path, second: Path) -> bool:
    try:
        return first.resolve() == second.resolve() or (first.exists() and second.exists() and first.samefile(second))
    except OSError:
        return False


def check_not_an_input(output_flag: str, output: Path | None, inputs: dict[str, object]) -> None:
    """Refuse an output file that is one of the command's input files (flag, or what the file is, -> value).

    Values that are no paths are ignored.

    The write would replace what the command reads (a reference with hypotheses), and the
    next run would score against its own output.
    """
    if output is None:
        return
    for flag, value in inputs.items():
        candidates = value if isinstance(value, (list, tuple)) else [value]
        for candidate in candidates:
            if isinstance(candidate, Path) and _same_file(output, candidate):
                what = f"the {flag} file" if flag.startswith("--") else flag
                raise ValueError(f"{output_flag}: expected a file other than {what} {candidate}, got {output}")


def write_text_atomically(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` as UTF-8 to ``path`` (its folder must exist) through a temporary file and a rename; returns it."""
    path = Path(path)
    if path.is_dir():  # else the rename's error would name the hidden temporary, not the path given
        raise IsADirectoryError(f"{path}: expected a file to write, got a folder")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"{path}: expected a file in an existing folder, but {path.parent} does not exist")
    try:
        descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as error:  # a read-only or full disk, a folder not ours: the same error, naming the path given
        raise type(error)(error.errno, error.strerror, str(path)) from None
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path
