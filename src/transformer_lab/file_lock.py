"""Exclusive locks that name their holder: a run folder's ``.lock``, and one writer per new folder.

A lock is ``fcntl.flock`` on a small file holding "process N on HOST (since ...)"; the
operating system drops it when its process dies, however it dies. A lock file is opened
without following a link (``O_NOFOLLOW``), never as a FIFO or device (``O_NONBLOCK``, then
checked to be a plain file) and never when it has other names (hard links), so a file
placed under its name is refused, never written.

:func:`writer_lock` guards a folder that does not exist yet (a prepared corpus, an export,
a cache entry) through the hidden file ``.NAME.lock`` beside it, removed by its holder when
done: a second writer either waits for the first and then finds its folder, or is refused
at once, naming the first.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger(__name__)

# What a lock's holder writes, and all that a lock file may hold besides nothing.
HOLDER_LINE = re.compile(r"process \d+ on \S* \(since [\d: -]+\)")
# A holder line is under 300 bytes; more means the file is not one of ours.
MAX_LOCK_BYTES = 4096


def holder_line() -> str:
    """This process as a lock names it: "process N on HOST (since YYYY-MM-DD HH:MM:SS)"."""
    return f"process {os.getpid()} on {socket.gethostname()} (since {time.strftime('%Y-%m-%d %H:%M:%S')})"


def open_lock_file(path: Path, flags: int) -> int | str:
    """A descriptor of ``path`` opened without following a link, or why it is not a lock file (a sentence).

    ``O_NONBLOCK`` keeps a FIFO placed under the name from blocking the open; what was
    opened is then checked to be a plain file with no other name.
    """
    try:
        descriptor = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP:
            return f"a symbolic link (to {os.readlink(path)!r})"
        raise
    info = os.fstat(descriptor)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = "not a plain file"
    elif info.st_nlink > 1:
        problem = f"a file with {info.st_nlink} names (hard links), so also someone else's"
    if problem is not None:
        os.close(descriptor)
        return problem
    return descriptor


def read_holder(descriptor: int) -> str:
    """The holder line a lock file holds ("" when empty, the text as read when it is not a holder line)."""
    return os.pread(descriptor, MAX_LOCK_BYTES + 1, 0).decode("utf-8", "replace").strip()


def is_holder_text(text: str) -> bool:
    """Whether ``text`` is what a lock file of ours may hold: nothing, or one holder line."""
    return not text or (len(text) <= MAX_LOCK_BYTES and HOLDER_LINE.fullmatch(text) is not None)


def symbolic_link_problem(path: Path, option: str) -> str | None:
    """The one-line refusal of ``path`` when it is a symbolic link (never followed into another folder), else None."""
    if not path.is_symlink():
        return None
    target = os.readlink(path)
    return f"{option}: expected a folder of its own, got {path}, a symbolic link (to {target!r}), never followed"


def writer_lock_path(folder: Path) -> Path:
    """The hidden lock file beside ``folder`` that its writer holds."""
    return folder.parent / f".{folder.name}.lock"


@contextlib.contextmanager
def writer_lock(folder: Path, *, wait: bool, option: str = "out_dir") -> Iterator[None]:
    """Hold the one-writer lock of ``folder`` (see the module docstring) for the ``with`` block.

    Held by another process: with ``wait`` log one line naming it and wait for it to end;
    without, a ValueError naming ``option``, the folder and the holder.
    """
    path = writer_lock_path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = _take_writer_lock(path, folder, wait, option)
    try:
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, holder_line().encode("utf-8"), 0)
        yield
    finally:
        # Removed before it is let go: a waiter then sees the name gone and tries afresh.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(descriptor)


def _take_writer_lock(path: Path, folder: Path, wait: bool, option: str) -> int:
    said = False
    while True:
        opened = open_lock_file(path, os.O_RDWR | os.O_CREAT)
        if isinstance(opened, str):
            raise ValueError(f"{option}: {path}: expected the lock file of {folder}'s writer, got {opened}; {_LEFT}")
        try:
            fcntl.flock(opened, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = read_holder(opened) or "another process"
            if not wait:
                os.close(opened)
                raise ValueError(
                    f"{option}: {folder} is being written by {holder}; wait for it to end or choose another folder"
                ) from None
            if not said:
                logger.warning("%s is being prepared by %s; waiting for it to finish", folder, holder)
                said = True
            try:
                fcntl.flock(opened, fcntl.LOCK_EX)
            except BaseException:  # a stop signal while waiting
                os.close(opened)
                raise
        if _still_named(path, opened):
            text = read_holder(opened)
            if is_holder_text(text):
                return opened
            os.close(opened)
            raise ValueError(f"{option}: {path}: expected the lock file of {folder}'s writer, got other text; {_LEFT}")
        os.close(opened)  # its holder finished and removed it while we waited


def remove_abandoned_writer_locks(parent: Path) -> list[Path]:
    """Remove the writer locks in ``parent`` that a dead process left (a holder line, free); returns them.

    Removed while locked here, so a writer that opened one meanwhile sees it gone and tries afresh.
    """
    removed = []
    for path in sorted(parent.glob(".*.lock")):
        opened = open_lock_file(path, os.O_RDONLY)
        if isinstance(opened, str):
            continue
        try:
            fcntl.flock(opened, fcntl.LOCK_EX | fcntl.LOCK_NB)
            text = read_holder(opened)
            if text and is_holder_text(text) and _still_named(path, opened):
                os.unlink(path)
                removed.append(path)
        except BlockingIOError:
            pass  # its writer runs
        finally:
            os.close(opened)
    return removed


_LEFT = "it is left as it is: remove it if nothing else needs it, or choose another folder"


def _still_named(path: Path, descriptor: int) -> bool:
    """Whether ``path`` still names the file open as ``descriptor`` (its holder removes it when done)."""
    try:
        named = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    opened = os.fstat(descriptor)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)
