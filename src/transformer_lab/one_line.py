"""Model outputs written one a line: the line breaks and tabs a decoded text may hold become spaces.

A subword vocabulary may hold a newline, a tab or another separator (byte-level BPE holds every
byte; a vocabulary file may list U+2028), so a translation or a lower line can contain one.
Written as it is, one input takes two output lines and every later line stands beside the wrong
input (and BLEU scores the wrong pairs). The commands and evaluations write what `one_line`
gives, and say with `line_break_notes` how many texts it changed; the Python API returns the
text as the model decoded it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["SEPARATORS", "json_line", "line_break_count", "line_break_note", "line_break_notes", "one_line"]

# Every character str.splitlines splits on, and the tab that separates the columns of --nbest.
SEPARATORS = re.compile("[\t\n\v\f\r\x1c\x1d\x1e\x85\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` with each line break and tab written as a space."""
    return SEPARATORS.sub(" ", text)


# The separators json.dumps leaves as they are (it escapes the control characters among them).
_RAW_IN_JSON = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def json_line(value: Any) -> str:
    """``value`` as one line of JSON Lines, non-ASCII text kept, and no character a line reader splits on.

    JSON allows U+0085, U+2028 and U+2029 raw inside a string; ``str.splitlines`` (and editors)
    would break the record there, so they are written escaped.
    """
    text = json.dumps(value, ensure_ascii=False)
    for raw, escaped in _RAW_IN_JSON.items():
        text = text.replace(raw, escaped)
    return text + "\n"


def line_break_notes(texts: Sequence[str], what: str) -> list[str]:
    """None, or one note naming how many of ``texts`` (``what`` they are: "translations") `one_line` changes."""
    count = line_break_count(texts)
    return [line_break_note(count, len(texts), what)] if count else []


def line_break_count(texts: Sequence[str]) -> int:
    """How many of ``texts`` `one_line` changes."""
    return sum(SEPARATORS.search(text) is not None for text in texts)


def line_break_note(count: int, total: int, what: str) -> str:
    """The note that ``count`` of ``total`` texts (``what`` they are) were written on one line by `one_line`."""
    return f"{count} of {total} {what} held a line break or a tab, each written as a space (one line per input)"
