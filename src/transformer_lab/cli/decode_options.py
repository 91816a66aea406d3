"""Options shared by translate, couplet and evaluate: --beam, --precision, --length-penalty, --beam-stop, inputs."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

from torch import nn

from transformer_lab.data import decode_lines, read_lines
from transformer_lab.decoding import DecodeConfig, with_precision
from transformer_lab.decoding.beam import BEAM_STOPS
from transformer_lab.hardware import INFERENCE_PRECISIONS, resolve_inference_precision


def add_decode_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--beam", type=int, default=None, help="beam size (1 = greedy; default: the checkpoint's)")
    parser.add_argument(
        "--precision",
        choices=DECODE_PRECISIONS,
        default=None,
        help="bf16: decode with a bf16 copy of the model, faster from about 8 rows (batch x beam) on CPUs with "
        "bf16 instructions; auto: bf16 where this "
        "machine runs it fast, else fp32; int8: the feed-forward and output layers in int8 (PyTorch dynamic "
        "quantization, CPU) (default: the checkpoint's; the presets say auto)",
    )
    parser.add_argument(
        "--length-penalty",
        type=float,
        default=None,
        help="beam search's GNMT length penalty alpha (0 = none; default: the checkpoint's)",
    )
    parser.add_argument(
        "--beam-stop",
        choices=BEAM_STOPS,
        default=None,
        help="when beam search stops a sentence: exact (once its best can no longer change) or finished "
        "(once beam-size hypotheses have ended, as fairseq and CTranslate2 do: fewer steps) "
        "(default: the checkpoint's)",
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


# int8 is not an autocast precision but a converted copy of the model (models.quantization).
DECODE_PRECISIONS = INFERENCE_PRECISIONS


def command_precision(arguments: argparse.Namespace, default: str, model: nn.Module, *, int8: bool = True) -> str:
    """The precision a command runs ``model`` at: --precision, else ``default``, resolved once on the model's device.

    "fp32", "bf16" or "int8" (``hardware.resolve_inference_precision``; ``int8`` False
    refuses it, as for a classifier); the model to decode with (``decoding.decoding_model``),
    the decoding config (:func:`with_decode_arguments`) and the report's name
    (:func:`search_name`) all take this one value. ``default`` is the checkpoint's decoding
    precision, or the classifier commands' "auto".
    """
    parameter = next(model.parameters(), None)
    device = parameter.device if parameter is not None else "cpu"
    return resolve_inference_precision(arguments.precision, default, device, name="--precision", int8=int8)


def with_decode_arguments(
    decode_config: DecodeConfig, arguments: argparse.Namespace, precision: str | None = None
) -> DecodeConfig:
    """The checkpoint's decoding with --beam, --length-penalty, --beam-stop and the precision applied (None keeps it).

    ``precision`` is :func:`command_precision`'s (None: --precision as given, when given);
    "int8" decodes in fp32 arithmetic around the int8 layers of its model copy.
    """
    decode_config = with_beam(decode_config, arguments.beam)
    if precision is None:
        precision = arguments.precision
    if precision is not None:
        decode_config = with_precision(decode_config, precision)
    if arguments.length_penalty is not None:
        # DecodeConfig checks the value and names the field.
        decode_config = dataclasses.replace(decode_config, length_penalty=arguments.length_penalty)
    if arguments.beam_stop is not None:
        decode_config = dataclasses.replace(decode_config, beam_stop=arguments.beam_stop)
    return decode_config


def with_beam(decode_config: DecodeConfig, beam: int | None) -> DecodeConfig:
    """The checkpoint's decoding with the search --beam asks for (None keeps it; 1 is greedy)."""
    if beam is None:
        return decode_config
    if beam < 1:
        raise ValueError(f"--beam must be >= 1, got {beam}")
    return dataclasses.replace(decode_config, strategy="greedy" if beam == 1 else "beam", beam_size=beam, num_return=1)


def search_name(decode_config: DecodeConfig, precision: str) -> str:
    """The search's name for reports and file names: "greedy" or "beam K", then " bf16" or " int8" where not fp32.

    ``precision`` is :func:`command_precision`'s, already resolved.
    """
    name = "greedy" if decode_config.strategy == "greedy" else f"beam {decode_config.beam_size}"
    return name if precision == "fp32" else f"{name} {precision}"


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
