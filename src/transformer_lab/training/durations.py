"""Durations as people write them ("90m", "1h30m", "5400s", 5400), read once and within bounds.

The one reader behind a run's time budget, a download's timeout and the server's wait
limit: h, m and s in that order, lowercase, each once, a part after the first below 60;
finite, above 0 and at most a bound. A budget must also outlast the measurement of the
machine's speed that starts it (``time_budget.py``).
"""

from __future__ import annotations

import math
import re

__all__ = [
    "MAX_BUDGET_SECONDS",
    "MEASUREMENT_SECONDS",
    "budget_seconds",
    "check_budget",
    "duration_seconds",
]

# Training time that measures the machine's speed, counted within the budget.
MEASUREMENT_SECONDS = 30.0

# The longest budget a run may ask for: a year, far above any run and far below the
# figures that overflow the plan's arithmetic (1e308 s failed after the measurement).
MAX_BUDGET_SECONDS = 366 * 24 * 3600.0
_UNIT_SECONDS = {"h": 3600, "m": 60, "s": 1}
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_PART = re.compile(r"(\d+(?:\.\d+)?)([A-Za-z]+)")
_EXPECTED = "a duration such as 90m, 1h30m, 5400s or 5400 (seconds)"


def _written(seconds: float) -> str:
    """A bound as the user would write it: 366 days is "8784h", an hour "1h", 90 s "90s"."""
    for unit, size in _UNIT_SECONDS.items():
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:g}s"


def _seconds_of_text(text: str) -> float:
    """Seconds of "5400", "1.5h", "1h30m", "2h 5s": h, m, s in that order, each once, lowercase.

    The first part may be any size and the last one alone may have a fraction; a part after
    another stays below 60, so "1h90m" is refused rather than read as 2h30m. "5M" is
    refused: M is no unit here (minutes are m).
    """
    compact = text.strip().replace(" ", "")
    if _NUMBER.fullmatch(compact):
        return float(compact)
    parts = _PART.findall(compact)
    if not compact or "".join(number + unit for number, unit in parts) != compact:
        raise ValueError(f"expected {_EXPECTED}, got {text!r}")
    units = [unit for _, unit in parts]
    unknown = [unit for unit in units if unit not in _UNIT_SECONDS]
    if unknown:
        raise ValueError(f"expected {_EXPECTED}, with the units h, m and s (lowercase), got {unknown[0]!r} in {text!r}")
    order = list(_UNIT_SECONDS)
    if [order.index(unit) for unit in units] != sorted({order.index(unit) for unit in units}):
        raise ValueError(f"expected {_EXPECTED}, each unit once in the order h, m, s, got {text!r}")
    seconds = 0.0
    for position, (number, unit) in enumerate(parts):
        if "." in number and position < len(parts) - 1:
            raise ValueError(f"expected {_EXPECTED}, a fraction only in the last part, got {text!r}")
        if position > 0 and float(number) >= 60:
            raise ValueError(f"expected {_EXPECTED}, below 60 after the first part, got {number}{unit} in {text!r}")
        seconds += float(number) * _UNIT_SECONDS[unit]
    return seconds


def duration_seconds(value: str | float, *, maximum: float = MAX_BUDGET_SECONDS) -> float:
    """Seconds of ``value`` (text such as "1h30m", see the module docstring, or a number of seconds), in (0, maximum].

    The ``ValueError`` says what was expected and what was given but names nothing: the
    caller names the key or option (:func:`check_budget`, the CLI's argument types).
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"expected {_EXPECTED}, got {value!r}")
    seconds = _seconds_of_text(value) if isinstance(value, str) else float(value)
    if not (math.isfinite(seconds) and 0 < seconds <= maximum):
        raise ValueError(f"expected {_EXPECTED}, longer than 0 and at most {_written(maximum)}, got {value!r}")
    return seconds


def budget_seconds(value: str | float) -> float:
    """The budget's seconds; one shorter than the measurement is refused (the message names nothing)."""
    seconds = duration_seconds(value)
    if seconds <= MEASUREMENT_SECONDS:
        raise ValueError(
            f"expected more than the {MEASUREMENT_SECONDS:.0f} s that measure this machine's speed, "
            f"got {value!r} ({seconds:g} s)"
        )
    return seconds


def check_budget(value: str | float, name: str = "train.time_budget") -> float:
    """The budget's seconds; one shorter than the measurement, or past a year, is refused naming ``name``."""
    try:
        return budget_seconds(value)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None
