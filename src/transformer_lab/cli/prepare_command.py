"""``transformer-lab prepare translation|couplet --train FILES --out DIR``: a corpus prepared once into a token store.

Translation: the files are read in bounded chunks (strictly: a bad line is one error
naming its file and line), the BPE is learned from a seeded sample (or ``--set
data.tokenizer_file=...`` is used). Couplets: the files (or, without ``--train``, the
preset's split of the data folder) are read and split by the couplet rules and the
character vocabulary is built. Either way the ids are written to memory-mapped arrays in
DIR with the tokenizer or vocabulary, the validation pairs and a manifest; ``transformer-lab
train TASK --prepared DIR`` then starts in seconds, with memory that does not grow with
the corpus.
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
from transformer_lab.tasks import couplet, translation

PREPARED_TASKS = ("translation", "couplet")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "prepare", help="prepare a corpus once into a memory-mapped token store (translation, couplet)"
    )
    parser.add_argument("task", choices=PREPARED_TASKS, help="which task's data to prepare")
    parser.add_argument(
        "--train",
        nargs="+",
        default=None,
        metavar="FILE",
        help=(
            "the training data: SOURCE TARGET (UPPER LOWER) line files or one .tsv/.jsonl file; "
            "required for translation, couplet without it: the preset's split of --data-dir"
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
        "--data-dir", default=None, help="couplet without --train: the data folder (default: $TRANSFORMER_LAB_DATA)"
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
    if arguments.task == "couplet":
        return _prepare_couplets(arguments)
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


def _prepare_couplets(arguments: argparse.Namespace) -> int:
    for option in ("source_language", "target_language", "preset"):
        if getattr(arguments, option) is not None:
            raise ValueError(f"--{option.replace('_', '-')}: expected only with translation, got it with couplet")
    config = with_config_file(couplet.default_config(), arguments)
    data = dataclasses.replace(
        config.data,
        train_files=config.data.train_files if arguments.train is None else tuple(arguments.train),
        valid_files=config.data.valid_files if arguments.valid is None else tuple(arguments.valid),
        data_dir=config.data.data_dir if arguments.data_dir is None else str(arguments.data_dir),
    )
    config = dataclasses.replace(config, data=data)
    config = resolved_config(config, arguments)
    folder = couplet.prepare_corpus(config.data, arguments.out)
    prepared = open_prepared_couplets(folder)
    _print_result(folder, {**prepared.report, "seconds": prepared.manifest["seconds"]}, arguments.task)
    return 0


def _print_result(folder: Path, report: dict[str, object], task: str) -> None:
    print(json.dumps({"prepared": str(folder), **report}, ensure_ascii=False))
    print(f"train with: transformer-lab train {task} --prepared {folder} --out RUN_FOLDER")
