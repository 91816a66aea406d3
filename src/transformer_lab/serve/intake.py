"""What a request must be before the app reads it: a body within the size limit, texts within their caps.

:class:`RequestIntake` is pure ASGI middleware that notes each request's arrival (the
admission's deadline counts from it) and refuses a body over ``max_body_bytes`` with 413
before it is read whole; :func:`check_text_limits` caps the characters of every text field
and the lines of a request (its text fields only); :class:`StrictJsonRoute` reads a body by
:func:`transformer_lab.strict_json.loads`, so an object giving a key twice is refused, not
read as its last value. Every refusal is a JSON ``{"error": message}``.
"""

import inspect
import re
import sys
import time
from typing import Any, Callable, Coroutine, Iterator, Mapping

import anyio
from fastapi import Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from transformer_lab import strict_json
from transformer_lab.data._checks import lone_surrogate
from transformer_lab.serve.requests import is_text_field
from transformer_lab.shortened import shortened

# The largest request body read: the biggest valid request (4 masks sentences of 1000
# characters, 1024 target ids) is ~20 KB of JSON; 1 MiB leaves room and bounds memory.
MAX_BODY_BYTES = 1024 * 1024
# All the texts of one request together (a text's lines are what splitlines() gives).
MAX_LINES = 256
# Where the intake middleware notes a request's arrival (time.monotonic()) in the ASGI scope.
ARRIVED_SCOPE_KEY = "transformer_lab.arrived"
# The problems a 422 names; the rest are counted. A body of 100,000 unknown keys was answered
# with all 100,000 messages, twice (7.9 MB), after a second of work on the event loop.
MAX_ERRORS_SHOWN = 20
# The longest field location (a key the client chose, for an unknown one) quoted in a message.
MAX_LOCATION_CHARACTERS = 80
# pydantic's message for a key the request does not declare, which the early check repeats.
UNKNOWN_KEY_MESSAGE = "Extra inputs are not permitted"


class RequestError(HTTPException):
    """A well-formed request that cannot be served: ``RequestError(status_code, message)``, answered as JSON."""


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when a streamed body passes the limit.

    An ``HTTPException`` because FastAPI re-raises those from body reading (any other
    exception there becomes a 400 "error parsing the body"); the app's handler makes it a 413.
    """

    def __init__(self, limit: int, received: int) -> None:
        super().__init__(413, f"body: expected at most {limit} bytes, got at least {received} (the rest was not read)")


class BodyTimedOut(HTTPException):
    """Raised from ``receive`` when a body has not all arrived by its deadline (a 408), as :class:`BodyTooLarge` is."""

    def __init__(self, seconds: float, received: int, declared: int | None) -> None:
        expected = "its end" if declared is None else f"the {declared} bytes of its Content-Length"
        super().__init__(
            408,
            f"body: expected {expected} within {seconds:g} s of the request's arrival, got {received} bytes "
            "and then nothing",
            # The rest of the body may still come, and would be read as the next request.
            headers={"Connection": "close"},
        )


def json_error(status_code: int, message: str, headers: Mapping[str, str] | None = None, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status_code, headers=headers)


def unreadable_body_message(cause: BaseException | None) -> str | None:
    """What is wrong with a body that JSON could not read for a reason other than its syntax, or None.

    FastAPI answers those (``cause`` is the error of ``json.loads``) with a bare 400 "There was an
    error parsing the body"; this says which: bytes that are not UTF-8, a number too long, too deep,
    a key given twice.
    """
    if isinstance(cause, strict_json.DuplicateKeyError):
        return f"body: {cause}"
    if isinstance(cause, UnicodeDecodeError):
        bad = cause.object[cause.start : cause.end]
        # json.loads reads a body starting with zero bytes as UTF-16 or UTF-32; say so, or the reason misleads.
        encoding = "" if cause.encoding.replace("-", "").lower() == "utf8" else f", read as {cause.encoding}"
        return f"body: expected UTF-8 JSON, got {bad!r} at byte offset {cause.start} ({cause.reason}{encoding})"
    if isinstance(cause, RecursionError):
        # The parser's depth is bounded by the interpreter's recursion limit less the stack in use.
        return f"body: expected JSON nested at most about {sys.getrecursionlimit()} levels deep, got deeper"
    if isinstance(cause, ValueError):
        digits = re.search(r"value has (\d+) digits", str(cause))
        if digits is not None:
            limit = sys.get_int_max_str_digits()
            return f"body: expected numbers of at most {limit} digits, got one of {digits.group(1)} digits"
        return f"body: expected a JSON object, got unreadable JSON ({cause})"
    return None


def shown_location(location: str) -> str:
    """A field's location as a message quotes it, cut to :data:`MAX_LOCATION_CHARACTERS` (a key may be long)."""
    return shortened(location, MAX_LOCATION_CHARACTERS)


