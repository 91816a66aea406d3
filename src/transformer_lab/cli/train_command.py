"""``transformer-lab train TASK --out DIR``: train a task with its preset, overridable with --set.

Also runs under ``torchrun`` (``torchrun --nproc-per-node 2 -m transformer_lab train ...``):
the Trainer trains with DistributedDataParallel and rank 0 alone prints.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from types import ModuleType

from transformer_lab.hardware import PRECISIONS
from transformer_lab.cli.overrides import add_override_arguments, resolved_config
from transformer_lab.tasks import classification, couplet, synthetic, translation
from transformer_lab.training import is_main_process, recover_interrupted_save

SYNTHETIC_TASKS = ("copy", "reverse", "sort")
REAL_DATA_TASKS = {"translation": translation, "couplet": couplet, "classification": classification}
TASKS = (*SYNTHETIC_TASKS, *REAL_DATA_TASKS)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("train", help=f"train a task: {', '.join(TASKS)}")
    parser.add_argument("task", choices=TASKS, help="which task to train")
    parser.add_argument("--out", type=Path, required=True, help="run folder for checkpoints and metrics.jsonl")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    parser.add_argument(
        "--data-dir", default=None, help="folder holding the dataset (default: $TRANSFORMER_LAB_DATA); real-data tasks only"
    )
    parser.add_argument(
        "--precision", choices=PRECISIONS, default=None,
        help="shorthand for --set train.precision=...: fp32, bf16 (autocast) or auto (bf16 where this machine runs it fast)",
    )
    add_override_arguments(parser)
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    out_dir: Path = arguments.out
    if not arguments.resume and out_dir.exists() and any(out_dir.iterdir()):
        raise ValueError(f"--out: {out_dir} already holds a run; pass --resume to continue it or choose a new folder")
    if arguments.resume:
        # A crash between a save's two renames leaves the complete old last/ aside.
        recover_interrupted_save(out_dir / "last")
    if arguments.resume and not (out_dir / "last").is_dir():
        raise FileNotFoundError(f"--resume: expected a checkpoint folder {out_dir / 'last'}, found none")
    if arguments.precision is not None:
        # Applied before the --set overrides, which therefore win if both are given.
        arguments.overrides = [f"train.precision={arguments.precision}", *arguments.overrides]
    if arguments.task in REAL_DATA_TASKS:
        return _train_real_data(REAL_DATA_TASKS[arguments.task], arguments, out_dir)
    config = resolved_config(synthetic.default_config(arguments.task), arguments)
    result = synthetic.train(config, out_dir, resume=arguments.resume)
    if not is_main_process():
        return 0  # under torchrun rank 0 reports (the weights are the same on every rank)
    greedy_config = dataclasses.replace(config.decode, strategy="greedy")
    greedy = synthetic.exact_match(result.model.eval(), result.data.test, greedy_config)
    print(json.dumps(result.summary, indent=2, default=str))
    print(f"exact match on {len(result.data.test)} held-out sequences (greedy): {greedy:.1%}")
    return 0


def _train_real_data(task: ModuleType, arguments: argparse.Namespace, out_dir: Path) -> int:
    """Train a task that reads a dataset folder (translation, couplet, classification): its preset, --data-dir, --set."""
    config = task.default_config()
    if arguments.data_dir is not None:
        config = dataclasses.replace(config, data=dataclasses.replace(config.data, data_dir=str(arguments.data_dir)))
    config = resolved_config(config, arguments)
    result = task.train(config, out_dir, resume=arguments.resume)
    if not is_main_process():
        return 0
    print(json.dumps(result.summary, indent=2, default=str))
    return 0

