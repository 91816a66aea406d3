"""``--set key=value`` overrides on a task's dataclass config, shared by the subcommands."""

from __future__ import annotations

import argparse
from typing import TypeVar

from transformer_lab.training import apply_overrides

ConfigType = TypeVar("ConfigType")


def add_override_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, e.g. --set model.d_model=64 --set train.max_steps=500 (repeatable)",
    )


def resolved_config(config: ConfigType, arguments: argparse.Namespace) -> ConfigType:
    return apply_overrides(config, arguments.overrides)
