"""The FastAPI app: the static page, ``GET /api/models`` and the POST endpoints each served task declares.

``GET /api/models`` lists each model with its task's endpoints and their fields (``requests.page_fields``),
from which the page builds a form for a task without a pane of its own.

Admission. Model work runs one request at a time (the attention recorder of
``nn.tracing`` is per thread now, but requests sharing a few CPU cores gain nothing from
running at once: each already uses every core torch is given), under
``torch.inference_mode``, in a worker thread. The model endpoints are ``async``: a request
waits for its turn on the event loop, in arrival order, not in Starlette's thread pool,
and only the admitted one takes a thread. So:

- at most ``max_queue`` requests (default :data:`MAX_QUEUE`) wait behind the running one;
  one more is refused at once with 503, a ``Retry-After`` header and ``{"error": ...}``;
- no request waits more than ``lock_timeout`` (:data:`LOCK_TIMEOUT_SECONDS`) counted from
  its arrival (reading its body included): past it, 503 without running. A request that
  was admitted may then run for as long as its work takes (a search cannot be stopped
  half-way), so an answer comes at most ``lock_timeout`` plus one request's work late;
- a request whose client disconnected while it waited is dropped without running (the
  queue is checked every :data:`~transformer_lab.serve.admission.DISCONNECT_POLL_SECONDS`,
  and once more when its turn comes); work already running is finished, its answer
  dropped;
- the page, its static files and ``GET /api/models`` never wait for model work: they need
  no admission, ``GET /api/models`` and ``/`` are ``async``, and the thread pool that the
  static files read through is never filled by waiting requests (one thread at most does
  model work).

Size limits, checked before any model work: a body over ``max_body_bytes``
(:data:`~transformer_lab.serve.intake.MAX_BODY_BYTES`) gets 413 before it is read whole (a
``Content-Length`` over the limit at once, a chunked body as soon as its bytes pass it);
every text field (a ``Text`` field, or a ``Text`` in a list field; not a choice, not the model name) may
hold at most ``max_text_characters`` (:data:`MAX_TEXT_CHARACTERS`) and all of a request's
texts together at most ``max_lines`` lines
(:data:`~transformer_lab.serve.intake.MAX_LINES`), else 422 naming the field.

Every error is a JSON object ``{"error": message}``: 422 for a malformed request (or a body JSON cannot read, or
one that gives a key twice in an object), 413 for a body too large, 408 for a body not whole within
``lock_timeout`` of its arrival, 404 for an unknown model, 400 for a request
the model cannot take (e.g. a text longer than its positional table), 503 when busy (with ``Retry-After``). A 422
names the first :data:`~transformer_lab.serve.intake.MAX_ERRORS_SHOWN` problems, each once, and counts the rest;
a body of more unknown keys than that is refused before validation, which spends a second on 100,000 of them.

FastAPI reads the endpoints' annotations to validate requests, so this module does not use
``from __future__ import annotations`` (the request types are built per endpoint).
"""

import logging
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import torch
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from transformer_lab.serve import masks_view
from transformer_lab.serve.admission import Admission, Busy, ClientGone
from transformer_lab.serve.intake import (
    ARRIVED_SCOPE_KEY,
    MAX_BODY_BYTES,
    MAX_ERRORS_SHOWN,
    MAX_LINES,
    RequestError,
    RequestIntake,
    StrictJsonRoute,
    check_text_limits,
    json_error,
    listed_problems,
    unreadable_body_message,
)
from transformer_lab.serve.registry import ServedModel
from transformer_lab.serve.requests import MAX_TEXT_CHARACTERS, page_fields, request_model
from transformer_lab.serve.validation_messages import request_schema, validation_message
from transformer_lab.tasks.registry import checkpoint_tasks
from transformer_lab.tasks.task import Endpoint

logger = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).parent / "static"
# The longest a request waits, from its arrival, for its turn at the model.
LOCK_TIMEOUT_SECONDS = 30.0
# Requests that may wait behind the running one: a page used by a few people sends one
# request per click, and on 2 cores a beam search takes ~0.1-1 s, so 16 waiting requests
# are served well within LOCK_TIMEOUT_SECONDS; more would only wait to be refused.
MAX_QUEUE = 16
# nginx's "client closed request": nobody reads it, but the access log says why.
CLIENT_GONE_STATUS = 499


