"""Text quoted in a message, cut to a bound: a value or key a user gave may be any length."""

from __future__ import annotations

__all__ = ["shortened"]


def shortened(text: str, limit: int) -> str:
    """``text`` as it is where it has at most ``limit`` characters, else its first ``limit - 3`` and "..."."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
