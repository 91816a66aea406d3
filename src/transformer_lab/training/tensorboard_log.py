"""``metrics.jsonl``'s scalars as TensorBoard event files, for a run watched while it trains.

With ``train.tensorboard`` the Trainer mirrors every row it logs into ``out_dir/tensorboard/``
as TensorBoard's event records: a ``train`` row's loss, learning rate, gradient norm
and tokens/s under ``train/``, an ``eval`` row's metrics under ``eval/``, each at the row's
optimizer step. ``tensorboard --logdir RUN`` shows them. A resumed run starts a new event
file that tells TensorBoard to drop the old file's points after the resumed step (its
``purge_step``), as ``metrics.jsonl`` drops their rows. The event files are a side output:
a disk that refuses them is one warning, and training goes on.

The ``tensorboard`` package is an optional extra (``pip install -e ".[tensorboard]"``);
without it, asking for the log is one error naming that extra.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import os
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from transformer_lab.extras import require_extra
from transformer_lab.folders import describe_os_error

__all__ = ["TENSORBOARD_FOLDER", "TensorBoardLog", "require_tensorboard"]

TENSORBOARD_FOLDER = "tensorboard"
# Row keys that place a row rather than measure something.
_POSITION_KEYS = ("event", "step", "epoch")
_FLUSH_SECONDS = 30.0
_FILE_NUMBERS = itertools.count()

logger = logging.getLogger(__name__)


def require_tensorboard() -> None:
    """Raise a one-line ``MissingExtraError`` naming the extra unless the tensorboard package is importable."""
    require_extra("tensorboard", "train.tensorboard (event files for TensorBoard)")


class TensorBoardLog:
    """Writes the numeric fields of ``metrics.jsonl`` rows as scalars ``<event>/<field>`` at the row's step.

    The event file is written in this thread, so that a write the system refuses (a full
    or read-only disk) is caught here: one warning naming the folder and the errno, and the
    run goes on without event files (``metrics.jsonl`` holds every row). torch's
    ``SummaryWriter`` wrote from a thread of its own, whose error was a thread traceback
    and then an exception in the next call.

    Args:
        out_dir: the run folder; the events go to ``out_dir/tensorboard/``.
        purge_step: earlier event files' points from this step on are dropped (a resumed run's next step).
    """

    def __init__(self, out_dir: str | Path, purge_step: int | None = None) -> None:
        require_tensorboard()
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog

        self.folder = Path(out_dir) / TENSORBOARD_FOLDER
        self._file: BinaryIO | None = None
        self._last_flush = time.monotonic()
        started = [Event(wall_time=time.time(), file_version="brain.Event:2")]
        if purge_step is not None:
            # What SummaryWriter writes for its purge_step: TensorBoard drops later points of older files.
            started.append(Event(wall_time=time.time(), step=purge_step, file_version="brain.Event:2"))
            started.append(Event(step=purge_step, session_log=SessionLog(status=SessionLog.START)))
        self._guarded(lambda: self._open(started))

    def _open(self, events: list[Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        # The last part numbers this process's files, as SummaryWriter's does: a run resumed
        # within the same second in the same process must not meet its own first file.
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.{next(_FILE_NUMBERS)}"
        self._file = open(self.folder / name, "xb")  # noqa: SIM115 (held open for the whole run)
        for event in events:
            self._write(event)
        self._file.flush()

    def _write(self, event: Any) -> None:
        from tensorboard.summary.writer.record_writer import RecordWriter

        assert self._file is not None
        RecordWriter(self._file).write(event.SerializeToString())

    def _guarded(self, action: Callable[[], None]) -> None:
        """Run ``action`` on the event file; a refused write ends the event files with one warning."""
        try:
            action()
        except OSError as error:
            logger.warning(
                "tensorboard: could not write %s (%s); training goes on without event files, metrics.jsonl "
                "still holds every row",
                self.folder,
                describe_os_error(error),
            )
            self._drop()

    def _drop(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()

    def append(self, row: Mapping[str, Any]) -> None:
        """Add one row's numbers (bools, None and text are not scalars and are left out)."""
        if self._file is not None:
            self._guarded(lambda: self._append(row))

    def _append(self, row: Mapping[str, Any]) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        step = int(row["step"])
        event = str(row.get("event", "train"))
        for name, value in row.items():
            if name in _POSITION_KEYS or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if math.isfinite(value):
                scalar = Summary.Value(tag=f"{event}/{name}", simple_value=float(value))
                self._write(Event(wall_time=time.time(), step=step, summary=Summary(value=[scalar])))
        # Evaluations are rare and worth seeing at once; training rows every half minute.
        if self._file is not None and (event != "train" or time.monotonic() - self._last_flush >= _FLUSH_SECONDS):
            self._file.flush()
            self._last_flush = time.monotonic()

    def close(self) -> None:
        if self._file is not None:
            self._guarded(self._close)

    def _close(self) -> None:
        assert self._file is not None
        self._file.flush()
        os.fsync(self._file.fileno())
        self._drop()
