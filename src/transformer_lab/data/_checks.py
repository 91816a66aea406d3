"""Small argument checks shared by the data modules and the predictors that take texts.

Every check raises a `ValueError` whose message names the argument, what was expected
and what was given, as DESIGN.md asks.
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeGuard


def is_integer(value: Any) -> TypeGuard[numbers.Integral]:
    """Return True for Python and NumPy integers, False for bools and everything else.

    bool is a subclass of int; a stray True passed as a length or an id is almost
    always a bug, so it is refused rather than read as 1.
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int_in_range(name: str, value: Any, low: int, high: int) -> int:
    """``value`` if it is an int in [low, high], else a ``ValueError`` "NAME: expected an int in [low, high], got ...".

    For the options that size an allocation (how many examples, tokens, entries): a bound
    checked before any work, so that a mistyped size is one line, not an abort.
    """
    if not is_integer(value) or not low <= int(value) <= high:
        raise ValueError(f"{name}: expected an int in [{low:,}, {high:,}], got {value!r}")
    return int(value)


# Padded tokens in one batch: 2^20 x d_model 512 activations are 2 GiB per layer output already.
MAX_BATCH_TOKENS = 1 << 20
# For counts that only limit ("the first N", "at most N"): any size, but never negative.
ANY_COUNT = (0, sys.maxsize)
# Seeds: what NumPy's SeedSequence takes (no negatives) and torch's generators hold with
# room for the offsets added per rank or epoch (10^23 failed in torch as "Overflow when
# unpacking long long", naming nothing).
SEED_RANGE = (0, (1 << 63) - 1)
# What every task's corpus config bounds alike: the batch budget, the vocabulary's cut-off, the seed.
CORPUS_FIELD_BOUNDS = {"max_tokens": (1, MAX_BATCH_TOKENS), "min_frequency": (1, ANY_COUNT[1]), "seed": SEED_RANGE}


def check_int_fields(config: Any, prefix: str, bounds: dict[str, tuple[int, int]]) -> None:
    """Check each field of ``config`` named in ``bounds`` with :func:`check_int_in_range`, named ``prefix.field``."""
    for name, (low, high) in bounds.items():
        check_int_in_range(f"{prefix}.{name}", getattr(config, name), low, high)


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
    """``value`` as a bool if it is one (Python's or numpy's), or a ValueError naming ``name`` ("no" is true)."""
    numpy_bool = type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_")
    if not (isinstance(value, bool) or numpy_bool):
        raise ValueError(f"{name} must be a bool, got {value!r} ({type(value).__name__})")
    return bool(value)


def lone_surrogate_position(text: str) -> int | None:
    """Where ``text`` holds its first lone surrogate, or None.

    A lone surrogate (undecodable bytes smuggled in by surrogateescape, a JSON ``\\ud800`` escape)
    has no UTF-8 form: no byte-level model reads it, and a message quoting it cannot be printed.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return error.start
    return None


def lone_surrogate(text: str) -> str | None:
    """``text``'s first lone surrogate in words ("the lone surrogate U+D800 at character 2"), or None."""
    position = lone_surrogate_position(text)
    return None if position is None else f"the lone surrogate U+{ord(text[position]):04X} at character {position}"


def texts_of(texts: str | Sequence[str], name: str) -> list[str]:
    """``texts`` as a list (a single str: a list of one); an item that is no str is a ValueError naming ``name[i]``."""
    if isinstance(texts, str):
        return [texts]
    if isinstance(texts, (Mapping, AbstractSet, bytes, bytearray)) or not isinstance(texts, Iterable):
        # list() of a dict is its keys, of bytes its numbers, of a set its items in hash order
        # (the results could not be matched to the inputs): none is a list of texts.
        raise ValueError(f"{name}: expected a str or a sequence of str, got {type(texts).__name__}")
    texts = list(texts)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"{name}[{index}]: expected a str, got {type(text).__name__}")
    return texts


def text_of(text: object, name: str) -> str:
    """``text`` itself if it is a str; anything else is a ValueError naming ``name``."""
    if not isinstance(text, str):
        raise ValueError(f"{name}: expected a str, got {type(text).__name__}")
    return text
