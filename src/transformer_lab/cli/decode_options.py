"""Options shared by translate, couplet and evaluate: --beam, --precision, --length-penalty, --beam-stop, inputs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

from transformer_lab.cli.task_options import add_task_options
from transformer_lab.data import decode_lines, read_lines
from transformer_lab.hardware import INFERENCE_PRECISIONS
from transformer_lab.tasks.evaluation import BEAM, BEAM_STOP, LENGTH_PENALTY

__all__ = ["add_decode_arguments", "add_precision_argument", "decode_keywords", "input_lines"]


def add_decode_arguments(parser: argparse.ArgumentParser) -> None:
    """--beam, --precision, --length-penalty and --beam-stop."""
    add_task_options(parser, [BEAM])
    add_precision_argument(parser)
    add_task_options(parser, [LENGTH_PENALTY, BEAM_STOP])


def add_precision_argument(parser: argparse.ArgumentParser) -> None:
    # int8 is not an autocast precision but a converted copy of the model (models.quantization).
    parser.add_argument(
        "--precision",
        choices=INFERENCE_PRECISIONS,
        default=None,
        help="bf16: decode with a bf16 copy of the model, faster from about 8 rows (batch x beam) on CPUs with "
        "bf16 instructions; auto: bf16 where this "
        "machine runs it fast, else fp32; int8: the feed-forward and output layers in int8 (PyTorch dynamic "
        "quantization, CPU) (default: the checkpoint's; the presets say auto)",
    )


class DecodeKeywords(TypedDict):
    """The decoding options as ``Translator``'s and ``CoupletWriter``'s keyword arguments (None: the checkpoint's)."""

    beam: int | None
    precision: str | None
    length_penalty: float | None
    beam_stop: str | None


def decode_keywords(arguments: argparse.Namespace) -> DecodeKeywords:
    """--beam, --precision, --length-penalty and --beam-stop, for the Python API objects the commands call."""
    return DecodeKeywords(
        beam=arguments.beam,
        precision=arguments.precision,
        length_penalty=arguments.length_penalty,
        beam_stop=arguments.beam_stop,
    )


def input_lines(texts: Sequence[str], input_path: Path | None, purpose: str = "decode") -> list[str]:
    """The lines to ``purpose`` (a verb for messages): the positional texts, every line of --input, or stdin.

    An empty --input file or empty stdin is an error, not a silent no-op.
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
    # Bytes, decoded like a file, so that bad UTF-8 is reported with its line number
    # whatever the locale, and CRLF input gives the same lines as LF.
    lines = decode_lines(sys.stdin.buffer.read(), "stdin")
    if not lines:
        raise ValueError(f"stdin: expected at least one line to {purpose}, got none")
    return lines
