"""The ``transformer-lab`` console script: parses arguments, calls library functions, prints.

Each subcommand lives in its own module with ``register(subparsers)`` that adds its parser
and sets ``handler``. Bad input reaches the user as one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence

from transformer_lab.cli import (
    average_command,
    demo_command,
    evaluate_command,
    explain_command,
    lab_command,
    plot_command,
    train_command,
    translate_command,
)
from transformer_lab.training import is_main_process

_COMMAND_MODULES = [
    demo_command,
    train_command,
    translate_command,
    evaluate_command,
    average_command,
    explain_command,
    lab_command,
    plot_command,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="transformer-lab",
        description="The Transformer of 'Attention Is All You Need', from scratch: learn, train, use.",
    )
    parser.add_argument("--verbose", action="store_true", help="show debug logging")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _COMMAND_MODULES:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    arguments = parser.parse_args(argv)
    level = logging.DEBUG if arguments.verbose else logging.INFO
    # Under torchrun only rank 0 reports; the other ranks still show warnings and errors.
    logging.basicConfig(level=level if is_main_process() else logging.WARNING, format="%(message)s")
    try:
        return int(arguments.handler(arguments) or 0)
    except (ValueError, FileNotFoundError) as error:
        print(f"transformer-lab {arguments.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
