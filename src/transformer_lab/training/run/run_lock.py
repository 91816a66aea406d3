"""One process trains a run folder at a time: an exclusive lock held for the whole run.

Two runs writing one folder would interleave their ``metrics.jsonl`` and leave ``last/``
from one and ``best/`` from the other. The training process (rank 0 under torchrun) holds
``fcntl.flock`` on the folder's ``.lock`` file, which names its process id and host; a
second ``train`` or ``train --resume`` there is refused at once, naming the holder. The
operating system drops the lock when its process dies, however it dies, so a lock left by
a dead run is simply taken over (and said). Reading a checkpoint never needs the lock.

The lock file is rewritten at every start, so only a file this module wrote is opened
for that: never through a symbolic link (``O_NOFOLLOW``; a link to a user's file was
followed and the file emptied), never a FIFO or device, never a file with other names
(hard links), and never one whose text is not a holder line this module writes. An
``--out`` that is itself a symbolic link is refused, never followed into another folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path
from types import TracebackType
from typing import TextIO

from transformer_lab.file_lock import (
    MAX_LOCK_BYTES,
    holder_line,
    is_holder_text,
    open_lock_file,
    symbolic_link_problem,
)
from transformer_lab.folders import writes_refused_as

logger = logging.getLogger(__name__)

LOCK_FILE = ".lock"


def folder_holder(out_dir: Path) -> str | None:
    """Who holds ``out_dir``'s lock now ("process N on HOST (since ...)"), or None when no live process does."""
    path = Path(out_dir) / LOCK_FILE
    if not os.path.lexists(path):
        return None
    opened = open_lock_file(path, os.O_RDONLY)
    if isinstance(opened, str):
        return None  # not a lock this module wrote, so no run of ours holds it
    with os.fdopen(opened, "rb") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return handle.read(MAX_LOCK_BYTES).decode("utf-8", "replace").strip() or "another process"
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return None


class RunFolderLock:
    """The exclusive lock of a run folder; use ``with RunFolderLock(out_dir):`` around the run.

    ``made_for_the_run``: the caller has just made ``out_dir`` (empty) for this run, so it is
    removed on release as a folder the lock made is, if the run wrote nothing into it.
    """

    def __init__(self, out_dir: Path, *, made_for_the_run: bool = False) -> None:
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / LOCK_FILE
        self._file: TextIO | None = None
        self._made_for_the_run = made_for_the_run
        self._made_folder = False

    def acquire(self) -> None:
        """Take the lock, or raise a ValueError naming the process that holds it.

        A folder the system refuses to make or write (a read-only or full disk) is a
        ``FolderWriteError`` naming it.
        """
        linked = symbolic_link_problem(self.out_dir, "--out")
        if linked:
            raise ValueError(f"{linked}: pass the folder it points to if that is meant")
        self._made_folder = self._made_for_the_run or not self.out_dir.exists()
        # A read-only or full disk, or a folder not this user's, is the folder's fault, not the
        # run's: said as prepare says it.
        outcome = "nothing of it was kept" if self._made_folder else "nothing in it was changed"
        named = None if self._made_for_the_run else "--out"  # a folder the command chose (demo's) was typed by no one
        with writes_refused_as(self.out_dir, outcome, permission=True, name=named):
            self.out_dir.mkdir(parents=True, exist_ok=True)
            opened = open_lock_file(self.path, os.O_RDWR | os.O_CREAT)
        if isinstance(opened, str):
            raise ValueError(
                f"--out: {self.path}: expected the lock file a run writes there, got {opened}; it is left as it "
                "is: remove it if nothing else needs it, or choose another folder"
            )
        handle = os.fdopen(opened, "r+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise ValueError(
                f"--out: {self.out_dir} is being trained by {holder}; wait for that run to end or choose "
                "another folder (two runs in one folder would mix their checkpoints and logs)"
            ) from None
        handle.seek(0)
        previous = self._previous_holder(handle)
        if previous:
            logger.info("%s: taking over the lock left by %s, which is no longer running", self.out_dir, previous)
        handle.seek(0)
        handle.truncate()
        handle.write(holder_line())
        handle.flush()
        self._file = handle

    def _previous_holder(self, handle: TextIO) -> str:
        """The holder line the file holds ("" when empty); text of any other kind is refused, never truncated."""
        try:
            text = handle.read(MAX_LOCK_BYTES + 1).strip()
        except UnicodeDecodeError:
            text = "\ufffd"
        if not is_holder_text(text):
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            handle.close()
            raise ValueError(
                f"--out: {self.path}: expected the lock file a run writes there ('process N on HOST (since ...)' "
                "or nothing), got other text; it is left as it is: remove it if nothing else needs it, or choose "
                "another folder"
            )
        return text

    def release(self) -> None:
        """Drop the lock (the file stays; an empty or stale one means nothing).

        A folder the lock made and nothing else wrote into (a run refused before its first
        file: a bad setting, a device this machine lacks) is removed, lock file and all.
        """
        handle = self._file
        if handle is None:
            return
        self._file = None
        unused = self._made_folder and [entry.name for entry in self.out_dir.iterdir()] == [LOCK_FILE]
        if unused:
            self.path.unlink()  # while the lock is held, so that no other run takes it over meanwhile
        handle.seek(0)
        handle.truncate()
        handle.close()
        if unused:
            with contextlib.suppress(OSError):  # another process wrote into it since: it stays
                self.out_dir.rmdir()

    def __enter__(self) -> RunFolderLock:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
