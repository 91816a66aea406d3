"""Small argument checks shared by the data modules (private).

Every check raises a `ValueError` whose message names the argument, what was expected
and what was given, as DESIGN.md asks.
"""

from __future__ import annotations

import numbers
from typing import Any, TypeGuard


def is_integer(value: Any) -> TypeGuard[numbers.Integral]:
    """Return True for Python and NumPy integers, False for bools and everything else.

    bool is a subclass of int; a stray True passed as a length or an id is almost
    always a bug, so it is refused rather than read as 1.
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_integer(name: str, value: Any, minimum: int | None = None) -> int:
    """Return `value` as an int, or raise a ValueError naming `name`.

    Args:
        name: the argument's name, quoted in the error message.
        value: what the caller passed.
        minimum: the smallest allowed value, or None for no lower bound.
    """
    if not is_integer(value):
        raise ValueError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_bool(name: str, value: Any) -> bool:
    """Return `value` if it is a bool, or raise a ValueError naming `name`."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r} ({type(value).__name__})")
    return value
