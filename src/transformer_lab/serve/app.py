"""The FastAPI app: the static page, ``GET /api/models`` and one POST endpoint per pane.

Admission (issue #21). Model work runs one request at a time (the attention recorder of
``nn.tracing`` is per thread now, but requests sharing a few CPU cores gain nothing from
running at once: each already uses every core torch is given), under ``torch.inference_mode``, in a worker thread. The model endpoints
are ``async``: a request waits for its turn on the event loop, in arrival order, not in
Starlette's thread pool, and only the admitted one takes a thread. So:

- at most ``max_queue`` requests (default :data:`MAX_QUEUE`) wait behind the running one;
  one more is refused at once with 503, a ``Retry-After`` header and ``{"error": ...}``;
- no request waits more than ``lock_timeout`` (:data:`LOCK_TIMEOUT_SECONDS`) counted from
  its arrival (reading its body included): past it, 503 without running. A request that
  was admitted may then run for as long as its work takes (a search cannot be stopped
  half-way), so an answer comes at most ``lock_timeout`` plus one request's work late;
- a request whose client disconnected while it waited is dropped without running (the
  queue is checked every :data:`DISCONNECT_POLL_SECONDS`, and once more when its turn
  comes); work already running is finished, its answer dropped;
- the page, its static files and ``GET /api/models`` never wait for model work: they need
  no admission, ``GET /api/models`` and ``/`` are ``async``, and the thread pool that the
  static files read through is never filled by waiting requests (one thread at most does
  model work).

Size limits, checked before any model work: a body over ``max_body_bytes``
(:data:`MAX_BODY_BYTES`) gets 413 before it is read whole (a ``Content-Length`` over the
limit at once, a chunked body as soon as its bytes pass it); every text field (a ``str``
field, or a string in a list field, except the model name) may hold at most
``max_text_characters`` (:data:`MAX_TEXT_CHARACTERS`) and all of a request's texts
together at most ``max_lines`` lines (:data:`MAX_LINES`), else 422 naming the field.

Every error is a JSON object ``{"error": message}``: 422 for a malformed request, 413 for
a body too large, 404 for an unknown model, 400 for a request the model cannot take (e.g.
a text longer than its positional table), 503 when busy (with ``Retry-After``).

FastAPI reads the endpoints' annotations to validate requests, so this module does not use
``from __future__ import annotations`` (the request types are built per endpoint).
"""

import asyncio
import logging
import math
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator, Mapping

import torch
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from transformer_lab.serve import masks_view
from transformer_lab.serve.registry import HANDLER_MODULES, ServedModel
from transformer_lab.serve.requests import MAX_TEXT_CHARACTERS

logger = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).parent / "static"
# The longest a request waits, from its arrival, for its turn at the model.
LOCK_TIMEOUT_SECONDS = 30.0
# Requests that may wait behind the running one: a page used by a few people sends one
# request per click, and on 2 cores a beam search takes ~0.1-1 s, so 16 waiting requests
# are served well within LOCK_TIMEOUT_SECONDS; more would only wait to be refused.
MAX_QUEUE = 16
# The largest request body read: the biggest valid request (4 masks sentences of 1000
# characters, 1024 target ids) is ~20 KB of JSON; 1 MiB leaves room and bounds memory.
MAX_BODY_BYTES = 1024 * 1024
# All the texts of one request together (a text's lines are what splitlines() gives).
MAX_LINES = 256
# How often a waiting request checks whether its client is still there.
DISCONNECT_POLL_SECONDS = 0.25
# Where the intake middleware notes a request's arrival (time.monotonic()) in the ASGI scope.
ARRIVED_SCOPE_KEY = "transformer_lab.arrived"
# nginx's "client closed request": nobody reads it, but the access log says why.
CLIENT_GONE_STATUS = 499


