"""Names listed in a message as a sentence lists them: "a", "a or b", "a, b or c"."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["in_words"]


def in_words(names: Sequence[str], last: str = "or") -> str:
    """``names`` joined by commas, the last two by ``last`` ("or", "and"); one name alone as it is."""
    if len(names) == 1:
        return names[0]
    return f"{', '.join(names[:-1])} {last} {names[-1]}"