def listed_problems(messages: list[str], total: int, noun: str = "problems") -> str:
    """The first :data:`MAX_ERRORS_SHOWN` of ``messages``, then how many of the ``total`` were left unsaid."""
    shown = messages[:MAX_ERRORS_SHOWN]
    if total > len(shown):
        shown.append(f"and {total - len(shown):,} more {noun} ({total:,} in all)")
    return "; ".join(shown)


def _lone_surrogate(text: str) -> str | None:
    """ "the lone surrogate U+D800 at character 4 ..." for the first one in ``text``, or None."""
    found = lone_surrogate(text)
    return None if found is None else f"{found} (a \\u escape without its pair)"


def surrogate_message(body: Any) -> str | None:
    """What names the first lone surrogate in ``body`` (a parsed JSON body) and where it is, or None.

    JSON may spell one as an escape (``"\\ud800"``) that ``json.loads`` reads into a str with no UTF-8
    form: no model can read it, and a message quoting it could not be encoded (it was a 500). The walk
    keeps its own stack: a body may be nested as deep as the JSON reader allows.
    """
    pending: list[tuple[str, Any]] = [("body", body)]
    while pending:
        location, value = pending.pop()
        if isinstance(value, str):
            found = _lone_surrogate(value)
            if found is not None:
                return f"{shown_location(location)}: expected valid Unicode text, got {found}"
            continue
        if isinstance(value, dict):
            for key in value:
                found = _lone_surrogate(key)
                if found is not None:
                    return f"{shown_location(location)}: expected keys of valid Unicode text, got a key with {found}"
            items: list[tuple[Any, Any]] = list(value.items())
        elif isinstance(value, list):
            items = list(enumerate(value))
        else:
            continue
        # Reversed onto the stack, so the first problem in the body's order is the one named.
        for key, item in reversed(items):
            pending.append((str(key) if location == "body" else f"{location}.{key}", item))
    return None


class StrictJsonRequest(Request):
    """A request whose JSON body is read by :func:`~transformer_lab.strict_json.loads`: a key given twice is refused.

    With ``declared_keys`` (the request model's fields), an object of more than :data:`MAX_ERRORS_SHOWN` other
    keys is refused here, before validation: pydantic makes one error per unknown key, and
    listing 100,000 of them took a second of the event loop.
    """

    def __init__(self, scope: Scope, receive: Receive, declared_keys: frozenset[str] | None = None) -> None:
        super().__init__(scope, receive)
        self.declared_keys = declared_keys

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            raw = await self.body()
            body = strict_json.loads(raw)
            # Only an escape makes a lone surrogate (raw surrogate bytes are no UTF-8): most bodies skip the walk.
            if b"\\u" in raw:
                message = surrogate_message(body)
                if message is not None:
                    raise RequestError(422, message)
            declared = self.declared_keys
            if declared is not None and isinstance(body, dict) and len(body) > MAX_ERRORS_SHOWN:
                unknown = [key for key in body if key not in declared]
                if len(unknown) > MAX_ERRORS_SHOWN:
                    messages = [f"{shown_location(key)}: {UNKNOWN_KEY_MESSAGE}" for key in unknown[:MAX_ERRORS_SHOWN]]
                    raise RequestError(422, listed_problems(messages, len(unknown), "unknown keys"))
            self._json = body
        return self._json