class RequestError(Exception):
    """A request that is well-formed JSON but cannot be served; becomes ``{"error": message}``."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message


class Busy(Exception):
    """The request is refused without running (queue full, or waited too long): a 503."""

    def __init__(self, message: str, retry_after_seconds: int) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_seconds = retry_after_seconds


class ClientGone(Exception):
    """The client disconnected before the request's turn came; it is not run."""


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when a streamed body passes the limit.

    An ``HTTPException`` because FastAPI re-raises those from body reading (any other
    exception there becomes a 400 "error parsing the body"); the app's handler makes it a 413.
    """

    def __init__(self, limit: int, received: int) -> None:
        super().__init__(413, f"body: expected at most {limit} bytes, got at least {received} (the rest was not read)")


def _error(status_code: int, message: str, headers: Mapping[str, str] | None = None, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status_code, headers=headers)


def _validation_message(error: Mapping[str, Any]) -> str:
    if error.get("type") == "json_invalid":
        return f"body: expected a JSON object, got malformed JSON ({error.get('ctx', {}).get('error', 'unreadable')})"
    # The location starts with "body"; the rest names the field (e.g. "text", "sentences.0").
    location = ".".join(str(part) for part in error.get("loc", ()) if part != "body") or "body"
    return f"{location}: {str(error.get('msg', 'invalid')).removeprefix('Value error, ')}"


def _find_model(served: Mapping[str, ServedModel], name: str, task: str | None) -> ServedModel:
    if name not in served:
        raise RequestError(404, f"model: expected one of {sorted(served)}, got {name!r}")
    model = served[name]
    if task is not None and model.task != task:
        raise RequestError(400, f"model: {name!r} is a {model.task} model; this endpoint needs a {task} model")
    return model


def _texts(body: BaseModel) -> Iterator[tuple[str, str]]:
    """(location, text) for every str field and every str in a list field, but the model name.

    The model name is a key into ``GET /api/models`` (its own type caps it), not text to work on.
    Locations are spelled as in validation errors: ``text``, ``sentences.0``.
    """
    for name, value in body:
        if name == "model":
            continue
        if isinstance(value, str):
            yield name, value
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                if isinstance(item, str):
                    yield f"{name}.{index}", item


def check_text_limits(body: BaseModel, max_characters: int, max_lines: int) -> None:
    """422 naming the field if a text is over ``max_characters`` or the texts over ``max_lines`` lines.

    Applied to every parsed request, so a new pane's request model gets the same caps
    without repeating them (the shared ``Text`` type caps characters too; this also bounds lines).
    """
    lines_by_field: dict[str, int] = {}
    for location, text in _texts(body):
        if len(text) > max_characters:
            raise RequestError(422, f"{location}: expected at most {max_characters} characters, got {len(text)}")
        field = location.split(".")[0]
        lines_by_field[field] = lines_by_field.get(field, 0) + max(1, len(text.splitlines()))
    total = sum(lines_by_field.values())
    if total > max_lines:
        fields = ", ".join(sorted(lines_by_field))
        raise RequestError(422, f"{fields}: expected at most {max_lines} lines in one request, got {total}")


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
        if not wait_limit > 0:
            raise ValueError(f"lock_timeout: expected a number of seconds > 0, got {wait_limit!r}")
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


class RequestIntake:
    """Pure ASGI middleware: notes each request's arrival and refuses a body over ``max_body_bytes``.

    Pure ASGI (not ``BaseHTTPMiddleware``) so that it can wrap ``receive``: a declared
    ``Content-Length`` over the limit gets 413 before a byte of the body is read, and a
    chunked body is counted as it streams, so at most the limit plus one chunk is ever held.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope[ARRIVED_SCOPE_KEY] = time.monotonic()
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                length = -1
            if length < 0:
                text = declared.decode("latin-1")
                await _error(400, f"Content-Length: expected a byte count, got {text!r}")(scope, receive, send)
                return
            if length > self.max_body_bytes:
                message = f"body: expected at most {self.max_body_bytes} bytes, got a Content-Length of {length}"
                await _error(413, message)(scope, receive, send)
                return
        received = 0
        response_started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise BodyTooLarge(self.max_body_bytes, received)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal response_started
            response_started = response_started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except BodyTooLarge as error:  # a route that let it through: answer here if still possible
            if response_started:
                raise
            await _error(413, str(error.detail))(scope, receive, send)


def _run_work(work: Callable[[], dict[str, Any]]) -> tuple[JSONResponse, float]:
    """In a worker thread: the work, then its JSON (a big attention payload is encoded off the event loop)."""
    started = time.perf_counter()
    try:
        with torch.inference_mode():
            result = work()
    except (ValueError, FileNotFoundError) as error:
        raise RequestError(400, str(error)) from None
    elapsed = time.perf_counter() - started
    return JSONResponse({**result, "elapsed_ms": round(1000 * elapsed, 1)}), elapsed


