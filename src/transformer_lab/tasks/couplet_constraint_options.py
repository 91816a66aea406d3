"""The couplet rules' options, by flag: each changes one field of a checkpoint's constraints, for one call.

``couplet`` and ``evaluate couplet`` take them; an option left out keeps the checkpoint's
choice (its `CoupletConstraintConfig`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the couplet task module names these options in its TASK
    from transformer_lab.tasks.couplet import CoupletConstraintConfig

# flag -> (the constraint field, the value it sets, or None to take the option's value)
CONSTRAINT_OPTIONS: dict[str, tuple[str, object]] = {
    "--no-mirror-repetition": ("mirror_repetition", False),
    "--allow-upper-characters": ("avoid_source_characters", False),
    "--oblique-final-penalty": ("oblique_final_penalty", None),
    "--tone-opposition-penalty": ("tone_opposition_penalty", None),
    "--part-of-speech-rerank": ("part_of_speech_rerank", None),
    "--rhythm-rerank": ("rhythm_rerank", None),
}


def constraint_changes(values: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
    """The rule options set among ``values`` (flag -> value as given): flag -> (the constraint field, its new value).

    A flag option is set by True; a value option by any value but None.
    """
    given: dict[str, tuple[str, Any]] = {}
    for flag, (field, fixed) in CONSTRAINT_OPTIONS.items():
        value = values.get(flag)
        if fixed is not None and value is True:  # a flag: it sets the fixed value
            given[flag] = (field, fixed)
        elif fixed is None and value is not None:  # a value option: it sets what was given
            given[flag] = (field, value)
    return given


def with_constraint_options(config: CoupletConstraintConfig, values: Mapping[str, Any]) -> CoupletConstraintConfig:
    """``config`` (a checkpoint's constraints) with the rule options set among ``values`` applied."""
    return dataclasses.replace(config, **dict(constraint_changes(values).values()))
