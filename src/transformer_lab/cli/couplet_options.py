"""The couplet rules' command-line options, shared by ``couplet`` and ``evaluate couplet``.

Each option changes one field of the checkpoint's `CoupletConstraintConfig` for this
call only; an option left out keeps the checkpoint's choice.
"""

from __future__ import annotations

import argparse
from typing import Any

from transformer_lab.tasks.couplet.predict import CONSTRAINT_OPTIONS, CoupletConstraintConfig, with_constraint_options

# The options that take a number of nats, each setting the constraint field of its name.
_NATS_OPTIONS = (
    ("--oblique-final-penalty", "nats taken from oblique-tone final characters"),
    ("--tone-opposition-penalty", "nats taken, at each position, from characters of the upper character's tone class"),
    ("--part-of-speech-rerank", "beam search: re-rank its candidates, nats per unit of part-of-speech agreement"),
    ("--rhythm-rerank", "beam search: re-rank its candidates, nats per unit of rhythm agreement"),
)


def add_constraint_arguments(parser: argparse.ArgumentParser, *, prefix: str = "") -> None:
    """Add the rule options; `prefix` starts their help (e.g. "couplet: " on a command of several tasks)."""
    parser.add_argument(
        "--no-mirror-repetition", action="store_true", help=f"{prefix}do not force the upper line's repetition pattern"
    )
    parser.add_argument(
        "--allow-upper-characters",
        action="store_true",
        help=f"{prefix}let the lower line reuse the upper line's characters",
    )
    for flag, help_text in _NATS_OPTIONS:
        parser.add_argument(flag, type=float, default=None, help=f"{prefix}{help_text} (0 = off)")


def _given_values(arguments: argparse.Namespace) -> dict[str, Any]:
    """The rule options as parsed, by flag (None or False where not given)."""
    return {flag: getattr(arguments, flag[2:].replace("-", "_")) for flag in CONSTRAINT_OPTIONS}


def constraint_overrides(config: CoupletConstraintConfig, arguments: argparse.Namespace) -> CoupletConstraintConfig:
    """The checkpoint's constraints with the command line's changes."""
    return with_constraint_options(config, _given_values(arguments))
