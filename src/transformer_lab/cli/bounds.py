"""Argument types for options that size an allocation: an int or float within stated bounds.

argparse calls the type on the text; a value outside the bounds is refused there, before
any work, in argparse's one line naming the option ("argument --d-model: expected an int
in [1, 4,096], got 10000000"). The bounds are far above what the option is for (a figure,
a printed walk of shapes) and far below what would exhaust a machine's memory.
"""

from __future__ import annotations

import argparse
import math
from typing import Callable

__all__ = ["float_in", "int_in"]


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: the text as an int in [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an int in [{low:,}, {high:,}], got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an int in [{low:,}, {high:,}], got {value}")
        return value

    return parse


def float_in(low: float, high: float) -> Callable[[str], float]:
    """An argparse type: the text as a finite float in (low, high]."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number in ({low:g}, {high:g}], got {text!r}") from None
        if not (math.isfinite(value) and low < value <= high):
            raise argparse.ArgumentTypeError(f"expected a number in ({low:g}, {high:g}], got {text}")
        return value

    return parse
