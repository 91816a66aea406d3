"""Model outputs written one a line: the line breaks and tabs a decoded text may hold become spaces.

A subword vocabulary may hold a newline, a tab or another separator (byte-level BPE holds every
byte; a vocabulary file may list U+2028), so a translation or a lower line can contain one.
Written as it is, one input takes two output lines and every later line stands beside the wrong
input (and BLEU scores the wrong pairs). The commands and evaluations write what `one_line`
gives, and say with `line_break_notes` how many texts it changed; the Python API returns the
text as the model decoded it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["SEPARATORS", "line_break_notes", "one_line"]

# Every character str.splitlines splits on, and the tab that separates the columns of --nbest.
SEPARATORS = re.compile("[\t\n\v\f\r\x1c\x1d\x1e\x85\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` with each line break and tab written as a space."""
    return SEPARATORS.sub(" ", text)


def line_break_notes(texts: Sequence[str], what: str) -> list[str]:
    """None, or one note naming how many of ``texts`` (``what`` they are: "translations") `one_line` changes."""
    count = sum(SEPARATORS.search(text) is not None for text in texts)
    if not count:
        return []
    return [f"{count} of {len(texts)} {what} held a line break or a tab, each written as a space (one line per input)"]
