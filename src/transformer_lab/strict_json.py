"""JSON read as ``json.loads`` reads it, except that an object giving a key twice is refused.

``json.loads('{"label": "2", "label": "1"}')`` keeps the last value and drops the first without
a word, so a corpus line or a request body could mean something its writer did not. Every
reader of a user's JSON (JSON Lines corpora, request bodies, configs, manifests) goes through
:func:`loads`; the caller adds the file and line to the :class:`DuplicateKeyError`'s message.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from transformer_lab.shortened import shortened

__all__ = ["DuplicateKeyError", "loads", "too_long_integer"]

# The longest key quoted whole in a message; a longer one is cut.
_MAX_KEY_CHARACTERS = 80


class DuplicateKeyError(ValueError):
    """A JSON object that gives ``key`` twice: "key 'label' appears twice"."""

    def __init__(self, key: str) -> None:
        super().__init__(f"key {shortened(key, _MAX_KEY_CHARACTERS)!r} appears twice")
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    mapping = dict(pairs)
    if len(mapping) != len(pairs):  # the common case costs one dict, as json's own does
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return mapping


# One decoder for every call: ``json.loads`` with a hook builds a new one each time, which cost more
# than the parsing itself on a log of short lines.
_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys)


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``, but an object with a key given twice (at any depth) is a :class:`DuplicateKeyError`.

    Malformed JSON is ``json.JSONDecodeError`` and bytes that are not UTF-8 ``UnicodeDecodeError``,
    as from ``json.loads``; all three are ``ValueError`` s.
    """
    if isinstance(text, str) and not text.startswith("\ufeff"):
        return _DECODER.decode(text)
    return json.loads(text, object_pairs_hook=_unique_keys)  # bytes, or a BOM it names in its error


def too_long_integer(error: ValueError) -> str | None:
    """What a :func:`loads` error says of an integer too long for Python to read, in words; None for any other.

    ``json.loads`` refuses an integer of more digits than ``sys.get_int_max_str_digits()`` (4,300
    by default) with a bare ``ValueError`` ("Exceeds the limit ... use sys.set_int_max_str_digits()"),
    no JSON syntax error: readers of a user's file add the file and line to these words instead.
    """
    digits = re.search(r"value has (\d+) digits", str(error))
    if type(error) is not ValueError or digits is None:
        return None
    limit: int = getattr(sys, "get_int_max_str_digits", lambda: 0)()  # absent before Python 3.10.7
    return f"an integer of {int(digits.group(1)):,} digits, more than the {limit:,} that can be read"
