"""Argument types for options that size an allocation: an int or float within stated bounds.

argparse calls the type on the text; a value outside the bounds is refused there, before
any work, in argparse's one line naming the option ("argument --d-model: expected an int
in [1, 4,096], got 10000000"). The bounds are far above what the option is for (a figure,
a printed walk of shapes) and far below what would exhaust a machine's memory.

The same holds for what is not a size: durations and timeouts (:func:`duration_in`, the
project's one duration reader, ``training.durations.duration_seconds``: finite, in
range, units h, m and s), thread counts (:func:`thread_count`, a few per CPU), and any
value a library function checks (:func:`checked_text`, which puts its ``ValueError`` in
argparse's one line), and paths (:func:`path_of`: an empty one is refused, not read as the
current folder).
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Callable

from transformer_lab.training.durations import duration_seconds

__all__ = [
    "MAX_THREADS_PER_CPU",
    "checked_text",
    "duration_in",
    "float_in",
    "int_in",
    "max_threads",
    "path_of",
    "thread_count",
]

# More threads than CPUs only queue for them; a few per CPU still leave room for a
# deliberate oversubscription, while 2,000 threads made libgomp fail to create them.
MAX_THREADS_PER_CPU = 4


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


def duration_in(maximum: float) -> Callable[[str], float]:
    """An argparse type: a duration ("90s", "2m", "1h30m" or seconds) as seconds in (0, maximum]."""

    def parse(text: str) -> float:
        try:
            return duration_seconds(text, maximum=maximum)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


def checked_text(check: Callable[[str], object]) -> Callable[[str], str]:
    """An argparse type: the text as given, once ``check(text)`` accepts it; its ``ValueError`` is argparse's line.

    For an option that is handed on as text (``--time-budget`` becomes ``train.time_budget``,
    which the config records as written) but must be refused before any work.
    """

    def parse(text: str) -> str:
        try:
            check(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        return text

    return parse


def path_of(text: str) -> Path:
    """An argparse type: the text as a path, `~` expanded; an empty one is refused (`Path("")` is the current folder).

    The shell leaves ``--out=~/run`` as it is: taken literally, it made a folder named ``~`` here.
    """
    if not text:
        raise argparse.ArgumentTypeError("expected a path, got an empty one")
    return Path(text).expanduser()


def file_path_of(text: str) -> Path:
    """An argparse type: a file's path; empty, or ending in a separator as a folder's does, is refused.

    ``Path("results/")`` is ``results``: a file of that name would be written or read in its place.
    """
    path = path_of(text)
    if text.endswith(tuple(separator for separator in (os.sep, os.altsep) if separator)):
        raise argparse.ArgumentTypeError(f"expected a file, got {text!r}, which ends in {text[-1]!r} as a folder does")
    return path


def thread_count(text: str) -> int:
    """An argparse type: a thread count in [1, :data:`MAX_THREADS_PER_CPU` x this machine's CPUs]."""
    high = max_threads()
    expected = (
        f"expected an int in [1, {high:,}] ({MAX_THREADS_PER_CPU} per CPU of this machine's {os.cpu_count() or 1})"
    )
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{expected}, got {text!r}") from None
    if not 1 <= value <= high:
        raise argparse.ArgumentTypeError(f"{expected}, got {value}")
    return value


def max_threads() -> int:
    """The most threads a command may ask for on this machine."""
    return MAX_THREADS_PER_CPU * (os.cpu_count() or 1)
