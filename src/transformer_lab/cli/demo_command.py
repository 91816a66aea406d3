"""``transformer-lab demo``: train the copy task and show what the model does (``make demo``)."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from transformer_lab.cli.bounds import path_of
from transformer_lab.cli.overrides import add_override_arguments, resolved_config
from transformer_lab.lab.demo import run_demo
from transformer_lab.tasks.synthetic import train as synthetic_train
from transformer_lab.training import TrainingInterrupted


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="train a small model on the copy task and decode unseen sequences")
    parser.add_argument("--out", type=path_of, default=None, help="run folder (default runs/demo-<time>, never reused)")
    add_override_arguments(parser)
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    out_dir = arguments.out or Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ValueError(f"--out: expected a new or empty folder, got {out_dir} which already holds files")
    config, _ = resolved_config(synthetic_train.default_config("copy"), arguments)
    print(
        f"Training on the copy task (vocabulary {config.data.vocab_size}, lengths {config.data.min_length}-"
        f"{config.data.max_length}, {config.data.num_train} sequences per epoch) into {out_dir}"
    )
    try:
        report = run_demo(out_dir, config)
    except TrainingInterrupted as interrupted:
        # The demo has no --resume; train copy continues its run (a copy-task run like any other).
        resume = shlex.join(
            ["transformer-lab", "train", "copy", "--out", str(out_dir), "--resume"]
            + [part for override in arguments.overrides for part in ("--set", override)]
        )
        raise TrainingInterrupted(
            interrupted.signal_number,
            interrupted.step,
            interrupted.folder,
            f"`{resume}` trains it on (the demo itself starts anew each time)",
        ) from None
    summary = report.train_summary
    print(
        f"\nTrained {summary['steps']} steps in {summary['wall_seconds']:.0f} s; "
        f"final training loss {summary['final_train_loss']:.3f}\n"
    )
    print(f"{'source':<32} {'greedy':<32} beam")
    for example in report.examples:
        print(
            f"{' '.join(map(str, example.source)):<32} "
            f"{' '.join(map(str, example.greedy)):<32} "
            f"{' '.join(map(str, example.beam))}"
        )
    print(
        f"\nExact match on {report.num_test} sequences never seen in training: "
        f"greedy {report.greedy_exact_match:.1%}, beam {report.beam_exact_match:.1%}"
    )
    if report.attention_png is not None:
        print(f"Cross-attention heat map: {report.attention_png}")
    else:
        print(f"Cross-attention heat map: not drawn: {report.attention_missing}", file=sys.stderr)
    return 0
