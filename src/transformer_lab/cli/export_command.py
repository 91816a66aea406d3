"""``transformer-lab export --checkpoint runs/NAME/best --format ctranslate2 --out DIR``.

Writes a translation or couplet checkpoint as a CTranslate2 model directory, for serving
with ``ctranslate2.Translator`` (see :mod:`transformer_lab.export.ctranslate2`). Needs the
optional ``ctranslate2`` package (``pip install 'transformer-lab[deploy]'``); without it
the command fails with exit code 1 and says how to install it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from transformer_lab.export import ctranslate2 as ctranslate2_export
from transformer_lab.tasks.registry import checkpoint_task

FORMATS = ("ctranslate2",)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export", help="write a translation or couplet checkpoint in another engine's format (CTranslate2)"
    )
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint folder (e.g. runs/NAME/best) or run folder")
    parser.add_argument("--format", choices=FORMATS, required=True, help="the target format: ctranslate2")
    parser.add_argument("--out", type=Path, required=True, help="folder for the exported model (must not exist)")
    parser.add_argument(
        "--quantization", choices=ctranslate2_export.QUANTIZATIONS, default=None,
        help="store the weights in this type (default: float32; a float32 export can still run as int8 with "
        "Translator(..., compute_type='int8'))",
    )
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    if arguments.out.exists():
        raise ValueError(f"--out: expected a new folder, got {arguments.out} which exists")
    task = checkpoint_task(arguments.checkpoint)
    try:
        out_dir = ctranslate2_export.export_checkpoint(arguments.checkpoint, arguments.out, arguments.quantization)
    except ImportError as error:
        # A missing optional package is neither bad input nor a bug: one line, exit 1.
        print(f"transformer-lab export: failed: {error}", file=sys.stderr)
        return 1
    files = ", ".join(sorted(path.name for path in out_dir.iterdir()))
    weights = arguments.quantization or "float32"
    print(f"exported the {task} checkpoint {arguments.checkpoint} to {out_dir} (CTranslate2, {weights} weights: {files})")
    return 0
