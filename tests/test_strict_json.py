"""strict_json.loads: json.loads, but an object that gives a key twice, at any depth, is refused naming the key."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from transformer_lab import strict_json
from transformer_lab.data import read_labelled_text
from transformer_lab.data.couplet import read_couplet_source
from transformer_lab.data.couplet_stream import CoupletFiles


@pytest.mark.parametrize(
    "text",
    ['{"a": 1, "b": [1, {"c": null}], "d": {"e": "f"}}', "[]", '"x"', "3", '{"a": {"a": 1}, "b": {"a": 2}}'],
)
def test_json_without_a_repeated_key_reads_as_json_loads_reads_it(text: str) -> None:
    assert strict_json.loads(text) == json.loads(text)
    assert strict_json.loads(text.encode()) == json.loads(text)


def test_a_byte_order_mark_is_refused_as_json_loads_refuses_it() -> None:
    # The shared decoder skips json.loads's own check: the str with a BOM must still take that path.
    with pytest.raises(json.JSONDecodeError, match="BOM") as ours:
        strict_json.loads('\ufeff{"a": 1}')
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads('\ufeff{"a": 1}')
    assert str(ours.value) == str(theirs.value)


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


def test_an_integer_longer_than_python_reads_is_named_with_the_file_and_line(tmp_path: Path) -> None:
    digits = sys.get_int_max_str_digits() + 700
    text = '{"text": "hi", "label": ' + "9" * digits + "}"
    with pytest.raises(ValueError) as caught:
        strict_json.loads(text)  # json's own error: no position, and advice for a Python call
    assert "sys.set_int_max_str_digits" in str(caught.value)
    said = f"an integer of {digits:,} digits, more than the {sys.get_int_max_str_digits():,} that can be read"
    assert strict_json.too_long_integer(caught.value) == said
    assert strict_json.too_long_integer(ValueError("x")) is None
    # The readers of a user's JSON Lines name the file and the line, as for any bad JSON.
    labelled = tmp_path / "a.jsonl"
    labelled.write_text('{"text": "ok", "label": 1}\n' + text + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as read:
        read_labelled_text(labelled)
    assert str(read.value) == f"{labelled}: line 2: expected a JSON object, got {said}"
    couplets = tmp_path / "c.jsonl"
    couplets.write_text('{"upper": "春风", "lower": ' + "9" * digits + "}\n", encoding="utf-8")
    with pytest.raises(ValueError) as read:
        read_couplet_source(CoupletFiles.of_files([couplets]))
    assert str(read.value) == f"{couplets}: line 1: expected one JSON object, got {said}"