def create_app(
    served: Mapping[str, ServedModel],
    lock_timeout: float = LOCK_TIMEOUT_SECONDS,
    *,
    max_queue: int = MAX_QUEUE,
    max_body_bytes: int = MAX_BODY_BYTES,
    max_text_characters: int = MAX_TEXT_CHARACTERS,
    max_lines: int = MAX_LINES,
) -> FastAPI:
    """The app serving ``served`` (name -> loaded model): page, static files and JSON API.

    ``lock_timeout``: the longest a request waits, from its arrival, for the model before a
    503; ``max_queue``: how many may wait behind the running one; ``max_body_bytes``,
    ``max_text_characters``, ``max_lines``: the size limits (module docstring). The
    admission state is ``app.state.admission`` (an :class:`Admission`).
    """
    for name, value in (("max_body_bytes", max_body_bytes), ("max_text_characters", max_text_characters), ("max_lines", max_lines)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")
    admission = Admission(max_queue, lock_timeout)
    app = FastAPI(title="transformer-lab", docs_url=None, redoc_url=None)
    app.state.admission = admission
    app.add_middleware(RequestIntake, max_body_bytes=max_body_bytes)

    async def run_admitted(request: Request, work: Callable[[], dict[str, Any]]) -> JSONResponse:
        arrived = request.scope.get(ARRIVED_SCOPE_KEY, time.monotonic())
        await admission.acquire(arrived, request.is_disconnected)
        work_seconds = None
        try:
            # If this task is cancelled, anyio still waits for the thread, so the slot is
            # released only once the model is really free.
            response, work_seconds = await run_in_threadpool(_run_work, work)
            return response
        finally:
            admission.release(work_seconds)

    @app.exception_handler(RequestError)
    async def request_error(_: Request, error: RequestError) -> JSONResponse:
        return _error(error.status_code, error.message)

    @app.exception_handler(Busy)
    async def busy_error(_: Request, error: Busy) -> JSONResponse:
        return _error(503, error.message, headers={"Retry-After": str(error.retry_after_seconds)})

    @app.exception_handler(ClientGone)
    async def client_gone(request: Request, _: ClientGone) -> JSONResponse:
        logger.info("%s %s: the client disconnected while it waited; not run", request.method, request.url.path)
        return _error(CLIENT_GONE_STATUS, "the client disconnected before its turn; the request was not run")

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, error: RequestValidationError) -> JSONResponse:
        messages = [_validation_message(item) for item in error.errors()]
        return _error(422, "; ".join(messages) or "invalid request", details=messages)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, error: HTTPException) -> JSONResponse:
        return _error(error.status_code, str(error.detail))

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/api/models")
    async def models() -> dict[str, Any]:
        return {"models": [model.describe() for model in served.values()]}

    @app.post("/api/masks")
    async def masks(body: masks_view.MasksRequest, request: Request) -> JSONResponse:
        check_text_limits(body, max_text_characters, max_lines)
        tokenize = None
        if body.model is not None:
            model = _find_model(served, body.model, None)
            tokenize = getattr(model.handler, "tokenize", None)
            if tokenize is None:
                raise RequestError(400, f"model: {body.model!r} has no tokenizer for the masks view")
        return await run_admitted(request, lambda: masks_view.masks_for(body, tokenize))

    def check(body: BaseModel) -> None:
        check_text_limits(body, max_text_characters, max_lines)

    for task, module in HANDLER_MODULES.items():
        for path, request_type, method in module.ENDPOINTS:
            _add_task_endpoint(app, served, run_admitted, check, task, path, request_type, method)
    return app


def _add_task_endpoint(
    app: FastAPI,
    served: Mapping[str, ServedModel],
    run_admitted: Callable[[Request, Callable[[], dict[str, Any]]], Awaitable[JSONResponse]],
    check: Callable[[BaseModel], None],
    task: str,
    path: str,
    request_type: type[BaseModel],
    method: Callable[[Any, Any], dict[str, Any]],
) -> None:
    """POST ``path``: validate the body as ``request_type``, check its texts, find the model, call ``method``."""

    async def endpoint(body: request_type, request: Request) -> JSONResponse:  # type: ignore[valid-type]
        check(body)
        model = _find_model(served, body.model, task)
        return await run_admitted(request, lambda: {"model": model.name, **method(model.handler, body)})

    endpoint.__name__ = f"{task}_{path.strip('/').replace('/', '_')}"
    app.post(path)(endpoint)
