"""What the commands that read texts share: the inputs (arguments, --input or stdin) and the decoding --precision."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from transformer_lab.cli.task_options import add_task_options
from transformer_lab.data import decode_lines, read_lines
from transformer_lab.tasks.evaluation import DECODE_PRECISION

__all__ = ["add_precision_argument", "input_lines", "input_names"]


def add_precision_argument(parser: argparse.ArgumentParser) -> None:
    """--precision of decoding (fp32, bf16, auto or int8; default: the checkpoint's)."""
    add_task_options(parser, [DECODE_PRECISION])


def input_lines(texts: Sequence[str], input_path: Path | None, purpose: str = "decode") -> list[str]:
    """The lines to ``purpose`` (a verb for messages): the positional texts, every line of --input, or stdin.

    An empty --input file or empty stdin is an error, not a silent no-op. :func:`input_names` names them.
    """
    if input_path is not None and texts:
        raise ValueError("expected either text arguments or --input, got both")
    if input_path is not None:
        lines = read_lines(input_path)
        if not lines:
            raise ValueError(f"--input: expected at least one line to {purpose}, got the empty file {input_path}")
        return lines
    if texts:
        return list(texts)
    if sys.stdin is None:
        # Started with stdin closed (`<&-`, a service given none): Python then has no sys.stdin at all.
        raise ValueError(
            f"stdin: expected the lines to {purpose} (or them as arguments, or --input FILE), got it closed"
        )
    if sys.stdin.isatty():
        # Typed by hand: else the command waits without a word, as if it had hung.
        print(f"reading the lines to {purpose} from the terminal, one a line; end with Ctrl-D", file=sys.stderr)
    # Bytes, decoded like a file, so that bad UTF-8 is reported with its line number
    # whatever the locale, and CRLF input gives the same lines as LF.
    lines = decode_lines(sys.stdin.buffer.read(), "stdin")
    if not lines:
        raise ValueError(f"stdin: expected at least one line to {purpose}, got none")
    return lines


def input_names(texts: Sequence[str], input_path: Path | None, count: int) -> list[str]:
    """What an error calls each of the ``count`` inputs: "F: line N" of --input, "stdin: line N", else "input N"."""
    where = "input {}" if texts else f"{input_path}: line {{}}" if input_path is not None else "stdin: line {}"
    return [where.format(number) for number in range(1, count + 1)]
