"""strict_json.loads: json.loads, but an object that gives a key twice, at any depth, is refused naming the key."""

from __future__ import annotations

import json

import pytest

from transformer_lab import strict_json


@pytest.mark.parametrize(
    "text",
    ['{"a": 1, "b": [1, {"c": null}], "d": {"e": "f"}}', "[]", '"x"', "3", '{"a": {"a": 1}, "b": {"a": 2}}'],
)
def test_json_without_a_repeated_key_reads_as_json_loads_reads_it(text: str) -> None:
    assert strict_json.loads(text) == json.loads(text)
    assert strict_json.loads(text.encode()) == json.loads(text)


@pytest.mark.parametrize(
    "text, key",
    [
        ('{"label": "2", "text": "a", "label": "1"}', "label"),
        ('{"a": [{"b": 1, "b": 1}]}', "b"),  # nested, and the same value twice too
        ('{"a": {"x": 1, "y": 2, "x": 3}}', "x"),
    ],
)
def test_a_repeated_key_is_refused_naming_it(text: str, key: str) -> None:
    assert json.loads(text)  # what json.loads does: keeps the last value without a word
    with pytest.raises(strict_json.DuplicateKeyError, match=f"^key '{key}' appears twice$") as caught:
        strict_json.loads(text)
    assert caught.value.key == key and isinstance(caught.value, ValueError)


def test_a_long_repeated_key_is_quoted_short_and_bad_json_is_still_a_json_error() -> None:
    long_key = "k" * 10_000
    with pytest.raises(strict_json.DuplicateKeyError) as caught:
        strict_json.loads(json.dumps({long_key: 1})[:-1] + f', "{long_key}": 2}}')
    assert len(str(caught.value)) < 120 and caught.value.key == long_key
    with pytest.raises(json.JSONDecodeError):
        strict_json.loads('{"a": ')
