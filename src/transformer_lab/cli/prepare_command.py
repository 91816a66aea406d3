"""``transformer-lab prepare translation|couplet|classification --out DIR``: a corpus prepared once into a token store.

Translation: the files (``--train``) are read in bounded chunks (strictly: a bad line is
one error naming its file and line), the BPE is learned from a seeded sample (or ``--set
data.tokenizer_file=...`` is used). Couplets and classification: the files, or without
``--train`` the preset's data in the data folder, are read by the task's rules (its
filters, its validation split) and the vocabulary or BPE is built. Either way the ids are
written to memory-mapped arrays in DIR with the tokenizer or vocabulary, the validation
rows and a manifest; ``transformer-lab train TASK --prepared DIR`` then starts in
seconds, with memory that does not grow with the corpus.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from transformer_lab.cli.overrides import (
    add_config_file_argument,
    add_override_arguments,
    resolved_config,
    with_config_file,
)
from transformer_lab.cli.train_command import preset_config
from transformer_lab.data.prepared_couplets import open_prepared_couplets
from transformer_lab.data.prepared_labelled import open_prepared_labelled
from transformer_lab.tasks import classification, couplet, translation

PREPARED_TASKS = ("translation", "couplet", "classification")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "prepare", help="prepare a corpus once into a memory-mapped token store (translation, couplet, classification)"
    )
    parser.add_argument("task", choices=PREPARED_TASKS, help="which task's data to prepare")
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
    parser.add_argument("--out", type=Path, required=True, help="the new folder to write (must not exist)")
    parser.add_argument("--source-language", default=None, help="the source language code (JSON key, TSV header)")
    parser.add_argument("--target-language", default=None, help="the target language code (JSON key, TSV header)")
    parser.add_argument(
        "--preset", default=None, help="the preset whose data settings to use: 'default' or 'base' (a 37k BPE)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (for logs sent to files)")
    add_config_file_argument(parser)
    add_override_arguments(parser)
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    if arguments.task != "translation":
        return _prepare_read_whole(arguments)
    if arguments.train is None:
        raise ValueError("--train: expected the files to prepare (SOURCE TARGET or one .tsv/.jsonl file), got none")
    config = with_config_file(preset_config(translation, arguments.preset), arguments)
    data = dataclasses.replace(
        config.data,
        train_files=tuple(arguments.train),
        valid_files=tuple(arguments.valid or ()),
        source_language=arguments.source_language or config.data.source_language,
        target_language=arguments.target_language or config.data.target_language,
    )
    config = dataclasses.replace(config, data=data)
    config = resolved_config(config, arguments)
    prepared = translation.prepare_corpus(config.data, arguments.out, progress=not arguments.no_progress)
    _print_result(prepared.folder, {**prepared.report, "seconds": prepared.manifest["seconds"]}, arguments.task)
    return 0


def _prepare_read_whole(arguments: argparse.Namespace) -> int:
    """Couplets or labelled text: read by the task's rules, then written as a prepared folder."""
    for option in ("source_language", "target_language", "preset"):
        if getattr(arguments, option) is not None:
            raise ValueError(
                f"--{option.replace('_', '-')}: expected only with translation, got it with {arguments.task}"
            )
    task, open_prepared = {
        "couplet": (couplet, lambda folder: open_prepared_couplets(folder).report),
        "classification": (classification, lambda folder: open_prepared_labelled(folder).report),
    }[arguments.task]
    config = with_config_file(task.default_config(), arguments)
    data = dataclasses.replace(
        config.data,
        train_files=config.data.train_files if arguments.train is None else tuple(arguments.train),
        valid_files=config.data.valid_files if arguments.valid is None else tuple(arguments.valid),
        data_dir=config.data.data_dir if arguments.data_dir is None else str(arguments.data_dir),
    )
    config = dataclasses.replace(config, data=data)
    config = resolved_config(config, arguments)
    folder = task.prepare_corpus(config.data, arguments.out)
    _print_result(folder, open_prepared(folder), arguments.task)
    return 0


def _print_result(folder: Path, report: dict[str, object], task: str) -> None:
    print(json.dumps({"prepared": str(folder), **report}, ensure_ascii=False))
    print(f"train with: transformer-lab train {task} --prepared {folder} --out RUN_FOLDER")
