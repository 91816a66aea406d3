"""``transformer-lab config TASK [--preset NAME]``: print a task's preset as the YAML that ``--config`` reads."""

from __future__ import annotations

import argparse

from transformer_lab.tasks.registry import TASKS, task_named
from transformer_lab.training.config_file import config_to_yaml
from transformer_lab.write_errors import write_standard_output


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("config", help="print a task's preset as YAML, to edit and pass to --config")
    parser.add_argument("task", choices=tuple(TASKS), help="whose preset")
    parser.add_argument(
        "--preset", default=None, help="the preset (default: the task's first; translation also has 'base')"
    )
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    task = task_named(arguments.task)
    config = task.config(arguments.preset)
    # The file is read over the preset `train` starts from: values equal to that preset's are no
    # choice of the user's. Fed back over another preset, each value of this one would count as
    # given (a carve size beside --valid refused, a warm-up taken as chosen and not scaled).
    default = arguments.preset is None or arguments.preset == next(iter(task.presets))
    preset = "" if default else f" --preset {arguments.preset}"
    heading = f"# transformer-lab train {arguments.task}{preset} --config FILE: the preset, to edit\n"
    write_standard_output(heading + config_to_yaml(config), "the config was not written")
    return 0
