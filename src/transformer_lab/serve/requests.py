"""The JSON requests of every pane: a model name, its texts, a task's request as a pydantic model and as a form."""

from __future__ import annotations

import dataclasses
import typing
from typing import Annotated, Any, Mapping

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, create_model, field_validator
from pydantic.fields import FieldInfo

from transformer_lab.serve.registry import MAX_MODEL_NAME_CHARACTERS
from transformer_lab.tasks.task import ONLY_WHEN

# Long enough for a paragraph, short enough that no request can keep the model busy for long.
MAX_TEXT_CHARACTERS = 1000


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("expected some text, got only whitespace")
    return text


class _FreeText:
    """Marks `Text` in a field's type, so that the text limits find the texts and skip choices and names."""

    def __repr__(self) -> str:
        return "FreeText"


FREE_TEXT = _FreeText()
ModelName = Annotated[
    str, Field(min_length=1, max_length=MAX_MODEL_NAME_CHARACTERS, description="a name from GET /api/models")
]
Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARACTERS), AfterValidator(_not_blank), FREE_TEXT]
# Strict, as a config file is read: a JSON true, "3" or 2.0 is no integer, "2" no number (an integer is a number).
REQUEST_CONFIG = ConfigDict(extra="forbid", strict=True)


def _holds_text(annotation: Any) -> bool:
    if typing.get_origin(annotation) is Annotated:
        base, *metadata = typing.get_args(annotation)
        return any(item is FREE_TEXT for item in metadata) or _holds_text(base)
    return any(_holds_text(argument) for argument in typing.get_args(annotation))


def is_text_field(field: FieldInfo) -> bool:
    """Whether a request field holds free text: a `Text`, or a list or optional of them (not a choice, not a name)."""
    return any(item is FREE_TEXT for item in field.metadata) or _holds_text(field.annotation)


def _as_text(annotation: Any) -> Any:
    """A request field's type, with ``str`` made a `Text` (an ``Annotated`` str keeps its own bounds too)."""
    if annotation is str:
        return Text
    if typing.get_origin(annotation) is Annotated and typing.get_args(annotation)[0] is str:
        return Annotated[(Text, *typing.get_args(annotation)[1:])]
    return annotation


def _only_when(name: str, condition: Mapping[str, Any]) -> Any:
    """A validator refusing field ``name`` where an earlier field differs from ``condition`` (run only if given)."""

    def check(value: Any, info: ValidationInfo) -> Any:
        for other, wanted in condition.items():
            # An earlier field that failed its own check is missing here; its error is said already.
            if other in info.data and info.data[other] != wanted:
                raise ValueError(
                    f"expected only with {other} {wanted!r}, got {other} {info.data[other]!r} (leave {name} out)"
                )
        return value

    return field_validator(name)(check)


def request_model(request: type) -> type[BaseModel]:
    """The pydantic model of a task's request dataclass (``tasks.task.Endpoint.request``), as the app validates it.

    Every request names its ``model``; a ``str`` field is a `Text`; a field's metadata are
    its ``Field`` bounds and, under `ONLY_WHEN`, the values of earlier fields it may be given with;
    a field the request does not declare is refused, and so is a value of another JSON type
    (`REQUEST_CONFIG`).
    """
    # With the extras: a bound written in the type, as list[Annotated[int, Field(ge=0)]], was dropped.
    hints = typing.get_type_hints(request, include_extras=True)
    fields: dict[str, Any] = {"model": (ModelName, ...)}
    validators: dict[str, Any] = {}
    for field in dataclasses.fields(request):
        default = ... if field.default is dataclasses.MISSING else field.default
        bounds = {key: value for key, value in field.metadata.items() if key != ONLY_WHEN}
        fields[field.name] = (_as_text(hints[field.name]), Field(default, **bounds))
        if ONLY_WHEN in field.metadata:
            validators[f"{field.name}_{ONLY_WHEN}"] = _only_when(field.name, field.metadata[ONLY_WHEN])
    model: type[BaseModel] = create_model(
        request.__name__, __config__=REQUEST_CONFIG, __validators__=validators, **fields
    )
    return model


# JSON schema type -> the page's input; anything else (a list, an optional value) the page takes as JSON.
_PAGE_TYPES = {"string": "text", "integer": "integer", "number": "number", "boolean": "boolean"}
# JSON schema key -> its name on the page; bounds are inclusive, a list's item counts are its lengths.
_PAGE_KEYS = dict(default="default", description="description", enum="choices", minimum="minimum", maximum="maximum")
_PAGE_KEYS.update(minLength="min_length", maxLength="max_length", minItems="min_length", maxItems="max_length")


def page_fields(request: type[BaseModel], max_text_characters: int) -> list[dict[str, Any]]:
    """The fields of a `request_model` but ``model``, as the page builds its form (``GET /api/models``).

    Each is ``{name, type, required}`` and, where declared, ``default``, ``description``, ``choices``
    and the bounds ``minimum``, ``maximum``, ``min_length``, ``max_length``: read from the model's JSON
    schema, they are those the server enforces (a text's at most ``max_text_characters``, the app's cap).
    """
    schema = request.model_json_schema()
    fields = []
    for name, entry in schema["properties"].items():
        if name == "model":  # the page sends the chosen model
            continue
        kind = "choice" if "enum" in entry else _PAGE_TYPES.get(entry.get("type", ""), "json")
        field: dict[str, Any] = {"name": name, "type": kind, "required": name in schema.get("required", ())}
        field.update({_PAGE_KEYS[key]: value for key, value in entry.items() if key in _PAGE_KEYS})
        if kind == "text":
            field["max_length"] = min(field.get("max_length", max_text_characters), max_text_characters)
        fields.append(field)
    return fields
