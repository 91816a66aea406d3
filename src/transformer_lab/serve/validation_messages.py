"""pydantic's validation errors said as the server's other messages say them: "NAME: expected X, got Y".

pydantic words its errors for Python ("Input should be greater than or equal to 1") and does not
say what was given; :func:`validation_message` names the field, what it expects (both bounds of a
range where the field declares both, read from the request model's JSON schema, which is what
``GET /api/models`` lists) and the value given, as JSON wrote it and cut to a bound.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Mapping, Sequence

from pydantic import BaseModel

from transformer_lab.serve.intake import shown_location
from transformer_lab.shortened import shortened

__all__ = ["request_schema", "validation_message"]

# pydantic's type errors -> the JSON type the field expected, said as the server's other messages say it.
_EXPECTED_TYPES = {
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a JSON object",
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
}
# A JSON schema type -> the same words, for a field that is missing or out of range.
_SCHEMA_TYPES = {
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "string": "a string",
    "array": "a list",
    "object": "a JSON object",
}
# pydantic's bound errors -> (the bound's key in the error's ctx, in the JSON schema, how one bound reads alone).
_ONE_BOUND = {
    "greater_than_equal": ("ge", "minimum", "at least"),
    "greater_than": ("gt", "exclusiveMinimum", "greater than"),
    "less_than_equal": ("le", "maximum", "at most"),
    "less_than": ("lt", "exclusiveMaximum", "less than"),
}
# pydantic's length errors -> whether the bound passed is the lower one.
_LENGTHS = {"string_too_short": True, "string_too_long": False, "too_short": True, "too_long": False}
# The longest given value quoted in a message; a longer one is cut.
_MAX_QUOTED_CHARACTERS = 40


@functools.cache
def request_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a request model, made once per model (a 422 reads its bounds)."""
    return model.model_json_schema()


def _json_value(value: Any) -> str:
    """A value given in a request as its JSON spelling (true, "3", 2.0), or its kind if it is a list or object."""
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return shortened(text, _MAX_QUOTED_CHARACTERS)


def _field_schema(schema: Mapping[str, Any] | None, location: Sequence[Any]) -> Mapping[str, Any] | None:
    """The schema of the value at ``location`` (field names and list indices), or None where it cannot be told.

    Follows ``$ref`` into ``$defs`` and takes the one branch of an optional value that is not null.
    """
    if schema is None:
        return None
    definitions = schema.get("$defs", {})

    def resolved(node: Mapping[str, Any]) -> Mapping[str, Any]:
        reference = node.get("$ref", "")
        if reference.startswith("#/$defs/"):
            node = definitions.get(reference.removeprefix("#/$defs/"), {})
        branches = [branch for branch in node.get("anyOf", ()) if branch.get("type") != "null"]
        return resolved(branches[0]) if len(branches) == 1 else node

    node: Mapping[str, Any] | None = resolved(schema)
    for part in location:
        if node is None:
            return None
        child = node.get("items") if isinstance(part, int) else node.get("properties", {}).get(part)
        node = resolved(child) if isinstance(child, Mapping) else None
    return node


def _range(error_type: str, context: Mapping[str, Any], field: Mapping[str, Any] | None) -> str:
    """What a bounded number should be: "an integer in [1, 8]" with both bounds, else "an integer at least 1"."""
    noun = _SCHEMA_TYPES.get(str((field or {}).get("type")), "a number")
    lower = upper = None
    if field is not None:
        if "minimum" in field or "exclusiveMinimum" in field:
            lower = ("[", field["minimum"]) if "minimum" in field else ("(", field["exclusiveMinimum"])
        if "maximum" in field or "exclusiveMaximum" in field:
            upper = ("]", field["maximum"]) if "maximum" in field else (")", field["exclusiveMaximum"])
    if lower is not None and upper is not None:
        return f"{noun} in {lower[0]}{_json_value(lower[1])}, {_json_value(upper[1])}{upper[0]}"
    # The bound as the field declares it (0, not the 0.0 pydantic makes of a float field's bound).
    key, schema_key, words = _ONE_BOUND[error_type]
    bound = field[schema_key] if field is not None and schema_key in field else context.get(key)
    return f"{noun} {words} {_json_value(bound)}"


def _length(error_type: str, context: Mapping[str, Any], given: Any) -> str:
    """ "at least 1 character, got 0", "at most 4 items, got 5": the bound that was passed, and the given length."""
    lower = _LENGTHS[error_type]
    # By the value, not the error type: a string with two length bounds gets pydantic's "too_long" of a list.
    noun = "character" if isinstance(given, str) else "item"
    bound = context.get("min_length" if lower else "max_length")
    actual = context.get("actual_length", len(given) if isinstance(given, (str, list, tuple, dict)) else None)
    plural = "" if bound == 1 else "s"
    return f"at {'least' if lower else 'most'} {bound} {noun}{plural}, got {actual}"


def _choice(value: Any) -> str:
    """A value given for a choice, quoted as pydantic quotes the choices ('greedy' or 'beam'), cut to a bound."""
    if isinstance(value, str):
        return repr(shortened(value, _MAX_QUOTED_CHARACTERS))
    return _json_value(value)


def validation_message(error: Mapping[str, Any], schema: Mapping[str, Any] | None = None) -> str:
    """One of pydantic's errors (``RequestValidationError.errors()``) as "NAME: expected X, got Y".

    ``schema``: the request model's JSON schema (:func:`request_schema`), from which a range gets
    both of its bounds and a missing field its type; without it, the error's own bound is said.
    An error of a type not known here keeps pydantic's wording after the field's name.
    """
    error_type = str(error.get("type"))
    context: Mapping[str, Any] = error.get("ctx") or {}
    if error_type == "json_invalid":
        return f"body: expected a JSON object, got malformed JSON ({context.get('error', 'unreadable')})"
    # The location starts with "body"; the rest names the field (e.g. "text", "sentences.0").
    parts = [part for part in error.get("loc", ()) if part != "body"]
    location = shown_location(".".join(str(part) for part in parts) or "body")
    given = error.get("input")
    expected = _EXPECTED_TYPES.get(error_type)
    if expected is not None:
        return f"{location}: expected {expected}, got {_json_value(given)}"
    if error_type == "missing":
        if not parts:  # FastAPI's error for an empty body (a JSON null is a type error: "got null")
            return "body: expected a JSON object, got an empty body"
        field = _field_schema(schema, parts)
        kind = _SCHEMA_TYPES.get(str((field or {}).get("type")), "a value")
        return f"{location}: expected {kind} (a required field), got none"
    if error_type in _ONE_BOUND:
        bounded = _range(error_type, context, _field_schema(schema, parts))
        return f"{location}: expected {bounded}, got {_json_value(given)}"
    if error_type in _LENGTHS:
        return f"{location}: expected {_length(error_type, context, given)}"
    if error_type in ("literal_error", "enum") and "expected" in context:
        return f"{location}: expected {context['expected']}, got {_choice(given)}"
    return f"{location}: {str(error.get('msg', 'invalid')).removeprefix('Value error, ')}"
