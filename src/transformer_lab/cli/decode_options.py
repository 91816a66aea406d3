"""Options shared by the commands that decode text (translate, couplet, evaluate): --beam, the input lines."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

from transformer_lab.data import read_lines
from transformer_lab.decoding import DecodeConfig


def add_beam_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--beam", type=int, default=None, help="beam size (1 = greedy; default: the checkpoint's)")


def with_beam(decode_config: DecodeConfig, beam: int | None) -> DecodeConfig:
    """The checkpoint's decoding with the search --beam asks for (None keeps it; 1 is greedy)."""
    if beam is None:
        return decode_config
    if beam < 1:
        raise ValueError(f"--beam must be >= 1, got {beam}")
    return dataclasses.replace(
        decode_config, strategy="greedy" if beam == 1 else "beam", beam_size=beam, num_return=1
    )


def search_name(decode_config: DecodeConfig) -> str:
    """"greedy" or "beam K", for reports and file names."""
    return "greedy" if decode_config.strategy == "greedy" else f"beam {decode_config.beam_size}"


def input_lines(texts: Sequence[str], input_path: Path | None) -> list[str]:
    """The lines to decode: the positional texts, or every line of --input, or stdin."""
    if input_path is not None and texts:
        raise ValueError("expected either text arguments or --input, got both")
    if input_path is not None:
        return read_lines(input_path)
    if texts:
        return list(texts)
    return [line.rstrip("\n") for line in sys.stdin]
