"""The couplet rules' command-line options, shared by ``couplet`` and ``evaluate couplet``.

Each option changes one field of the checkpoint's `CoupletConstraintConfig` for this
call only; an option left out keeps the checkpoint's choice.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from transformer_lab.tasks import couplet

# option destination -> (the constraint field, the value it sets, or None to take the option's value)
_CHANGES: dict[str, tuple[str, object]] = {
    "no_mirror_repetition": ("mirror_repetition", False),
    "allow_upper_characters": ("avoid_source_characters", False),
    "oblique_final_penalty": ("oblique_final_penalty", None),
    "tone_opposition_penalty": ("tone_opposition_penalty", None),
    "part_of_speech_rerank": ("part_of_speech_rerank", None),
    "rhythm_rerank": ("rhythm_rerank", None),
}


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


def _given_changes(arguments: argparse.Namespace) -> dict[str, tuple[str, Any]]:
    """The rule options this command line sets: destination -> (the constraint field, its new value)."""
    given: dict[str, tuple[str, Any]] = {}
    for destination, (field, fixed) in _CHANGES.items():
        value = getattr(arguments, destination)
        if fixed is not None and value is True:  # a flag: it sets the fixed value
            given[destination] = (field, fixed)
        elif fixed is None and value is not None:  # a value option: it sets what was given
            given[destination] = (field, value)
    return given


def given_constraint_options(arguments: argparse.Namespace) -> list[str]:
    """The rule options this command line sets, as flags (to refuse them where they do not apply)."""
    return ["--" + destination.replace("_", "-") for destination in _given_changes(arguments)]


def constraint_overrides(
    config: couplet.CoupletConstraintConfig, arguments: argparse.Namespace
) -> couplet.CoupletConstraintConfig:
    """The checkpoint's constraints with the command line's changes."""
    return dataclasses.replace(config, **dict(_given_changes(arguments).values()))
