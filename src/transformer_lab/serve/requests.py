"""Field types shared by the JSON requests of every pane: a model name and a text to work on."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

# Long enough for a paragraph, short enough that no request can keep the model busy for long.
MAX_TEXT_CHARACTERS = 1000


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("expected some text, got only whitespace")
    return text


ModelName = Annotated[str, Field(min_length=1, max_length=200, description="a name from GET /api/models")]
Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARACTERS), AfterValidator(_not_blank)]
