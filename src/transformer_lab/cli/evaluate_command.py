"""``transformer-lab evaluate TASK --checkpoint DIR``: score a checkpoint on a held-out split.

The command offers the tasks that have an evaluation (``Task.evaluate``), turns its
options into `EvaluationOptions`, prints the report's lines and records its scores in the
checkpoint's model card. What each task scores, and how, is its own (``tasks/*/evaluate.py``),
and so are the options only it reads (``Task.evaluation_options``), which are added here
in a loop over the tasks and handed back by flag.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from transformer_lab.cli.bounds import file_path_of, path_of
from transformer_lab.cli.decode_options import add_precision_argument
from transformer_lab.cli.device_option import add_device_argument, device_of
from transformer_lab.cli.task_options import add_task_options, given_options
from transformer_lab.data.dataset_folder import DatasetMissingError
from transformer_lab.extras import MissingExtraError
from transformer_lab.folders import described_refusal
from transformer_lab.tasks.evaluation import ConfusionFigure, EvaluationOptions, TaskOption
from transformer_lab.tasks.registry import TASKS, evaluate, tasks_evaluating
from transformer_lab.training.checkpoint import resolve_checkpoint
from transformer_lab.training.model_card import CARD_FILE, add_test_scores


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("evaluate", help="score a checkpoint on a test split")
    default_splits = {name: TASKS[name].evaluation_split for name in tasks_evaluating()}
    parser.add_argument("task", choices=tuple(default_splits), help="which task")
    parser.add_argument(
        "--checkpoint", type=path_of, required=True, help="checkpoint folder, or a run folder (its best/, else last/)"
    )
    parser.add_argument(
        "--split",
        default=None,
        help=f"split to score (default: {', '.join(f'{k} {v}' for k, v in default_splits.items())})",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help=(
            "folder holding the dataset (default: the one the checkpoint's config.json recorded, else "
            "$TRANSFORMER_LAB_DATA, else the folder `download` fills)"
        ),
    )
    parser.add_argument(
        "--output",
        type=file_path_of,
        default=None,
        help="the task's output file (its hypotheses or its JSON report; some tasks write more beside it, "
        "as NAME.samples.md); default: beside the checkpoint",
    )
    add_precision_argument(parser)
    add_device_argument(parser)
    # The options only some tasks read, as the tasks declare them; the help names who reads each.
    declared: dict[str, tuple[TaskOption, list[str]]] = {}
    for name in tasks_evaluating():
        for option in TASKS[name].evaluation_options:
            first, readers = declared.setdefault(option.flag, (option, []))
            if option != first:
                raise ValueError(f"task {name!r}: {option.flag}: expected the declaration of the {readers[0]} task")
            readers.append(name)
    task_options = {}
    for option, readers in declared.values():
        task_options.update(add_task_options(parser, [option], prefix=f"{', '.join(readers)}: "))
    parser.set_defaults(handler=run, task_options=task_options)


def run(arguments: argparse.Namespace) -> int:
    options = EvaluationOptions(
        device=device_of(arguments),
        data_dir=arguments.data_dir,
        output=arguments.output,
        precision=arguments.precision,
        # Only the options given: a task refuses those it does not read.
        task_options=given_options(arguments, arguments.task_options),
    )
    checkpoint = resolve_checkpoint(arguments.checkpoint, "--checkpoint")  # named as typed, after --device
    try:
        report = evaluate(arguments.task, checkpoint, arguments.split, options)
    except DatasetMissingError as error:  # --data-dir, else the folder the checkpoint's config.json recorded
        given = arguments.data_dir is not None
        raise error.named("--data-dir" if given else "the checkpoint's data.data_dir") from None
    for line in report.lines:
        print(line)
    if report.confusion is not None:
        if report.replaced and report.confusion.path.parent == checkpoint:
            print(f"confusion matrix: not drawn ({checkpoint} was replaced by other weights while this evaluation ran)")
        else:
            _draw_confusion(report.confusion)
    if report.replaced:
        # A run saving into it (best/, last/) replaced the folder while the split was decoded: its card
        # describes other weights than those scored.
        print(f"model card: not updated ({checkpoint} was replaced by other weights while this evaluation ran)")
    elif report.unrecorded is None:
        _record_in_card(report.checkpoint, report.name, report.search, report.scores, report.dataset)
    else:
        print(f"model card: not updated ({report.unrecorded})")
    return 0


def _draw_confusion(figure: ConfusionFigure) -> None:
    """Draw the report's confusion matrix: a side output, so a missing plots extra or a refused write is one line."""
    try:
        # Drawing needs matplotlib (the plots extra), loaded only when a report has a figure.
        from transformer_lab.lab.result_plots import plot_confusion_matrix
    except MissingExtraError as error:  # the core install evaluates; the scores and the card stand
        print(f"confusion matrix: not drawn: {error}", file=sys.stderr)
        return
    try:
        picture = plot_confusion_matrix(figure.path, figure.matrix, figure.class_names, title=figure.title)
        print(f"confusion matrix: {picture}")
    except OSError as error:
        # A side output: the scores are printed already, and the card still takes them.
        print(f"confusion matrix: not written: {described_refusal(error, figure.path)}", file=sys.stderr)


def _record_in_card(checkpoint: Path, split: str, search: str, scores: dict[str, float], dataset: str | None) -> None:
    """Add the scores to the checkpoint's model card (README.md), if it has one."""
    try:
        card = add_test_scores(checkpoint, split, search, scores, dataset)
    except FileNotFoundError:
        print(f"model card: none in {checkpoint} (a checkpoint written before cards); scores not recorded")
        return
    except ValueError as error:
        # The scores are printed already; a card edited out of shape is a side output's
        # fault, named in one line and left as it was, not a failed evaluation.
        print(f"model card: not updated: {' '.join(str(error).split())}", file=sys.stderr)
        return
    except OSError as error:  # a read-only or full disk: the same, the card left as it was
        print(f"model card: not updated: {described_refusal(error, checkpoint / CARD_FILE)}", file=sys.stderr)
        return
    print(f"model card: {card}")
