"""``transformer-lab prepare translation|couplet|classification --out DIR``: a corpus prepared once into a token store.

Translation: the files (``--train``) are read in bounded chunks (strictly: a bad line is
one error naming its file and line), the BPE is learned from a seeded sample (or ``--set
data.tokenizer_file=...`` is used). Couplets and classification: the files, or without
``--train`` the preset's data in the data folder, are read by the task's rules (its
filters, its validation split) and the vocabulary or BPE is built. Either way the ids are
written to memory-mapped arrays in DIR with the tokenizer or vocabulary, the validation
rows and a manifest; ``transformer-lab train TASK --prepared DIR`` then starts in
seconds, with memory that does not grow with the corpus. ``--init-from CHECKPOINT`` makes
the ids with that checkpoint's tokenizer or vocabulary (and a classifier's classes), as
``train --init-from`` keeps them, so that ``train TASK --prepared DIR --init-from
CHECKPOINT`` fine-tunes from the folder. ``prepare TASK --verify DIR``
re-reads DIR and compares every file with the sha256 its manifest records, then refuses DIR
when an input file changed since, as ``train --prepared`` does.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
from pathlib import Path

from transformer_lab.cli.bounds import path_of
from transformer_lab.cli.overrides import add_config_file_argument, add_override_arguments, resolved_config
from transformer_lab.cli.train_command import DATA_OPTIONS, check_data_settings, data_errors_named, option_settings
from transformer_lab.data.prepared_cache import CorpusKindError, NotAPreparedFolderError, verify_prepared
from transformer_lab.folders import check_folder_output, check_new_folder
from transformer_lab.tasks.registry import TASKS, task_named
from transformer_lab.training.checkpoint import resolve_checkpoint
from transformer_lab.training.config_io import Setting, parse_override
from transformer_lab.training.finetune import (
    check_checkpoint_task,
    checkpoint_data_settings,
    with_checkpoint_vocabulary_settings,
)
from transformer_lab.training.run.run_folder import check_output_outside_saves

# What --verify does not use (it checks a folder as it is): every option that says how to prepare one.
_PREPARING_OPTIONS = (
    "train",
    "valid",
    "data_dir",
    "source_language",
    "target_language",
    "preset",
    "config",
    "init_from",
)

logger = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    preparing = [name for name, task in TASKS.items() if task.corpus is not None]
    parser = subparsers.add_parser(
        "prepare", help=f"prepare a corpus once into a memory-mapped token store ({', '.join(preparing)})"
    )
    parser.add_argument(
        "task",
        choices=preparing,
        help="which task's data to prepare",
    )
    parser.add_argument(
        "--train",
        nargs="+",
        default=None,
        metavar="FILE",
        help=(
            "the training data: SOURCE TARGET (UPPER LOWER) line files or one .tsv/.jsonl file; "
            "or one .csv/.tsv/.jsonl labelled file (classification); required for translation, without it "
            "couplet and classification read the preset's data in --data-dir"
        ),
    )
    parser.add_argument(
        "--valid",
        nargs="+",
        default=None,
        metavar="FILE",
        help="validation data in the same forms (default: data.num_carved_validation pairs carved from --train)",
    )
    parser.add_argument(
        "--data-dir", default=None, help="without --train: the data folder (default: $TRANSFORMER_LAB_DATA)"
    )
    written = parser.add_mutually_exclusive_group(required=True)
    written.add_argument("--out", type=path_of, help="the new folder to write (must not exist)")
    written.add_argument(
        "--verify",
        type=path_of,
        metavar="DIR",
        help=(
            "instead: read every file of the prepared folder DIR and compare its sha256 with its manifest's, "
            "and check its input files as train --prepared does"
        ),
    )
    parser.add_argument("--source-language", default=None, help="the source language code (JSON key, TSV header)")
    parser.add_argument("--target-language", default=None, help="the target language code (JSON key, TSV header)")
    parser.add_argument(
        "--preset", default=None, help="the preset whose data settings to use: 'default' or 'base' (a 37k BPE)"
    )
    parser.add_argument(
        "--init-from",
        type=path_of,
        default=None,
        metavar="CHECKPOINT",
        help=(
            "for a fine-tune: make the ids with this checkpoint's (or run folder's) tokenizer or vocabulary, "
            "then train TASK --prepared DIR --init-from CHECKPOINT"
        ),
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (for logs sent to files)")
    add_config_file_argument(parser)
    add_override_arguments(parser)
    parser.set_defaults(handler=run, prepared=None)


def run(arguments: argparse.Namespace) -> int:
    task = task_named(arguments.task)
    if task.corpus is None:
        raise ValueError(f"task: expected a task with a corpus to prepare, got {task.name}")
    if arguments.verify is not None:
        return _verify(task.name, arguments)
    _check_data_keys(arguments.overrides, type(task.config().data))
    check_new_folder(arguments.out, "--out")  # named as typed, before the files are read; the writer checks it again
    check_folder_output(arguments.out, "--out")  # a file in the way, "new/..", a place refusing folders
    check_output_outside_saves("--out", arguments.out)  # else a run's next save or pruning deletes the corpus
    checkpoint = None if arguments.init_from is None else resolve_checkpoint(arguments.init_from, "--init-from")
    if checkpoint is not None:
        check_checkpoint_task(checkpoint, task.checkpoint_task)
    # The preset, the checkpoint's file layout, --config, the data options, then --set: as `train` reads them.
    layout = [] if checkpoint is None else checkpoint_data_settings(checkpoint, task.layout_settings)
    config, changed = resolved_config(
        task.config(arguments.preset), arguments, schedule=layout, flags=option_settings(arguments, DATA_OPTIONS)
    )
    _check_file_keys(changed, type(task.config().data))
    check_data_settings(config, changed)
    if checkpoint is not None:
        # The manifest records the settings the checkpoint's vocabulary was made with, as the fine-tune's config.json.
        settings = task.vocabulary.settings if task.vocabulary is not None else ()
        config = with_checkpoint_vocabulary_settings(config, checkpoint, settings, changed)
    with data_errors_named(changed):
        report = task.prepare(config.data, arguments.out, not arguments.no_progress, checkpoint)
    print(json.dumps({"prepared": str(arguments.out), **report}, ensure_ascii=False))
    # Quoted as a shell reads it, so that the line pasted back works for a path with a space or a quote.
    init_from = [] if checkpoint is None else ["--init-from", str(arguments.init_from)]
    command = ["transformer-lab", "train", task.name, "--prepared", str(arguments.out), *init_from, "--out"]
    print(f"train with: {shlex.join(command)} RUN_FOLDER")
    return 0


def _verify(task_name: str, arguments: argparse.Namespace) -> int:
    given = [f"--{option.replace('_', '-')}" for option in _PREPARING_OPTIONS if getattr(arguments, option)]
    given += ["--set"] if arguments.overrides else []
    if given:
        raise ValueError(
            f"--verify: expected it without the options that say how to prepare (it checks the prepared folder "
            f"as it is), got {', '.join(given)} too"
        )
    task = task_named(task_name)
    assert task.corpus is not None  # run() refused a task without one
    try:
        checked = verify_prepared(arguments.verify, task.corpus_kind)
    except (NotAPreparedFolderError, CorpusKindError) as error:
        raise error.for_option("--verify") from None
    except FileNotFoundError as error:  # a folder without a manifest
        raise ValueError(f"--verify: {error}") from None
    try:
        # The checksums cover the files the manifest lists; a run opens what it needs, listed or not.
        task.corpus(task.config(arguments.preset).data, False, None).open(Path(arguments.verify))
    except FileNotFoundError as error:
        raise ValueError(f"--verify {arguments.verify}: expected every file a run opens, got {error}") from None
    print(json.dumps({"verified": str(arguments.verify), **checked}))
    return 0


def _check_file_keys(changed: dict[str, Setting], data_type: type) -> None:
    """Name the --config keys that preparing does not read (a --set of one is refused: :func:`_check_data_keys`).

    One file may serve ``prepare`` and then ``train --prepared``, so its other keys are said to be left for
    the run, not refused; before, ``model: {d_model: 64}`` or ``data: {max_tokens: 5000}`` was dropped
    without a word.
    """
    unused: dict[str, str] = getattr(data_type, "UNUSED_BY_PREPARE", {})
    left = [
        key
        for key, setting in changed.items()
        if setting.origin.startswith("--config") and (not key.startswith("data.") or key.partition(".")[2] in unused)
    ]
    if left:
        logger.warning(
            "--config: %s: read by train, not by prepare (which reads the data settings that make the corpus); "
            "give the file to train --prepared too",
            ", ".join(left),
        )


def _check_data_keys(overrides: list[str], data_type: type) -> None:
    """Refuse a ``--set`` that preparing does not read: of another section than ``data``, or a run's own data setting.

    ``data_type``: the task's data config class, whose ``UNUSED_BY_PREPARE`` lists the data
    settings only a run uses (the batches, where its corpora are kept).
    """
    unused: dict[str, str] = getattr(data_type, "UNUSED_BY_PREPARE", {})
    for override in overrides:
        path, _ = parse_override(override, "--set")  # the one reader of --set: a malformed one is refused as train does
        # A key without a section is left to the config's own check, which names what is wrong.
        key = ".".join(path)
        if len(path) > 1 and path[0] != "data":
            raise ValueError(
                f"--set {override}: expected a data.* key (preparing reads only the data settings), got {key}"
            )
        if len(path) == 2 and path[1] in unused:
            raise ValueError(
                f"--set {override}: expected a data setting that preparing a corpus uses, got {key}, a setting of "
                f"train ({unused[path[1]]}); give it to train instead"
            )
