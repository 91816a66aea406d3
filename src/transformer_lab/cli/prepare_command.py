"""``transformer-lab prepare translation --train FILES --out DIR``: a corpus prepared once into a token store.

The files are read in bounded chunks (strictly: a bad line is one error naming its file
and line), the BPE is learned from a seeded sample (or ``--set data.tokenizer_file=...``
is used), and the ids are written to memory-mapped arrays in DIR with the tokenizer, the
validation pairs and a manifest. ``transformer-lab train translation --prepared DIR`` then
starts in seconds, with memory that does not grow with the corpus.
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
from transformer_lab.tasks import translation

PREPARED_TASKS = ("translation",)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "prepare", help="prepare your corpus once into a memory-mapped token store (translation)"
    )
    parser.add_argument("task", choices=PREPARED_TASKS, help="which task's data to prepare")
    parser.add_argument(
        "--train",
        nargs="+",
        required=True,
        metavar="FILE",
        help="the training data: SOURCE TARGET line files or one .tsv/.jsonl file",
    )
    parser.add_argument(
        "--valid",
        nargs="+",
        default=None,
        metavar="FILE",
        help="validation data in the same forms (default: data.num_carved_validation pairs carved from --train)",
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
    print(json.dumps({"prepared": str(prepared.folder), **prepared.report, "seconds": prepared.manifest["seconds"]}))
    print(f"train with: transformer-lab train translation --prepared {prepared.folder} --out RUN_FOLDER")
    return 0
