"""``transformer-lab download multi30k|ag-news|couplets [--to DIR]``: a preset's data in one command.

Fills the data folder that ``train`` and ``evaluate`` read by default
(``transformer_lab.data.dataset_folder.default_data_dir``); every file is pinned and
checked, an interrupted download resumes, and a second run fetches nothing.
"""

from __future__ import annotations

import argparse

from transformer_lab.data.dataset_folder import DATA_ENVIRONMENT_VARIABLE, default_data_dir
from transformer_lab.data.datasets import DATASET_NAMES, MIRROR_ENVIRONMENT_VARIABLE, download_dataset
from transformer_lab.tasks.registry import TASKS


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "download", help="download a preset's data (pinned, sha256-checked, resumable) into the data folder"
    )
    parser.add_argument("dataset", choices=DATASET_NAMES, help="which data set")
    parser.add_argument(
        "--to",
        default=None,
        help=f"the data folder (default: ${DATA_ENVIRONMENT_VARIABLE}, else ~/.cache/transformer_lab/data)",
    )
    parser.add_argument(
        "--wb14123-train",
        action="store_true",
        help="couplets: also wb14123's 770,491 training pairs (about 60 MB; --set data.train_split=train)",
    )
    parser.add_argument(
        "--mirror",
        default=None,
        help=f"fetch https://HOST/PATH from MIRROR/HOST/PATH instead (default: ${MIRROR_ENVIRONMENT_VARIABLE})",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait on each connection")
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    folder = download_dataset(
        arguments.dataset,
        arguments.to,
        mirror=arguments.mirror,
        wb14123_train=arguments.wb14123_train,
        timeout=arguments.timeout,
    )
    # What the dataset trains (the task whose preset reads it): the command the user runs next.
    task = next(name for name, entry in TASKS.items() if entry.dataset == arguments.dataset)
    found_by_default = arguments.to is None or folder.parent.resolve() == default_data_dir().resolve()
    data_dir = "" if found_by_default else f" --data-dir {folder.parent}"
    print(f"{arguments.dataset}: {folder}")
    print(f"next: transformer-lab train {task}{data_dir} --out runs/{task}")
    return 0
