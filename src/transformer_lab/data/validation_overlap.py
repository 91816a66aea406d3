"""Validation examples that the training data holds too, found as the training data streams past.

A validation file given beside the training files is kept as given; where some of its
examples are also training examples, validation scores them as text the model has learned,
so its scores overstate how the model does on new text and ``best/`` is chosen on them. The
preparation says so in one warning instead of leaving it unsaid.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Sequence

from transformer_lab.shortened import shortened

logger = logging.getLogger(__name__)


class ValidationOverlap:
    """Which of the validation examples (by ``keys``, one a validation example) the training examples repeat."""

    def __init__(self, keys: Sequence[Hashable]) -> None:
        self.keys = keys
        self.unseen = set(keys)  # those of the keys no training example has repeated yet

    def see(self, key: Hashable) -> None:
        """Note a training example's key."""
        # Checked first: with no validation file given (or all of it seen) no key is hashed, once per example.
        if self.unseen:
            self.unseen.discard(key)

    def warn(self, valid: str, train: str, examples: str, quoted: Callable[[int], str]) -> None:
        """One warning where any validation example is a training one; ``quoted(i)`` quotes validation example i."""
        repeated = [index for index, key in enumerate(self.keys) if key not in self.unseen]
        if not repeated:
            return
        logger.warning(
            "%s: %s of the %s validation %s are also training %s of %s (the first: %s); validation scores them "
            "as text the model has learned, so its scores overstate new text and best/ is chosen on them",
            valid,
            f"{len(repeated):,}",
            f"{len(self.keys):,}",
            examples,
            examples,
            train,
            shortened(quoted(repeated[0]), 160),
        )
