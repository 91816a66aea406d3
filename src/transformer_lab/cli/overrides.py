"""``--set key=value`` overrides on a task's dataclass config, shared by the subcommands."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypeVar

from transformer_lab.training import apply_overrides
from transformer_lab.training.config_file import apply_config_file

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


def add_config_file_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE.yaml",
        help="a YAML file of config values by section (model:, train:, data:, ...), applied over the preset "
        "and before --set; 'transformer-lab config TASK' prints a preset to start from",
    )


def with_config_file(config: ConfigType, arguments: argparse.Namespace) -> ConfigType:
    """``config`` with ``--config FILE`` applied, where given."""
    path = getattr(arguments, "config", None)
    return config if path is None else apply_config_file(config, path)
