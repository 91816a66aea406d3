"""``transformer-lab export --checkpoint runs/NAME/best --format ctranslate2|onnx --out DIR``.

``ctranslate2``: a translation or couplet checkpoint as a CTranslate2 model directory, for
serving with ``ctranslate2.Translator`` (see :mod:`transformer_lab.export.ctranslate2`).
``onnx``: a translation or couplet checkpoint as ``encoder.onnx`` and a one-step
``decoder.onnx`` with the key/value cache as inputs and outputs, a classification
checkpoint as ``classifier.onnx``, for onnxruntime (see :mod:`transformer_lab.export.onnx`).
Each needs its optional packages (``pip install -e ".[deploy]"``); without them
the command fails with exit code 1 and says how to install them.
"""

from __future__ import annotations

import argparse

from transformer_lab.cli.bounds import path_of
from transformer_lab.export import ctranslate2 as ctranslate2_export
from transformer_lab.export import onnx as onnx_export
from transformer_lab.folders import check_folder_output
from transformer_lab.tasks.registry import checkpoint_task, tasks_offering
from transformer_lab.training.checkpoint import load_checkpoint_config, resolve_checkpoint, trained_task_name
from transformer_lab.training.run.run_folder import check_output_outside_saves

FORMATS = ("ctranslate2", "onnx")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export",
        help="write a checkpoint in another engine's format (CTranslate2: "
        f"{', '.join(tasks_offering('ctranslate2'))}; ONNX: {', '.join(tasks_offering('onnx'))})",
    )
    parser.add_argument(
        "--checkpoint", type=path_of, required=True, help="checkpoint folder (e.g. runs/NAME/best) or run folder"
    )
    parser.add_argument("--format", choices=FORMATS, required=True, help="the target format: ctranslate2 or onnx")
    parser.add_argument("--out", type=path_of, required=True, help="folder for the exported model (must not exist)")
    parser.add_argument(
        "--quantization",
        choices=ctranslate2_export.QUANTIZATIONS,
        default=None,
        help="ctranslate2 only: store the weights in this type (default: float32; a float32 export can still run "
        "as int8 with Translator(..., compute_type='int8'))",
    )
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    # Before the model is read: a link is never followed, a file on the way is named (not a lock's mkdir failing).
    check_folder_output(arguments.out, "--out")
    if arguments.out.exists():
        raise ValueError(f"--out: expected a new folder, got {arguments.out} which exists")
    check_output_outside_saves("--out", arguments.out)
    if arguments.format not in FORMATS:
        raise ValueError(f"--format: expected one of {list(FORMATS)}, got {arguments.format!r}")
    if arguments.quantization is not None and arguments.format != "ctranslate2":
        raise ValueError(
            f"--quantization: expected only with --format ctranslate2, got {arguments.quantization!r} "
            f"with --format {arguments.format} (the ONNX graphs are float32)"
        )
    arguments.checkpoint = resolve_checkpoint(arguments.checkpoint, "--checkpoint")
    task = checkpoint_task(arguments.checkpoint)
    exported = sorted(tasks_offering(arguments.format))
    if task not in exported:  # said by the option that asks, before any engine is imported
        # As trained ("copy"), not as stored ("synthetic", no command the user typed).
        trained = trained_task_name(load_checkpoint_config(arguments.checkpoint))
        raise ValueError(
            f"--format {arguments.format}: expected a checkpoint of a task it exports ({' or '.join(exported)}), "
            f"got the {trained} checkpoint {arguments.checkpoint}"
        )
    # A missing engine is a MissingExtraError: the CLI's one line and exit 1.
    if arguments.format == "onnx":
        out_dir = onnx_export.export_checkpoint(arguments.checkpoint, arguments.out)
        engine = f"ONNX, opset {onnx_export.OPSET_VERSION}, float32"
    else:
        out_dir = ctranslate2_export.export_checkpoint(arguments.checkpoint, arguments.out, arguments.quantization)
        engine = f"CTranslate2, {arguments.quantization or 'float32'} weights"
    files = ", ".join(sorted(path.name for path in out_dir.iterdir()))
    print(f"exported the {task} checkpoint {arguments.checkpoint} to {out_dir} ({engine}: {files})")
    return 0
