"""``--device``, shared by evaluate, translate, classify, couplet and serve: where the model runs."""

from __future__ import annotations

import argparse

import torch

from transformer_lab.devices import DEVICE_CHOICES, resolve_device

__all__ = ["add_device_argument", "device_of"]


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    # Kept as text here and resolved by the command (device_of) before it reads anything,
    # so that --help and a bad command line never ask CUDA anything.
    parser.add_argument(
        "--device",
        default="auto",
        metavar="{" + ",".join(DEVICE_CHOICES) + "}",
        help="where the model runs: auto (a CUDA GPU where present, else the CPU), cpu, cuda, or cuda:N "
        "(the GPU of index N) (default auto)",
    )


def device_of(arguments: argparse.Namespace) -> torch.device:
    """The parsed --device as a torch device; a device this machine lacks is a ValueError naming --device."""
    return resolve_device(arguments.device, name="--device")
