"""The JSON requests of every pane: a model name, the texts to work on, and a task's request as a pydantic model."""

from __future__ import annotations

import dataclasses
import typing
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model

# Long enough for a paragraph, short enough that no request can keep the model busy for long.
MAX_TEXT_CHARACTERS = 1000


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("expected some text, got only whitespace")
    return text


ModelName = Annotated[str, Field(min_length=1, max_length=200, description="a name from GET /api/models")]
Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARACTERS), AfterValidator(_not_blank)]


def request_model(request: type) -> type[BaseModel]:
    """The pydantic model of a task's request dataclass (``tasks.task.Endpoint.request``), as the app validates it.

    Every request names its ``model``; a ``str`` field is a `Text`; a field's metadata are
    its ``Field`` bounds; a field the request does not declare is refused.
    """
    hints = typing.get_type_hints(request)
    fields: dict[str, Any] = {"model": (ModelName, ...)}
    for field in dataclasses.fields(request):
        default = ... if field.default is dataclasses.MISSING else field.default
        fields[field.name] = (Text if hints[field.name] is str else hints[field.name], Field(default, **field.metadata))
    model: type[BaseModel] = create_model(request.__name__, __config__=ConfigDict(extra="forbid"), **fields)
    return model
