"""The FastAPI app: the static page, ``GET /api/models`` and one POST endpoint per pane.

Model work is serialised by one lock (the attention recorder of ``nn.tracing`` is
process-wide, and two models sharing 2 CPU cores gain nothing from running at once), runs
under ``torch.inference_mode``, and waits for the lock at most ``LOCK_TIMEOUT_SECONDS``,
so a request is answered or refused, never left hanging. Every error is a JSON object
``{"error": message}``: 422 for a malformed request, 404 for an unknown model, 400 for a
request the model cannot take (e.g. a text longer than its positional table), 503 when busy.

FastAPI reads the endpoints' annotations to validate requests, so this module does not use
``from __future__ import annotations`` (the request types are built per endpoint).
"""

import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import torch
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from transformer_lab.serve import masks_view
from transformer_lab.serve.registry import HANDLER_MODULES, ServedModel

logger = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).parent / "static"
LOCK_TIMEOUT_SECONDS = 30.0


class RequestError(Exception):
    """A request that is well-formed JSON but cannot be served; becomes ``{"error": message}``."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message


def _error(status_code: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status_code)


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


def create_app(served: Mapping[str, ServedModel], lock_timeout: float = LOCK_TIMEOUT_SECONDS) -> FastAPI:
    """The app serving ``served`` (name -> loaded model): page, static files and JSON API.

    ``lock_timeout``: the longest a request waits for the model before a 503.
    """
    app = FastAPI(title="transformer-lab", docs_url=None, redoc_url=None)
    lock = threading.Lock()

    def run_locked(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        if not lock.acquire(timeout=lock_timeout):
            raise RequestError(503, f"the server is busy: the model was not free within {lock_timeout:g} s, try again")
        started = time.perf_counter()
        try:
            with torch.inference_mode():
                result = work()
        except (ValueError, FileNotFoundError) as error:
            raise RequestError(400, str(error)) from None
        finally:
            lock.release()
        return {**result, "elapsed_ms": round(1000 * (time.perf_counter() - started), 1)}

    @app.exception_handler(RequestError)
    async def request_error(_: Request, error: RequestError) -> JSONResponse:
        return _error(error.status_code, error.message)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, error: RequestValidationError) -> JSONResponse:
        messages = [_validation_message(item) for item in error.errors()]
        return _error(422, "; ".join(messages) or "invalid request", details=messages)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, error: HTTPException) -> JSONResponse:
        return _error(error.status_code, str(error.detail))

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/api/models")
    def models() -> dict[str, Any]:
        return {"models": [model.describe() for model in served.values()]}

    @app.post("/api/masks")
    def masks(request: masks_view.MasksRequest) -> dict[str, Any]:
        tokenize = None
        if request.model is not None:
            model = _find_model(served, request.model, None)
            tokenize = getattr(model.handler, "tokenize", None)
            if tokenize is None:
                raise RequestError(400, f"model: {request.model!r} has no tokenizer for the masks view")
        return run_locked(lambda: masks_view.masks_for(request, tokenize))

    for task, module in HANDLER_MODULES.items():
        for path, request_type, method in module.ENDPOINTS:
            _add_task_endpoint(app, served, run_locked, task, path, request_type, method)
    return app


def _add_task_endpoint(
    app: FastAPI,
    served: Mapping[str, ServedModel],
    run_locked: Callable[[Callable[[], dict[str, Any]]], dict[str, Any]],
    task: str,
    path: str,
    request_type: type[BaseModel],
    method: Callable[[Any, Any], dict[str, Any]],
) -> None:
    """POST ``path``: validate the body as ``request_type``, find the model, call ``method``."""

    def endpoint(request: request_type) -> dict[str, Any]:  # type: ignore[valid-type]
        model = _find_model(served, request.model, task)
        return run_locked(lambda: {"model": model.name, **method(model.handler, request)})

    endpoint.__name__ = f"{task}_{path.strip('/').replace('/', '_')}"
    app.post(path)(endpoint)
