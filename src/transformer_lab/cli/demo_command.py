"""``transformer-lab demo``: train the copy task and show what the model does (``make demo``)."""

from __future__ import annotations

import argparse
import itertools
import shlex
import sys
import time
from pathlib import Path

from transformer_lab.cli.bounds import path_of
from transformer_lab.cli.overrides import add_override_arguments, resolved_config
from transformer_lab.folders import check_folder_output, writes_refused_as
from transformer_lab.lab.demo import run_demo
from transformer_lab.tasks.synthetic import train as synthetic_train
from transformer_lab.training import TrainingInterrupted
from transformer_lab.training.run.run_folder import check_output_outside_saves
from transformer_lab.training.run.run_lock import RunFolderLock


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="train a small model on the copy task and decode unseen sequences")
    parser.add_argument("--out", type=path_of, default=None, help="run folder (default runs/demo-<time>, never reused)")
    add_override_arguments(parser)
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    config, _ = resolved_config(synthetic_train.default_config("copy"), arguments)
    if arguments.out is None:
        out_dir, made_for_the_run = _new_default_folder(), True
    else:
        out_dir, made_for_the_run = arguments.out, False
        check_folder_output(out_dir, "--out")  # a link, a file in the way or "new/..", before any folder is made
        check_output_outside_saves("--out", out_dir)
        if out_dir.exists() and not out_dir.is_dir():
            raise ValueError(f"--out: expected a new or empty folder, got {out_dir}, which is a file")
        if out_dir.is_dir() and any(out_dir.iterdir()):
            raise ValueError(f"--out: expected a new or empty folder, got {out_dir} which already holds files")
    # Held as train holds its folder: a second demo or a train there is refused, and a folder the
    # system refuses to write is one line naming it.
    with RunFolderLock(out_dir, made_for_the_run=made_for_the_run):
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


def _new_default_folder() -> Path:
    """Make runs/demo-<time> under the current folder, or -2, -3, ... after it where a demo started that second.

    Made at once and exclusively, so that two demos started together never share a folder.
    """
    base = Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")
    outcome = "nothing of it was kept; --out names a folder elsewhere"
    for number in itertools.count(1):
        folder = base if number == 1 else base.with_name(f"{base.name}-{number}")
        with writes_refused_as(folder, outcome, permission=True):
            try:
                folder.mkdir(parents=True)
                return folder
            except FileExistsError:
                continue
    raise AssertionError("itertools.count never ends")
