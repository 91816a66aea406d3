"""The options only some tasks read, added to a command as each task declares them (``TaskOption``).

A task lists the options its evaluation (or its own command) reads in
``tasks.evaluation.TaskOption`` terms, with no argparse; the commands add them here in a
loop and hand back what was given by flag, so no command spells a task's flags itself.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from transformer_lab.cli.bounds import file_path_of, int_in
from transformer_lab.tasks.evaluation import TaskOption


def add_task_options(
    parser: argparse.ArgumentParser, options: Iterable[TaskOption], prefix: str = ""
) -> dict[str, str]:
    """Add each of ``options`` to ``parser`` (``prefix`` starts its help); returns destination -> flag."""
    added: dict[str, str] = {}
    for option in options:
        keywords: dict[str, Any] = {"help": prefix + option.help}
        if option.kind is bool:
            keywords["action"] = "store_true"
        else:
            keywords["default"] = None
            if option.bounds is not None:
                keywords["type"] = int_in(*option.bounds)  # argparse's one line names the bounds
            elif option.kind is Path:
                # Every such option names a file: an empty path, or one ending in "/", is refused.
                keywords["type"] = file_path_of
            elif option.kind is not str:
                keywords["type"] = option.kind
            if option.choices is not None:
                keywords["choices"] = option.choices
            if option.metavar is not None:
                keywords["metavar"] = option.metavar
            if option.repeatable:
                keywords["action"] = "append"
        action = parser.add_argument(option.flag, **keywords)
        added[action.dest] = option.flag
    return added


def given_options(arguments: argparse.Namespace, destinations: Mapping[str, str]) -> dict[str, Any]:
    """The options of ``destinations`` (destination -> flag) that were given, flag -> value, in order."""
    values = {flag: getattr(arguments, destination) for destination, flag in destinations.items()}
    # Identity, not equality: 0 and 0.0 equal False, and "--length-penalty 0" is a value given.
    return {flag: value for flag, value in values.items() if value is not None and value is not False}