def _find_model(served: Mapping[str, ServedModel], name: str, task: str | None) -> ServedModel:
    if name not in served:
        raise RequestError(404, f"model: expected one of {sorted(served)}, got {name!r}")
    model = served[name]
    if task is not None and model.task != task:
        raise RequestError(400, f"model: {name!r} is a {model.task} model; this endpoint needs a {task} model")
    return model


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
    admission state is ``app.state.admission`` (a :class:`~transformer_lab.serve.admission.Admission`).
    """
    limits = {"max_body_bytes": max_body_bytes, "max_text_characters": max_text_characters, "max_lines": max_lines}
    for name, value in limits.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")
    admission = Admission(max_queue, lock_timeout)
    app = FastAPI(title="transformer-lab", docs_url=None, redoc_url=None)
    app.router.route_class = StrictJsonRoute  # before any route is added
    app.state.admission = admission
    app.add_middleware(RequestIntake, max_body_bytes=max_body_bytes, body_seconds=admission.wait_limit)

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

    @app.exception_handler(Busy)
    async def busyjson_error(_: Request, error: Busy) -> JSONResponse:
        return json_error(503, error.message, headers={"Retry-After": str(error.retry_after_seconds)})

    @app.exception_handler(ClientGone)
    async def client_gone(request: Request, _: ClientGone) -> JSONResponse:
        logger.info("%s %s: the client disconnected while it waited; not run", request.method, request.url.path)
        return json_error(CLIENT_GONE_STATUS, "the client disconnected before its turn; the request was not run")

    @app.exception_handler(RequestValidationError)
    async def validationjson_error(request: Request, error: RequestValidationError) -> JSONResponse:
        errors = error.errors()
        if any(isinstance(item.get("input"), bytes) for item in errors):
            # FastAPI reads a body as JSON only under a JSON content type; any other leaves it bytes.
            given = request.headers.get("content-type")
            return json_error(415, f"Content-Type: expected application/json, got {repr(given) if given else 'none'}")
        body_model = getattr(request.scope.get("route"), "body_model", None)
        schema = None if body_model is None else request_schema(body_model)
        messages = [validation_message(item, schema) for item in errors[:MAX_ERRORS_SHOWN]]
        return json_error(422, listed_problems(messages, len(errors)) or "invalid request")

    @app.exception_handler(HTTPException)
    async def httpjson_error(_: Request, error: HTTPException) -> JSONResponse:
        # FastAPI's 400 for a body json.loads could not read (not a syntax error): a 422 like malformed JSON.
        unreadable = unreadable_body_message(error.__cause__) if error.status_code == 400 else None
        if unreadable is not None:
            return json_error(422, unreadable)
        return json_error(error.status_code, str(error.detail), error.headers)

    # HEAD as well: `curl -I` and uptime checks ask the page that way (StaticFiles answers it too).
    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.api_route("/api/models", methods=["GET", "HEAD"])  # HEAD: an uptime check's
    async def models() -> dict[str, Any]:
        return {"models": [{**model.describe(), "endpoints": endpoints[model.task]} for model in served.values()]}

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

    def add_endpoint(task: str, endpoint: Endpoint) -> dict[str, Any]:
        """POST ``endpoint.path``: validate, check the texts, find the model, call the method; returns its form."""
        request_type = request_model(endpoint.request)

        async def answer(body: request_type, request: Request) -> JSONResponse:  # type: ignore[valid-type]
            check_text_limits(body, max_text_characters, max_lines)
            # Every task's request type has a `model` field; mypy cannot read the dynamic annotation.
            model = _find_model(served, body.model, task)  # type: ignore[attr-defined]
            return await run_admitted(request, lambda: {"model": model.name, **endpoint.method(model.handler, body)})

        answer.__name__ = f"{task}_{endpoint.path.strip('/').replace('/', '_')}"
        app.post(endpoint.path)(answer)
        return {"path": endpoint.path, "fields": page_fields(request_type, max_text_characters)}

    # Task -> its endpoints as the page builds their forms, derived once from the request types.
    endpoints: dict[str, list[dict[str, Any]]] = {}
    for task, declared in checkpoint_tasks("serve").items():
        assert declared.serving is not None  # a Task offering "serve" has one
        endpoints[task] = [add_endpoint(task, endpoint) for endpoint in declared.serving.endpoints]
    return app
