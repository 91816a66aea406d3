"""One output file written whole or not at all: a temporary file beside it, flushed to disk, then renamed.

A reader (or the next run) sees the previous file or the complete new one, never a part: a
crash, a full disk or Ctrl-C while writing leaves the previous file as it was and removes the
temporary one. Used for every text file a command writes beside its answers: evaluation
outputs, ``--output`` files, model cards, tokenizers.

Modes: a temporary file or folder made here is created as ``open()`` and ``mkdir`` create
theirs (0666 and 0777, less the umask, applied by the system at creation; ``tempfile``'s
are private, 0600 and 0700, and would stay so once renamed into place), and a file that
replaces an existing one takes that file's permission bits, so whoever could read the file
before can read it after, and no one else.
"""

from __future__ import annotations

import contextlib
import os
import stat
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from transformer_lab.write_errors import writes_refused_as

__all__ = [
    "check_file_to_write",
    "check_not_an_input",
    "create_temporary_file",
    "make_temporary_folder",
    "replace_file",
    "write_text_atomically",
    "write_through_temporary",
]

# Names tried before giving up: a clash of 8 random hex digits is already rare.
_NAME_ATTEMPTS = 100


def _existing_mode(path: Path) -> int | None:
    """The permission bits of the file at ``path``, None where there is none."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def create_temporary_file(folder: Path, prefix: str, suffix: str, replacing: Path | None = None) -> tuple[int, Path]:
    """A new file ``folder/PREFIX<8 hex digits>SUFFIX`` opened for writing: its descriptor and path.

    Its mode is what ``open()`` gives a new file (0666 less the umask), not ``tempfile``'s 0600;
    where the file ``replacing`` exists, its permission bits instead, set before anything is
    written (a private file's new text is never readable by others, even under its temporary name).
    """
    mode = None if replacing is None else _existing_mode(replacing)
    for _ in range(_NAME_ATTEMPTS):
        path = folder / f"{prefix}{uuid.uuid4().hex[:8]}{suffix}"
        try:
            # O_EXCL: never an existing file or a link placed under the name.
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            continue
        if mode is not None:
            try:
                os.fchmod(descriptor, mode)
            except BaseException:
                os.close(descriptor)
                path.unlink(missing_ok=True)
                raise
        return descriptor, path
    raise FileExistsError(f"{folder}: expected a free name {prefix}XXXXXXXX{suffix}, got {_NAME_ATTEMPTS} taken")


def make_temporary_folder(parent: Path, prefix: str) -> Path:
    """A new empty folder ``parent/PREFIX<8 hex digits>``; its mode is what ``mkdir`` gives (0777 less the umask)."""
    for _ in range(_NAME_ATTEMPTS):
        path = parent / f"{prefix}{uuid.uuid4().hex[:8]}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"{parent}: expected a free name {prefix}XXXXXXXX, got {_NAME_ATTEMPTS} taken")


def replace_file(temporary: Path, path: Path) -> None:
    """Rename the finished ``temporary`` to ``path``; an existing ``path`` passes its permission bits on."""
    mode = _existing_mode(path)
    if mode is not None:  # else a new file keeps the mode it was created with
        os.chmod(temporary, mode)
    os.replace(temporary, path)


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


def check_file_to_write(path: Path, name: str | None = None) -> None:
    """Refuse a folder where a file is to be written: an ``IsADirectoryError`` naming ``name``, else ``path``.

    ``name`` is what gave the path (``--output``, a keyword argument), so that its user reads
    the option they typed as well as the folder.
    """
    if not path.is_dir():
        return
    if name is None:
        raise IsADirectoryError(f"{path}: expected a file to write, got a folder")
    raise IsADirectoryError(f"{name}: expected a file to write, got the folder {str(path)!r}")


def write_text_atomically(path: str | os.PathLike[str], text: str, *, name: str | None = None) -> Path:
    """Write ``text`` as UTF-8 to ``path`` (its folder must exist) through a temporary file and a rename; returns it.

    ``name``: the option or argument that gave ``path``, which a refusal names (see
    :func:`check_file_to_write`).
    """
    path = Path(path)
    check_file_to_write(path, name)  # else the rename's error would name the hidden temporary, not the path given
    if not path.parent.is_dir():
        named = f"{name}: {path}" if name is not None else str(path)
        raise FileNotFoundError(f"{named}: expected a file in an existing folder, but {path.parent} does not exist")
    # The write's own error names no file (a full disk, /dev/full): said as every refused output is; a
    # file no option named (a card, a default output) is one its caller says more of.
    with writes_refused_as(path, "" if name is None else "nothing was written", name=name):
        write_through_temporary(path, lambda file: file.write(text.encode("utf-8")))
    return path


def written_path(path: Path) -> Path:
    """Where a write to ``path`` lands: a symbolic link's final target (as a shell's ``>`` writes), else ``path``."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def is_stream(path: Path) -> bool:
    """Whether ``path`` (through links) is a pipe, terminal or socket: written into as it is, never replaced."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)


def write_through_temporary(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Make ``path`` by ``write`` into a temporary file beside it, then a rename: whole or not at all.

    A crash, Ctrl-C or full disk while writing leaves an earlier file of that name as it was. A
    symbolic link is written through: its target is the file replaced, and the link stays. A pipe or
    a terminal (``/dev/stdout``, ``<(...)``'s counterpart ``>(...)``) is written into directly.
    """
    with opened_through_temporary(path) as file:
        write(file)


@contextlib.contextmanager
def opened_through_temporary(path: Path) -> Iterator[BinaryIO]:
    """A file to write ``path`` through, as `write_through_temporary` writes it, a part at a time.

    Renamed into place when the block ends; an exception in it (a stop, a refused input) removes
    it, an earlier file of that name left as it was. A pipe or a terminal is written into directly.
    """
    if is_stream(path):
        with open(path, "wb") as stream:
            yield stream
        return
    path = written_path(path)
    try:
        descriptor, temporary = create_temporary_file(path.parent, f".{path.name}.", ".tmp", replacing=path)
    except OSError as error:  # a read-only or full disk, a folder not ours: the same error, naming the path given
        raise type(error)(error.errno, error.strerror, str(path)) from None
    try:
        with os.fdopen(descriptor, "wb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        replace_file(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
