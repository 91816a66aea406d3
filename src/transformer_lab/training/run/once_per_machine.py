"""Work that one process of a machine does for all of a ``torchrun`` launch's processes there: preparing data.

Before training starts there is no process group yet (the Trainer makes it, with the
backend of its device), so the processes agree through a file: the process with
``LOCAL_RANK`` 0 does the work and then writes a marker naming the launch (the torchrun
agent's process id, which every process of the machine shares as its parent); the others
wait for that marker, then read what the work left. A marker of another launch is
ignored. Alone, or with one process per machine, the work is simply done.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from transformer_lab.data.prepared_cache import (
    CorpusKind,
    CorpusKindError,
    NotAPreparedFolderError,
    Prepared,
    cached_folder,
)
from transformer_lab.training.distributed import launch_from_environment

logger = logging.getLogger(__name__)

Result = TypeVar("Result")
POLL_SECONDS = 0.5


def _launch_id() -> str:
    return f"{os.getppid()}-{os.environ.get('MASTER_PORT', '')}-{os.environ.get('TORCHELASTIC_RUN_ID', '')}"


def once_per_machine(work: Callable[[], Result], reopen: Callable[[], Result], marker: Path) -> Result:
    """``work()`` in the first process of this machine; ``reopen()`` in the others once it has finished.

    ``marker`` is a file beside what the work writes (it is replaced, never read by
    anything else). The waiting processes log once a minute; if the first one fails,
    torchrun ends them all.
    """
    launch = launch_from_environment()
    if launch is None or launch.world_size == 1:
        return work()
    launch_id = _launch_id()
    if launch.local_rank == 0:
        result = work()
        marker.parent.mkdir(parents=True, exist_ok=True)
        partial = marker.with_name(f"{marker.name}.{os.getpid()}.partial")
        partial.write_text(launch_id, encoding="utf-8")
        os.replace(partial, marker)
        return result
    started = time.monotonic()
    last_report = started
    while True:
        try:
            if marker.read_text(encoding="utf-8") == launch_id:
                return reopen()
        except FileNotFoundError:
            pass
        if time.monotonic() - last_report >= 60:
            last_report = time.monotonic()
            logger.info(
                "rank %d waits for the first process to prepare the data (%.0f s)", launch.rank, last_report - started
            )
        time.sleep(POLL_SECONDS)


def prepared_corpus(
    kind: CorpusKind[Prepared], prepared_dir: str | os.PathLike[str], cache_dir: str | os.PathLike[str] = ""
) -> Prepared:
    """The run's corpus: the folder ``prepared_dir`` (``data.prepared_dir``) once checked, else the cache's.

    The cache entry of ``kind`` under ``cache_dir`` ("" = the default cache) is reused while
    it can serve the run and prepared (again) when not, by the first process of this machine;
    the others open it once it is ready. Which folder was used, and its report, is logged.
    """
    if prepared_dir:
        try:
            opened = kind.open(Path(prepared_dir))
        except (CorpusKindError, NotAPreparedFolderError) as error:  # the CLI names it as given
            raise error.for_option("data.prepared_dir") from None
        prepared = kind.check_prepared(opened)
    else:
        folder = kind.cache_folder(cache_dir)
        prepared = once_per_machine(
            lambda: kind.open(cached_folder(folder, kind.stale_reason, kind.write_described)),
            lambda: kind.open(folder),
            # Beside the entry, so that every prepared corpus of a cache has its own marker.
            folder.parent / f".{folder.name}.ready",
        )
    report = ", ".join(f"{key} {value}" for key, value in prepared.report.items())
    logger.info("%s corpus from %s: %s", kind.name, prepared.folder, report)
    return prepared
