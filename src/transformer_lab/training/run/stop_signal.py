"""A polite stop: SIGTERM or SIGINT asks training to finish its step, save ``last/`` and exit.

Clusters (SLURM, Kubernetes) send SIGTERM some seconds before they kill; Ctrl-C sends
SIGINT. While `StopRequests` is active, the first such signal is only recorded: the
Trainer sees it after the optimizer step in progress, writes its checkpoint (atomically,
as always) and raises `TrainingInterrupted`. A second signal means "now": the default
action is restored and the signal raised again, which ends the process at once; the last
complete checkpoint is untouched by that, since a save is written aside and renamed.

Outside training (preparing a corpus, exporting), `raise_on_sigterm` makes SIGTERM what
Ctrl-C already is in Python, an exception in the main thread (`Terminated`): the code
that was writing a folder removes its unfinished copy on the way out, where SIGTERM's
default action would end the process and leave it on the disk.

A signal repeated within `REPEAT_SECONDS` of the first is that same request, not a second
one: `timeout` sends SIGTERM to the command and then to its process group, so the command
receives it twice at once, and the copy must not end the clean-up the first one started.

`signals_end_at_once` gives SIGTERM and SIGINT back their default action around a call that
blocks inside C++ (joining a process group), where no Python handler can run until it returns.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# A stop signal this soon after the first is its copy (timeout(1) signals the command, then its group).
REPEAT_SECONDS = 0.5


class TrainingInterrupted(Exception):
    """Training stopped on a signal after saving its checkpoint; ``exit_code`` is 128 + the signal number.

    ``how_to_continue`` ends the message: a command without ``--resume`` (``demo``) names its own way on.
    """

    def __init__(
        self, signal_number: int, step: int, folder: str, how_to_continue: str = "--resume continues from it"
    ) -> None:
        self.signal_number = signal_number
        self.step = step
        self.folder = folder
        self.exit_code = 128 + signal_number
        name = signal.Signals(signal_number).name
        super().__init__(f"interrupted by {name} at step {step}; {folder} saved, {how_to_continue}")


class Terminated(BaseException):
    """SIGTERM arrived outside training; ``exit_code`` is 128 + the signal number.

    A BaseException, as KeyboardInterrupt is, so that no ``except Exception`` swallows it.
    """

    def __init__(self, signal_number: int) -> None:
        self.signal_number = signal_number
        self.exit_code = 128 + signal_number
        super().__init__(f"stopped by {signal.Signals(signal_number).name}")


def _end_now(signal_number: int) -> None:
    """The signal's default action, at once, as if no handler had been installed."""
    signal.signal(signal_number, signal.SIG_DFL)
    os.kill(os.getpid(), signal_number)


class _LaterSignalEndsNow:
    """The handler after the first signal: its copy is ignored, a later one ends the process at once."""

    def __init__(self) -> None:
        self.first_at = time.monotonic()

    def __call__(self, signal_number: int, frame: FrameType | None) -> None:
        if time.monotonic() - self.first_at >= REPEAT_SECONDS:
            _end_now(signal_number)


def _raise_terminated(signal_number: int, frame: FrameType | None) -> None:
    # A later SIGTERM, while the first one's clean-up runs, ends the process at once; its copy does not.
    signal.signal(signal_number, _LaterSignalEndsNow())
    raise Terminated(signal_number)


@contextmanager
def raise_on_sigterm() -> Iterator[None]:
    """While active, SIGTERM raises `Terminated` in the main thread (a no-op in another thread).

    `StopRequests` takes the signal over during training and gives it back after.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def signals_end_at_once() -> Iterator[None]:
    """While active, SIGTERM and SIGINT take their default action: the process ends at once.

    For a call that blocks in C++ without returning to Python (a rank waiting for peers to
    join the process group): a Python handler would only run once it returns, so torchrun's
    SIGTERM, sent when another rank fails, would go unanswered until its 30-second kill.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signal_number: signal.signal(signal_number, signal.SIG_DFL) for signal_number in STOP_SIGNALS}
    try:
        yield
    finally:
        for signal_number, handler in previous.items():
            signal.signal(signal_number, handler)


class StopRequests:
    """Records the first SIGTERM / SIGINT while active (a no-op outside the main thread)."""

    def __init__(self) -> None:
        self.signal_number: int | None = None
        self._after_first: _LaterSignalEndsNow | None = None  # how a later signal is handled
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.signal_number is not None

    def _handle(self, signal_number: int, frame: FrameType | None) -> None:
        if self._after_first is None:
            self.signal_number = signal_number
            self._after_first = _LaterSignalEndsNow()
            return
        # The first one's copy is ignored (its checkpoint is still to be saved); a later signal stops at once.
        self._after_first(signal_number, frame)

    def __enter__(self) -> StopRequests:
        if threading.current_thread() is threading.main_thread():
            for signal_number in STOP_SIGNALS:
                self._previous[signal_number] = signal.signal(signal_number, self._handle)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for signal_number, handler in self._previous.items():
            signal.signal(signal_number, handler)
        self._previous.clear()
