"""``transformer-lab evaluate TASK --checkpoint DIR``: score a checkpoint on a held-out split.

The command offers the tasks that have an evaluation (``Task.evaluate``), turns its
options into `EvaluationOptions`, prints the report's lines and records its scores in the
checkpoint's model card. What each task scores, and how, is its own (``tasks/*/evaluate.py``):
BLEU and chrF++ for translation, character BLEU and the couplet's form for couplets,
accuracy, per-class F1 and the confusion matrix for classification.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from transformer_lab.cli.couplet_options import add_constraint_arguments
from transformer_lab.cli.decode_options import add_decode_arguments
from transformer_lab.cli.device_option import add_device_argument, device_of
from transformer_lab.data import LABELLED_TEXT_FORMATS
from transformer_lab.evaluation import BLEU_FLAVOURS
from transformer_lab.folders import describe_os_error
from transformer_lab.tasks.evaluation import EvaluationOptions
from transformer_lab.tasks.registry import TASKS, evaluate, tasks_evaluating
from transformer_lab.training.model_card import CARD_FILE, add_test_scores

# sacreBLEU's tokenizers (ja-mecab and ko-mecab need sacrebleu's extras).
BLEU_TOKENIZERS = ("13a", "intl", "zh", "char", "ja-mecab", "ko-mecab", "flores101", "flores200", "none")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("evaluate", help="score a checkpoint on a test split")
    default_splits = {name: TASKS[name].evaluation_split for name in tasks_evaluating()}
    parser.add_argument("task", choices=tuple(default_splits), help="which task")
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint folder")
    parser.add_argument(
        "--split",
        default=None,
        help=f"split to score (default: {', '.join(f'{k} {v}' for k, v in default_splits.items())})",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="folder holding the dataset (default: $TRANSFORMER_LAB_DATA, else the folder `download` fills)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="the hypotheses file (classification: the JSON report; couplet: its samples table goes beside it "
        "as NAME.samples.md); default: beside the checkpoint",
    )
    add_decode_arguments(parser)
    add_device_argument(parser)
    # Every option added from here on is one task's (or a few tasks'): passed by its flag.
    shared = {action.dest for action in parser._actions}
    add_constraint_arguments(parser, prefix="couplet: ")
    # translation: score any test set
    parser.add_argument(
        "--source",
        type=Path,
        default=None,
        metavar="FILE",
        help="translation: score the translations of this file's lines (with --reference) instead of a --split",
    )
    parser.add_argument(
        "--reference", type=Path, default=None, metavar="FILE", help="translation: the reference of each --source line"
    )
    parser.add_argument(
        "--bleu-tokenize",
        choices=BLEU_TOKENIZERS,
        default=None,
        help="translation: sacreBLEU's tokenizer (default: zh for a Chinese target, ja-mecab (else char) for "
        "Japanese, 13a otherwise)",
    )
    parser.add_argument(
        "--bleu-flavour",
        choices=BLEU_FLAVOURS,
        default=None,
        help="translation: which BLEU to report (default: sacrebleu, cased 13a as sacreBLEU scores; papers: "
        "lowercased and Moses-tokenized, as the Multi30k papers report, needs the moses extra)",
    )
    parser.add_argument(
        "--confusion-png",
        type=Path,
        default=None,
        help="classification: where to draw the confusion matrix (default: beside the checkpoint)",
    )
    parser.add_argument(
        "--skip-malformed",
        action="store_true",
        help="classification: skip malformed CSV lines (counted) instead of failing",
    )
    # classification: score any labelled file
    parser.add_argument(
        "--test",
        type=Path,
        default=None,
        metavar="FILE",
        help="classification: score this labelled CSV / TSV / JSON Lines file instead of a --split",
    )
    parser.add_argument(
        "--text-field",
        dest="text_fields",
        action="append",
        default=None,
        metavar="NAME",
        help="classification with --test: a text field (repeatable, joined by a line break; default: the checkpoint's)",
    )
    parser.add_argument(
        "--label-field",
        default=None,
        metavar="NAME",
        help="classification with --test: the label field (default: the checkpoint's)",
    )
    parser.add_argument(
        "--file-format",
        choices=LABELLED_TEXT_FORMATS,
        default=None,
        help="classification with --test: the file's format (default: the checkpoint's, else from the suffix)",
    )
    task_options = {action.dest: action.option_strings[0] for action in parser._actions if action.dest not in shared}
    parser.set_defaults(handler=run, task_options=task_options)


def run(arguments: argparse.Namespace) -> int:
    options = EvaluationOptions(
        device=device_of(arguments),
        data_dir=arguments.data_dir,
        output=arguments.output,
        precision=arguments.precision,
        beam=arguments.beam,
        length_penalty=arguments.length_penalty,
        beam_stop=arguments.beam_stop,
        # Only the options given: a task refuses those it does not read.
        task_options={
            flag: getattr(arguments, destination)
            for destination, flag in arguments.task_options.items()
            if getattr(arguments, destination) not in (None, False)
        },
    )
    report = evaluate(arguments.task, arguments.checkpoint, arguments.split, options)
    for line in report.lines:
        print(line)
    if report.confusion is not None:
        # Drawing needs matplotlib (the plots extra), loaded only when a report has a figure.
        from transformer_lab.lab.result_plots import plot_confusion_matrix

        figure = report.confusion
        try:
            picture = plot_confusion_matrix(figure.path, figure.matrix, figure.class_names, title=figure.title)
            print(f"confusion matrix: {picture}")
        except OSError as error:
            # A side output: the scores are printed already, and the card still takes them.
            print(f"confusion matrix: not written: {_refused(error, figure.path)}", file=sys.stderr)
    _record_in_card(report.checkpoint, report.name, report.search, report.scores)
    return 0


def _refused(error: OSError, where: object) -> str:
    """A write the system refused, in a few words: "could not write 'PATH' (Read-only file system, EROFS)"."""
    return f"could not write {str(where)!r} ({describe_os_error(error)})"


def _record_in_card(checkpoint: Path, split: str, search: str, scores: dict[str, float]) -> None:
    """Add the scores to the checkpoint's model card (README.md), if it has one."""
    try:
        card = add_test_scores(checkpoint, split, search, scores)
    except FileNotFoundError:
        print(f"model card: none in {checkpoint} (a checkpoint written before cards); scores not recorded")
        return
    except ValueError as error:
        # The scores are printed already; a card edited out of shape is a side output's
        # fault, named in one line and left as it was, not a failed evaluation.
        print(f"model card: not updated: {' '.join(str(error).split())}", file=sys.stderr)
        return
    except OSError as error:  # a read-only or full disk: the same, the card left as it was
        print(f"model card: not updated: {_refused(error, checkpoint / CARD_FILE)}", file=sys.stderr)
        return
    print(f"model card: {card}")
