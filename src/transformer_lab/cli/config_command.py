"""``transformer-lab config TASK [--preset NAME]``: print a task's preset as the YAML that ``--config`` reads."""

from __future__ import annotations

import argparse
import sys

from transformer_lab.cli.train_command import REAL_DATA_TASKS, SYNTHETIC_TASKS, TASKS, preset_config
from transformer_lab.tasks import synthetic
from transformer_lab.training.config_file import config_to_yaml


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("config", help="print a task's preset as YAML, to edit and pass to --config")
    parser.add_argument("task", choices=TASKS, help="whose preset")
    parser.add_argument("--preset", default=None, help="translation: 'default' or 'base'")
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    if arguments.task in SYNTHETIC_TASKS:
        if arguments.preset is not None:
            raise ValueError(f"--preset: expected only with translation, got it with {arguments.task}")
        config = synthetic.default_config(arguments.task)
    else:
        config = preset_config(REAL_DATA_TASKS[arguments.task], arguments.preset)
    sys.stdout.write(f"# transformer-lab train {arguments.task} --config FILE: the preset, to edit\n")
    sys.stdout.write(config_to_yaml(config))
    return 0
