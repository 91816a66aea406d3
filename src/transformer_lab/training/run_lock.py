"""One process trains a run folder at a time: an exclusive lock held for the whole run.

Two runs writing one folder would interleave their ``metrics.jsonl`` and leave ``last/``
from one and ``best/`` from the other. The training process (rank 0 under torchrun) holds
``fcntl.flock`` on the folder's ``.lock`` file, which names its process id and host; a
second ``train`` or ``train --resume`` there is refused at once, naming the holder. The
operating system drops the lock when its process dies, however it dies, so a lock left by
a dead run is simply taken over (and said). Reading a checkpoint never needs the lock.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import time
from pathlib import Path
from types import TracebackType
from typing import TextIO

logger = logging.getLogger(__name__)

LOCK_FILE = ".lock"


def folder_holder(out_dir: Path) -> str | None:
    """Who holds ``out_dir``'s lock now ("process N on HOST (since ...)"), or None when no live process does."""
    path = Path(out_dir) / LOCK_FILE
    if not path.is_file():
        return None
    with path.open("r", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return handle.read().strip() or "another process"
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return None


class RunFolderLock:
    """The exclusive lock of a run folder; use ``with RunFolderLock(out_dir):`` around the run."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / LOCK_FILE
        self._file: TextIO | None = None

    def acquire(self) -> None:
        """Take the lock, or raise a ValueError naming the process that holds it."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+", encoding="utf-8")
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
        previous = handle.read().strip()
        if previous:
            logger.info("%s: taking over the lock left by %s, which is no longer running", self.out_dir, previous)
        handle.seek(0)
        handle.truncate()
        handle.write(f"process {os.getpid()} on {socket.gethostname()} (since {time.strftime('%Y-%m-%d %H:%M:%S')})")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        """Drop the lock (the file stays; an empty or stale one means nothing)."""
        handle = self._file
        if handle is None:
            return
        self._file = None
        handle.seek(0)
        handle.truncate()
        handle.close()

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
