"""pydantic's errors said as "NAME: expected X, got Y", for the kinds of bound no served request declares yet.

The served requests' own errors are checked through the app in ``test_app.py``; here the errors come from
pydantic validating models built as the app builds them (``requests.request_model``).
"""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field, ValidationError

from transformer_lab.serve.requests import request_model
from transformer_lab.serve.validation_messages import request_schema, validation_message


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


@dataclasses.dataclass(frozen=True)
class BoundedRequest:
    temperature: float = dataclasses.field(default=1.0, metadata={"gt": 0, "le": 2})
    top_p: float = dataclasses.field(default=0.5, metadata={"gt": 0, "lt": 1})
    margin: float = dataclasses.field(default=1.0, metadata={"gt": 0})
    ceiling: int = dataclasses.field(default=1, metadata={"lt": 10})
    # Bounds written in the type, not in the field's metadata.
    level: Annotated[int, Field(ge=1, le=3)] = 2
    label: Annotated[str, Field(max_length=5)] = "x"
    weights: list[Annotated[int, Field(ge=0)]] = dataclasses.field(default=())  # type: ignore[assignment]


class ColourRequest(BaseModel):
    colour: Colour = Colour.RED


def messages(model: type[BaseModel], body: dict[str, Any], as_json: bool = False) -> list[str]:
    """The messages of validating ``body`` as a Python dict (as FastAPI does), or as JSON text."""
    with pytest.raises(ValidationError) as caught:
        model.model_validate_json(json.dumps(body)) if as_json else model.model_validate(body)
    return [validation_message(error, request_schema(model)) for error in caught.value.errors()]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"temperature": 0}, "temperature: expected a number in (0, 2], got 0"),
        ({"temperature": 2.5}, "temperature: expected a number in (0, 2], got 2.5"),
        ({"top_p": 1}, "top_p: expected a number in (0, 1), got 1"),
        ({"margin": -1.5}, "margin: expected a number greater than 0, got -1.5"),
        ({"ceiling": 10}, "ceiling: expected an integer less than 10, got 10"),
        ({"level": 0}, "level: expected an integer in [1, 3], got 0"),
        ({"label": "abcdefgh"}, "label: expected at most 5 characters, got 8"),
        ({"label": " "}, "label: expected some text, got only whitespace"),  # still a Text
        # A list's items: their schema is found through the list.
        ({"weights": [1, -3]}, "weights.1: expected an integer at least 0, got -3"),
    ],
)
def test_each_kind_of_bound_is_said_with_the_fields_other_bound_and_the_value_given(
    fields: dict[str, Any], message: str
) -> None:
    assert messages(request_model(BoundedRequest), {"model": "m", **fields}) == [message]


def test_without_the_schema_the_errors_own_bound_is_said() -> None:
    # pydantic holds a float field's bounds as floats.
    with pytest.raises(ValidationError) as caught:
        request_model(BoundedRequest).model_validate({"model": "m", "temperature": 3, "top_p": 0})
    said = [validation_message(error) for error in caught.value.errors()]
    assert said == [
        "temperature: expected a number at most 2.0, got 3",
        "top_p: expected a number greater than 0.0, got 0",
    ]


def test_an_enum_names_its_values_and_the_value_given() -> None:
    assert messages(ColourRequest, {"colour": "Red"}, as_json=True) == ["colour: expected 'red' or 'green', got 'Red'"]


def test_an_error_of_a_kind_not_known_keeps_pydantics_words_after_the_field() -> None:
    error = {"type": "url_parsing", "loc": ("body", "link"), "msg": "Input should be a valid URL", "input": "x"}
    assert validation_message(error) == "link: Input should be a valid URL"
