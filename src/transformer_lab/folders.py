"""A new output folder (an export, a built data set): it must not exist, and it appears complete or not at all.

It is written as a hidden copy beside its final name and renamed into place. While it is
written, the writing process holds an exclusive ``flock`` on a file in the copy; the
operating system drops that lock when the process dies, however it dies, so a copy left
by a killed writer (SIGKILL, out of memory) is recognised and removed by the next folder
written beside it, and a copy whose writer still runs is never touched. One process
writes a folder at a time (`file_lock.writer_lock`): a second writer of the same name is
refused at once, naming the first, instead of failing at the rename after all its work.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from transformer_lab.atomic_files import (
    check_file_to_write,
    create_temporary_file,
    is_stream,
    make_temporary_folder,
    written_path,
)
from transformer_lab.file_lock import remove_abandoned_writer_locks, symbolic_link_problem, writer_lock
from transformer_lab.write_errors import (
    DISK_ERRNOS,
    FolderWriteError,
    describe_os_error,
    refused_write,
    writes_refused_as,
)

__all__ = [
    "DISK_ERRNOS",
    "FolderWriteError",
    "check_folder_output",
    "check_new_folder",
    "describe_os_error",
    "refused_write",
    "remove_abandoned_copies",
    "write_folder",
    "writes_refused_as",
]

logger = logging.getLogger(__name__)

PARTIAL_MARK = ".partial-"  # in the name of the hidden copy: ".NAME.partial-PID-XXXXXXXX"
WRITING_LOCK = ".writing"  # the file in the copy that its writer holds locked


def described_refusal(error: OSError, path: object) -> str:
    """A write the system refused, in a few words: "could not write 'PATH' (Read-only file system, EROFS)".

    A :class:`FolderWriteError` names the path and the errno already, and is said as it is.
    """
    if isinstance(error, FolderWriteError):
        return str(error)
    return f"could not write {str(path)!r} ({describe_os_error(error)})"


def check_file_output(path: Path, name: str | None, advice: str = "") -> None:
    """Refuse, before any work, a file to write (``name``: the option, ``--output``) that the system will not make.

    A folder at ``path`` (`atomic_files.check_file_to_write`), a file on the way, a folder not
    this user's (/sys) or one that takes no new entry (/proc): one line naming ``name``, the path
    and the errno, "--output: could not write '/proc/x.txt' (No such file or directory, ENOENT);
    nothing was written" (a `FolderWriteError`). Proven by a hidden entry made and removed at once
    in the nearest folder there (a file where the file goes, else a folder where the first missing
    one goes), so nothing is left and the folders on the way are still made when the file is written.
    ``name`` None: a path no option gave (said without a name); ``advice`` ends the message.
    """
    check_file_to_write(path, name)
    if is_stream(path):
        return  # a pipe or terminal, written into as it is
    named = "" if name is None else f"{name}: "
    # A link to a file: the write replaces its target, so the target's folder is the one to prove.
    target = written_path(path) if path.exists() else path
    nearest = _nearest_existing(target)
    if nearest is not None and _points_nowhere(nearest):
        raise FolderWriteError(
            errno.ENOENT,
            f"{named}could not write {str(path)!r} (No such file or directory, ENOENT: {str(nearest)!r} is a "
            f"symbolic link to {os.readlink(nearest)!r}, which points nowhere); nothing was written{advice}",
        )
    if nearest is not None and not nearest.is_dir():
        raise FolderWriteError(
            errno.ENOTDIR,
            f"{named}could not write {str(path)!r} (Not a directory, ENOTDIR: {str(nearest)!r} is a file); "
            f"nothing was written{advice}",
        )
    try:
        if nearest == target.parent:
            descriptor, probe = create_temporary_file(target.parent, f".{target.name}.", ".tmp")
            os.close(descriptor)
            probe.unlink()
        elif nearest is not None:
            make_temporary_folder(nearest, ".").rmdir()
    except OSError as error:
        raise FolderWriteError(
            error.errno, f"{named}{described_refusal(error, path)}; nothing was written{advice}"
        ) from None


def check_new_folder(out_dir: str | os.PathLike[str], name: str = "out_dir") -> Path:
    """``out_dir`` as a Path; a ``ValueError`` naming it (``name``: the keyword, or a command's option) if it
    exists, a dangling link too (nothing is overwritten)."""
    out_dir = Path(out_dir)
    if out_dir.is_symlink():
        raise ValueError(
            f"{name}: expected a new folder, got {str(out_dir)!r}, a symbolic link (to {os.readlink(out_dir)!r}), "
            "which is never followed"
        )
    if out_dir.exists():
        raise ValueError(f"{name}: expected a new folder, got {str(out_dir)!r} which exists")
    return out_dir


def check_folder_output(path: Path, name: str) -> None:
    """Refuse, before any work, an output folder (``name``: the option, ``--out``) that is a link or under a file.

    A symbolic link, dangling or not, is never followed (as ``train --out`` refuses it); a path
    under a file (``--out notes.txt/run``) is named with the file, and a ``..`` after a folder that
    does not exist (``--out new/..``) is refused before any folder is made.
    """
    link = symbolic_link_problem(path, name)
    if link is not None:
        raise ValueError(link)
    for index, part in enumerate(path.parts):
        # "new/..": the folder made for the output's lock would be "new", left behind, and the output its parent.
        if part == ".." and index and not Path(*path.parts[:index]).is_dir():
            raise ValueError(
                f"{name}: expected a path whose '..' steps out of an existing folder, got {path}, where "
                f"{Path(*path.parts[:index])} is no folder; name the folder without it"
            )
    nearest = _nearest_existing(path)
    if nearest is not None and _points_nowhere(nearest):
        raise ValueError(
            f"{name}: expected a path through folders, got {path}, through the symbolic link {nearest} "
            f"(to {os.readlink(nearest)!r}), which points nowhere"
        )
    if nearest is not None and not nearest.is_dir():
        raise ValueError(f"{name}: expected a path through folders, got {path}, through the file {nearest}")
    # Proven by a hidden folder made and removed at once where the first one goes (or inside the folder that is
    # there): /proc, /sys, a read-only disk are refused here, named as the option, not by a lock file's errno.
    place = path if path.is_dir() else nearest
    if place is not None:
        try:
            make_temporary_folder(place, ".").rmdir()
        except OSError as error:
            raise FolderWriteError(
                error.errno, f"{name}: {described_refusal(error, path)}; nothing was written"
            ) from None


def _nearest_existing(path: Path) -> Path | None:
    """The nearest of ``path``'s parents that exists (a folder, a file in the way, or a link), or None."""
    # lexists: a link to nothing is in the way too (no folder can be made there), not missing.
    return next((folder for folder in path.parents if os.path.lexists(folder)), None)


def _points_nowhere(path: Path) -> bool:
    """Whether ``path`` is a symbolic link whose target does not exist (an unmounted disk, a folder removed)."""
    return path.is_symlink() and not path.exists()


def write_folder(
    out_dir: str | os.PathLike[str],
    write: Callable[[Path], None],
    *,
    shown_as: str | os.PathLike[str] | None = None,
    locked: bool = False,
) -> Path:
    """Call ``write(folder)`` on a temporary folder beside ``out_dir``, then rename it to ``out_dir``.

    A crash or an error in ``write`` leaves no partial folder behind; returns ``out_dir``.
    A full disk (any of :data:`DISK_ERRNOS`) is a :class:`FolderWriteError` with the same
    errno that names the folder (``shown_as``, where ``out_dir`` is itself a temporary
    name) and says that nothing was kept. Another process writing ``out_dir`` is a
    ValueError naming it; ``locked``: the caller holds ``out_dir``'s writer lock already.
    """
    out_dir = check_new_folder(out_dir)
    shown = out_dir if shown_as is None else shown_as
    # Also where the lock or the hidden copy could not even be made (a read-only parent).
    with writes_refused_as(shown, "nothing of it was kept"), contextlib.ExitStack() as held:
        if not locked:
            # A parent not this user's to write is the folder's fault too, named as a full disk
            # is (only here: inside `write`, a PermissionError may be an input's).
            with writes_refused_as(shown, "nothing of it was kept", permission=True):
                held.enter_context(writer_lock(out_dir, wait=False))
            # Checked again under the lock: a writer that just finished made it meanwhile.
            out_dir = check_new_folder(out_dir)
        return _write_unlocked(out_dir, write, shown)


def _write_unlocked(out_dir: Path, write: Callable[[Path], None], shown: str | os.PathLike[str]) -> Path:
    with writes_refused_as(shown, "nothing of it was kept", permission=True):
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        remove_abandoned_copies(out_dir.parent)
        partial = make_temporary_folder(out_dir.parent, f".{out_dir.name}{PARTIAL_MARK}{os.getpid()}-")
    lock = None
    try:
        lock = _hold_writing_lock(partial)
        write(partial)
        # Gone before the rename, so that no one takes the finished folder for a copy.
        (partial / WRITING_LOCK).unlink()
        os.replace(partial, out_dir)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    finally:
        if lock is not None:
            os.close(lock)
    return out_dir


def _hold_writing_lock(partial: Path) -> int:
    """Lock a new file in ``partial`` and name it ``WRITING_LOCK``; returns its descriptor (the lock)."""
    unlocked = partial / f"{WRITING_LOCK}.new"
    descriptor = os.open(unlocked, os.O_CREAT | os.O_WRONLY, 0o644)
    fcntl.flock(descriptor, fcntl.LOCK_EX)
    # Renamed only once locked: a lock file under its name is never free while its writer runs.
    os.replace(unlocked, partial / WRITING_LOCK)
    return descriptor


def remove_abandoned_copies(parent: str | os.PathLike[str]) -> list[Path]:
    """Remove the hidden copies in ``parent`` whose writer is dead (see the module docstring); returns them.

    Only copies that :func:`write_folder` made are candidates (their name and lock file
    say so), and only those whose lock can be taken: no running writer's copy is touched.
    """
    removed = []
    for copy in sorted(Path(parent).glob(f".*{PARTIAL_MARK}*")):
        try:
            descriptor = os.open(copy / WRITING_LOCK, os.O_RDONLY)
        except OSError:
            continue  # not a copy of ours, or one being renamed into place
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            continue  # its writer runs
        try:
            shutil.rmtree(copy, ignore_errors=True)
        finally:
            os.close(descriptor)
        logger.info("removed %s, left unfinished by a process that no longer runs", copy)
        removed.append(copy)
    remove_abandoned_writer_locks(Path(parent))  # the lock files beside such copies, named in none
    return removed
