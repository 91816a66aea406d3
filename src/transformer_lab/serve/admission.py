"""Admission to the model: one request at a time, a bounded queue in arrival order, a deadline from arrival.

See ``serve.app``'s docstring for the rules the web server gets from it.
"""

import asyncio
import math
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Awaitable, Callable

# How often a waiting request checks whether its client is still there.
DISCONNECT_POLL_SECONDS = 0.25
# The longest wait a server may grant: an hour, far past any client's patience and far
# below the timeouts the event loop and the locks can hold (1e308 s overflows them).
MAX_WAIT_SECONDS = 3600.0


class Busy(Exception):
    """The request is refused without running (queue full, or waited too long): a 503."""

    def __init__(self, message: str, retry_after_seconds: int) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_seconds = retry_after_seconds


class ClientGone(Exception):
    """The client disconnected before the request's turn came; it is not run."""


@dataclass(eq=False)
class _Waiter:
    """One request waiting for the model, on the event loop that runs it."""

    loop: asyncio.AbstractEventLoop
    woken: "asyncio.Future[None]"
    granted: bool = False  # the slot was handed to it (read and written under Admission._mutex)


def _wake(future: "asyncio.Future[None]") -> None:
    if not future.done():
        future.set_result(None)


class Admission:
    """One request at a time at the model; at most ``max_queue`` waiting, in arrival order, none past ``wait_limit``.

    Thread-safe, and not tied to one event loop: Starlette's ``TestClient`` runs each
    request on an event loop of its own, so the slot is handed over with
    ``call_soon_threadsafe`` under a ``threading.Lock`` that is never held across an ``await``.
    """

    def __init__(self, max_queue: int, wait_limit: float) -> None:
        if isinstance(max_queue, bool) or not isinstance(max_queue, int) or max_queue < 0:
            raise ValueError(f"max_queue: expected an integer >= 0, got {max_queue!r}")
        if (
            isinstance(wait_limit, bool)
            or not isinstance(wait_limit, (int, float))
            or not (math.isfinite(wait_limit) and 0 < wait_limit <= MAX_WAIT_SECONDS)
        ):
            raise ValueError(
                f"lock_timeout: expected a number of seconds in (0, {MAX_WAIT_SECONDS:.0f}], got {wait_limit!r}"
            )
        self.max_queue = max_queue
        self.wait_limit = float(wait_limit)
        self._mutex = threading.Lock()
        self._busy = False
        self._queue: deque[_Waiter] = deque()
        self._work_seconds = 1.0  # a running mean of one request's work, for Retry-After

    @property
    def queued(self) -> int:
        """How many requests wait right now (not counting the running one)."""
        with self._mutex:
            return len(self._queue)

    def _retry_after(self) -> int:
        """Seconds until the queue has likely drained by one place (at least 1); call under the mutex."""
        return max(1, math.ceil(self._work_seconds * (len(self._queue) + 1)))

    def _timeout(self) -> Busy:
        with self._mutex:
            retry_after = self._retry_after()
        return Busy(
            f"the server is busy: the model was not free within {self.wait_limit:g} s of the request's arrival, "
            f"try again in {retry_after} s",
            retry_after,
        )

    async def acquire(self, arrived: float, is_disconnected: Callable[[], Awaitable[bool]]) -> None:
        """Return holding the slot, or raise :class:`Busy` or :class:`ClientGone` without it.

        ``arrived``: the request's ``time.monotonic()`` at arrival; ``is_disconnected``:
        ``Request.is_disconnected``. The caller must :meth:`release` after its work.
        """
        deadline = arrived + self.wait_limit
        waiter: _Waiter | None = None
        with self._mutex:
            if not self._busy and not self._queue:
                self._busy = True
            elif len(self._queue) >= self.max_queue:
                retry_after = self._retry_after()
                raise Busy(
                    f"the server is busy: {len(self._queue)} requests already wait for the model "
                    f"(at most {self.max_queue} may), try again in {retry_after} s",
                    retry_after,
                )
            else:
                loop = asyncio.get_running_loop()
                waiter = _Waiter(loop, loop.create_future())
                self._queue.append(waiter)
        if waiter is not None:
            await self._wait(waiter, deadline, is_disconnected)
        try:
            # The turn may come (or the body finish arriving) after the deadline: refuse, don't run.
            if time.monotonic() > deadline:
                raise self._timeout()
            if await is_disconnected():
                raise ClientGone()
        except BaseException:
            self.release()
            raise

    async def _wait(self, waiter: _Waiter, deadline: float, is_disconnected: Callable[[], Awaitable[bool]]) -> None:
        try:
            while not waiter.woken.done():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._timeout()
                await asyncio.wait((waiter.woken,), timeout=min(remaining, DISCONNECT_POLL_SECONDS))
                if not waiter.woken.done() and await is_disconnected():
                    raise ClientGone()
        except BaseException:  # timed out, client gone, or cancelled: leave the queue
            with self._mutex:
                granted = waiter.granted
                if not granted:
                    self._queue.remove(waiter)
            if granted:  # the turn came as it gave up: pass it on
                self.release()
            raise

    def release(self, work_seconds: float | None = None) -> None:
        """Hand the slot to the first waiting request, or free it; ``work_seconds`` feeds Retry-After."""
        with self._mutex:
            if work_seconds is not None:
                self._work_seconds = 0.8 * self._work_seconds + 0.2 * work_seconds
            if self._queue:
                waiter = self._queue.popleft()
                waiter.granted = True
                waiter.loop.call_soon_threadsafe(_wake, waiter.woken)
            else:
                self._busy = False
