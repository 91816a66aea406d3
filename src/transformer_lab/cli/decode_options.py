"""What the commands that read texts share: the inputs (arguments, --input or stdin) and the decoding --precision."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

from transformer_lab.cli.task_options import add_task_options
from transformer_lab.data import read_lines
from transformer_lab.data.line_stream import line_blocks
from transformer_lab.tasks.evaluation import DECODE_PRECISION

__all__ = ["STANDARD_STREAM", "Inputs", "add_precision_argument", "command_inputs"]

# What `--input` and `--output` take for stdin and stdout, as command-line tools do.
STANDARD_STREAM = Path("-")

# A read of a pipe takes what it holds, up to this: small enough that a part is answered soon.
STREAM_BLOCK_BYTES = 1 << 16


def add_precision_argument(parser: argparse.ArgumentParser) -> None:
    """--precision of decoding (fp32, bf16, auto or int8; default: the checkpoint's)."""
    add_task_options(parser, [DECODE_PRECISION])


@dataclass(frozen=True)
class Inputs:
    """The lines a command answers, and what its messages call each ("F: line 3", "stdin: line 3", "input 3").

    ``whole``: every line, known before any is answered (arguments, a regular file, stdin read
    from one). ``stream``: the lines of a pipe, a terminal or a device, in parts as they are
    written, so that each is answered once it comes and an endless stream is never held whole.
    """

    whole: list[str] | None
    stream: Iterator[list[str]] | None
    where: str  # a name for input N, with {} for N

    def name(self, index: int) -> str:
        """What a message calls input ``index`` (from 0)."""
        return self.where.format(index + 1)

    def names(self, start: int, count: int) -> list[str]:
        """The names of ``count`` inputs from ``start`` (from 0)."""
        return [self.name(index) for index in range(start, start + count)]


def command_inputs(texts: Sequence[str], input_path: Path | None, purpose: str = "decode") -> Inputs:
    """The lines to ``purpose`` (a verb for messages): the positional texts, every line of --input, or stdin.

    An empty --input file or empty stdin is an error, not a silent no-op (a streamed one's
    once it ends with no line). Every line read holds at most `MAX_LINE_BYTES`, refused as it passes the bound.
    """
    if input_path is not None and texts:
        raise ValueError("expected either text arguments or --input, got both")
    if input_path == STANDARD_STREAM:
        input_path = None  # the command line's "-": stdin (a file of that name is ./-)
    if texts:
        return Inputs(list(texts), None, "input {}")
    if input_path is not None:
        where = f"{input_path}: line {{}}"
        if input_path.is_file() or input_path.is_dir() or not input_path.exists():
            lines = read_lines(input_path)  # refuses a folder or a missing file, naming it
            if not lines:
                raise ValueError(f"--input: expected at least one line to {purpose}, got the empty file {input_path}")
            return Inputs(lines, None, where)
        try:
            file = input_path.open("rb")  # a named pipe, /dev/stdin, a shell's <(command), a device
        except OSError as error:
            raise ValueError(
                f"--input: {input_path}: expected a readable text file, got an error: {error.strerror or error}"
            ) from None
        empty = f"--input: expected at least one line to {purpose}, got none from {input_path}"
        return Inputs(None, _stream(file, str(input_path), empty, close=True), where)
    if sys.stdin is None:
        # Started with stdin closed (`<&-`, a service given none): Python then has no sys.stdin at all.
        raise ValueError(
            f"stdin: expected the lines to {purpose} (or them as arguments, or --input FILE), got it closed"
        )
    if sys.stdin.isatty():
        # Typed by hand: else the command waits without a word, as if it had hung.
        print(f"reading the lines to {purpose} from the terminal, one a line; end with Ctrl-D", file=sys.stderr)
    empty = f"stdin: expected at least one line to {purpose}, got none"
    # Bytes, decoded like a file, so that bad UTF-8 is reported with its line number
    # whatever the locale, and CRLF input gives the same lines as LF.
    if _is_regular_file(sys.stdin):  # `< FILE` (or text a test gives): known whole, as --input FILE is
        lines = [line for block in line_blocks(sys.stdin.buffer, "stdin") for line in block]
        if not lines:
            raise ValueError(empty)
        return Inputs(lines, None, "stdin: line {}")
    return Inputs(None, _stream(sys.stdin.buffer, "stdin", empty, close=False), "stdin: line {}")


def _is_regular_file(stream: TextIO) -> bool:
    try:
        return stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
    except (OSError, ValueError):  # io.UnsupportedOperation: a stream in memory, which is whole
        return True


def _stream(file: BinaryIO, name: str, empty: str, close: bool) -> Iterator[list[str]]:
    """The lines of a pipe or terminal ``file``, a list per read, as they are written; ``empty`` if none ever come."""
    try:
        given = False
        for lines in line_blocks(file, name, STREAM_BLOCK_BYTES, as_written=True):
            given = True
            yield lines
        if not given:
            raise ValueError(empty)
    finally:
        if close:
            file.close()
