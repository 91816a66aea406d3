"""``transformer-lab average-checkpoints --run runs/NAME --last 10 --out runs/NAME/averaged`` (or ``--best 5``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from torch import nn

from transformer_lab.cli.bounds import path_of
from transformer_lab.folders import check_folder_output
from transformer_lab.tasks.registry import load_trained
from transformer_lab.training import CONFIG_FILE, MODEL_FILE, average_checkpoints
from transformer_lab.training.run.best_steps import best_steps
from transformer_lab.training.run.run_folder import (
    METRICS_FILE,
    check_output_outside_saves,
    step_checkpoints,
    step_folder_name,
)
from transformer_lab.training.run.run_lock import folder_holder

DEFAULT_LAST = 10  # the translation preset's train.keep_last


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "average-checkpoints", help="average the weights of a run's last N (or N best) step checkpoints"
    )
    parser.add_argument("--run", type=path_of, required=True, help="run folder holding step-NNNNNN/ checkpoints")
    parser.add_argument(
        "--last", type=int, default=None, help=f"how many of the newest step checkpoints (default {DEFAULT_LAST})"
    )
    parser.add_argument(
        "--best",
        type=int,
        default=None,
        help="instead of the newest: how many of the step checkpoints whose validation scored best "
        "(the run's train.best_metric, as best/ is chosen)",
    )
    parser.add_argument(
        "--out", type=path_of, required=True, help="folder for the averaged checkpoint (must not exist)"
    )
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    if arguments.best is not None and arguments.last is not None:
        raise ValueError(
            f"--best and --last: expected one of them, got both (--best {arguments.best}, --last {arguments.last})"
        )
    option = "--best" if arguments.best is not None else "--last"
    last = arguments.best if arguments.best is not None else DEFAULT_LAST if arguments.last is None else arguments.last
    if last < 1:
        raise ValueError(f"{option}: expected at least 1, got {last}")
    check_folder_output(arguments.out, "--out")
    if arguments.out.exists():
        holder = folder_holder(arguments.out)
        if holder is not None:
            raise ValueError(f"--out: {arguments.out} is being trained by {holder}; choose a new folder")
        raise ValueError(f"--out: expected a new folder, got {arguments.out} which exists")
    check_output_outside_saves("--out", arguments.out)
    if not arguments.run.is_dir():
        what = "is a file" if arguments.run.exists() else "does not exist"
        raise FileNotFoundError(f"--run: expected a run folder, got {arguments.run}, which {what}")
    if (arguments.run / CONFIG_FILE).is_file():
        # One checkpoint (best/, last/, a step-NNNNNN/): its own folder holds no steps to average.
        parent = arguments.run.resolve().parent
        named = f" ({parent})" if (parent / METRICS_FILE).is_file() else ""
        raise ValueError(
            f"--run: expected a run folder (holding best/, last/ and step-NNNNNN/ checkpoints), got {arguments.run}, "
            f"which is a checkpoint folder; give the run folder that holds it{named}"
        )
    steps = step_checkpoints(arguments.run)
    _check_one_folder_a_step(steps)
    # A step folder that a crash left incomplete (before saves and pruning were atomic) is
    # skipped, by name, rather than failing the whole average.
    incomplete = [path for _, path in steps if not all((path / name).is_file() for name in (MODEL_FILE, CONFIG_FILE))]
    steps = [(step, path) for step, path in steps if path not in incomplete]
    if steps or _is_run_folder(arguments.run):
        for path in incomplete:
            if path.is_dir():  # one gone since the listing was pruned by a run still training: not incomplete
                print(f"skipping {path}: not a complete checkpoint (no {MODEL_FILE} or {CONFIG_FILE})", file=sys.stderr)
    if not steps and not _is_run_folder(arguments.run):
        # No run at all (an empty folder, the folder of several runs): keep_last is no reason to give.
        runs = sorted(path.name for path in arguments.run.iterdir() if _is_run_folder(path))
        inside = f"; it holds the run folder(s) {', '.join(runs[:5])}{', ...' if len(runs) > 5 else ''}" if runs else ""
        raise ValueError(
            f"--run: expected a run folder (holding {METRICS_FILE}, best/, last/ and step-NNNNNN/ checkpoints), "
            f"got {arguments.run}, which holds none of them{inside}"
        )
    if not steps:
        # A run trained with train.keep_last=0 keeps only last/ and best/: nothing to average.
        raise ValueError(
            f"--run: expected step-NNNNNN checkpoints to average in {arguments.run}, found none "
            "(the run kept none: train.keep_last was 0, or it has not reached a checkpoint yet)"
        )
    if len(steps) < last:
        given = "" if arguments.last is not None or arguments.best is not None else " (the default: give --last N)"
        raise ValueError(
            f"{option}: expected at most the {len(steps)} step checkpoints in {arguments.run}, got {last}{given}"
        )
    chosen = best_steps(arguments.run, steps, last, option) if arguments.best is not None else None
    sources = [path for _, path in steps[-last:]] if chosen is None else [scored.folder for scored in chosen]
    # The container is built from the newest checkpoint once the sources pass their checks:
    # loading refused weights would warn about them first.
    try:
        average_checkpoints(sources, arguments.out, lambda: _container_model(sources[-1]))
    except (ValueError, OSError):
        # A run still training prunes its oldest step folders as it saves: one listed above
        # may be gone by the time it is read, which the reader would call a missing file.
        gone = next((path for path in sources if not path.is_dir()), None)
        if gone is None:
            raise
        raise CheckpointGoneError(_gone_while_read(arguments.run, gone)) from None
    first, newest = sources[0].name, sources[-1].name
    named = first if len(sources) == 1 else f"{len(sources)} checkpoints ({first} .. {newest})"
    if chosen is not None:
        scores = ", ".join(f"{scored.folder.name} {scored.value:.4g}" for scored in chosen)
        named = f"the {len(chosen)} best of {len(steps)} step checkpoints by validation ({scores})"
    print(f"averaged {named} into {arguments.out}")
    return 0


def _check_one_folder_a_step(steps: list[tuple[int, Path]]) -> None:
    """Refuse two folders of one step (``step-4/`` beside ``step-000004/``): averaged twice, it would count double."""
    for (step, first), (next_step, second) in zip(steps, steps[1:]):
        if step == next_step:
            raise ValueError(
                f"--run: expected one checkpoint folder a step, got {first.name} and {second.name}, both of step "
                f"{step} (training writes {step_folder_name(step)}); move the other one out of {first.parent}"
            )


class CheckpointGoneError(OSError):
    """A step checkpoint was deleted while it was being averaged: a correct command, a run moving under it."""


def _gone_while_read(run: Path, gone: Path) -> str:
    """Say which step checkpoint went away while it was read, and what most likely deleted it."""
    holder = folder_holder(run)
    if holder is None:
        return f"--run: {gone} was deleted while it was read, by another process; nothing was written: run it again"
    return (
        f"--run: {gone} was deleted while it was read: {run} is still training ({holder}) and deletes its "
        "step checkpoints past train.keep_last as it saves; nothing was written: run it again, or once the run ends"
    )


def _is_run_folder(folder: Path) -> bool:
    """Whether ``folder`` looks like what ``train --out`` writes: its log, or a best/ or last/ checkpoint."""
    checkpoints = (folder / name / CONFIG_FILE for name in ("best", "last"))
    return (folder / METRICS_FILE).is_file() or any(path.is_file() for path in checkpoints)


def _container_model(checkpoint: Path) -> nn.Module:
    """The model the averaged weights are loaded into: the newest checkpoint's, rebuilt by its task."""
    try:
        return load_trained(checkpoint).model
    except ValueError as error:
        raise ValueError(f"--run: {error}") from None