def _body_model(endpoint: Callable[..., Any]) -> type[BaseModel] | None:
    """The pydantic model that ``endpoint`` takes as its body, or None if it takes none."""
    for parameter in inspect.signature(endpoint).parameters.values():
        annotation = parameter.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return annotation
    return None


class StrictJsonRoute(APIRoute):
    """A route whose endpoint reads the body as :class:`StrictJsonRequest` (``json.loads`` keeps a key's last value).

    FastAPI turns the :class:`~transformer_lab.strict_json.DuplicateKeyError` into its 400 "error
    parsing the body", whose cause :func:`unreadable_body_message` names. ``body_model`` is the
    endpoint's request model, whose bounds a 422 quotes.
    """

    def __init__(self, path: str, endpoint: Callable[..., Any], **options: Any) -> None:
        self.body_model = _body_model(endpoint)
        super().__init__(path, endpoint, **options)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        declared_keys = None if self.body_model is None else frozenset(self.body_model.model_fields)

        async def strict_handler(request: Request) -> Response:
            return await handler(StrictJsonRequest(request.scope, request.receive, declared_keys))

        return strict_handler


def _texts(body: BaseModel) -> Iterator[tuple[str, str]]:
    """(location, text) for every free-text field (`requests.Text`, alone or in a list).

    A choice such as ``strategy`` or the model name is a str too, but no text to work on: counting it
    made a request's line limit one short. Locations are spelled as in validation errors: ``text``,
    ``sentences.0``.
    """
    for name, field in type(body).model_fields.items():
        if not is_text_field(field):
            continue
        value = getattr(body, name)
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


class RequestIntake:
    """Pure ASGI middleware: notes each request's arrival and refuses a body over ``max_body_bytes``.

    A compressed body (any ``Content-Encoding`` but identity) gets 415: the app reads JSON as sent.

    Pure ASGI (not ``BaseHTTPMiddleware``) so that it can wrap ``receive``: a declared
    ``Content-Length`` over the limit gets 413 before a byte of the body is read, and a
    chunked body is counted as it streams, so at most the limit plus one chunk is ever held.
    A body not whole within ``body_seconds`` of the request's arrival (a Content-Length larger
    than what is sent, a chunked body never ended) gets 408 then: uvicorn would wait for it forever.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int, body_seconds: float) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_seconds = body_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        arrived = scope[ARRIVED_SCOPE_KEY] = time.monotonic()
        headers = dict(scope["headers"])
        encoding = headers.get(b"content-encoding", b"identity").decode("latin-1").strip()
        if encoding.lower() != "identity":
            # Compressed bytes read as JSON were "expected UTF-8 JSON, got b'\x8b'", which names the symptom.
            message = f"Content-Encoding: expected none (identity), got {encoding!r}; send the JSON uncompressed"
            await json_error(415, message)(scope, receive, send)
            return
        declared = headers.get(b"content-length")
        length: int | None = None
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                length = -1
            if length < 0:
                text = declared.decode("latin-1")
                await json_error(400, f"Content-Length: expected a byte count, got {text!r}")(scope, receive, send)
                return
            if length > self.max_body_bytes:
                message = f"body: expected at most {self.max_body_bytes} bytes, got a Content-Length of {length}"
                await json_error(413, message)(scope, receive, send)
                return
        received = 0
        body_whole = False
        response_started = False

        async def counted_receive() -> Message:
            nonlocal received, body_whole
            if body_whole:  # only a disconnect is left to wait for, as long as it takes
                return await receive()
            with anyio.move_on_after(arrived + self.body_seconds - time.monotonic()) as waited:
                message = await receive()
            if waited.cancelled_caught:
                raise BodyTimedOut(self.body_seconds, received, length)
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                body_whole = not message.get("more_body", False)
                if received > self.max_body_bytes:
                    raise BodyTooLarge(self.max_body_bytes, received)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal response_started
            response_started = response_started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except (BodyTooLarge, BodyTimedOut) as error:  # a route that let it through: answer here if still possible
            if response_started:
                raise
            await json_error(error.status_code, str(error.detail), error.headers)(scope, receive, send)
