"""``transformer-lab download multi30k|ag-news|couplets [--to DIR]``: a preset's data in one command.

Fills the data folder that ``train`` and ``evaluate`` read by default
(``transformer_lab.data.dataset_folder.default_data_dir``); every file is pinned and
checked, an interrupted download resumes, and a second run fetches nothing. Where the
sources cannot be reached (offline, or behind a proxy) the failure is followed by a
``next:`` line: a mirror, or the files copied into the folder by hand.
"""

from __future__ import annotations

import argparse
import os
import sys

from transformer_lab.cli.bounds import duration_in, path_of
from transformer_lab.data.dataset_folder import DATA_ENVIRONMENT_VARIABLE, default_data_dir
from transformer_lab.data.datasets import (
    DATASET_NAMES,
    MIRROR_ENVIRONMENT_VARIABLE,
    dataset_folder,
    download_dataset,
)
from transformer_lab.data.download import MAX_TIMEOUT_SECONDS
from transformer_lab.folders import FolderWriteError
from transformer_lab.tasks.registry import TASKS


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "download", help="download a preset's data (pinned, sha256-checked, resumable) into the data folder"
    )
    parser.add_argument("dataset", choices=DATASET_NAMES, help="which data set")
    parser.add_argument(
        "--to",
        type=path_of,  # an empty path is refused, not read as the current folder
        default=None,
        help=f"the data folder (default: ${DATA_ENVIRONMENT_VARIABLE}, else $XDG_CACHE_HOME/transformer_lab/data, else "
        "~/.cache/transformer_lab/data)",
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
    parser.add_argument(
        "--timeout",
        type=duration_in(MAX_TIMEOUT_SECONDS),
        default=60.0,
        help="how long to wait on each connection: seconds, or 90s, 2m "
        f"(default 60, at most {MAX_TIMEOUT_SECONDS:.0f})",
    )
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    try:
        folder = download_dataset(
            arguments.dataset,
            arguments.to,
            mirror=arguments.mirror,
            wb14123_train=arguments.wb14123_train,
            timeout=arguments.timeout,
        )
    except ConnectionError as error:
        print(f"transformer-lab download: failed: {' '.join(str(error).split())}", file=sys.stderr)
        print(f"next: {_offline_next_step(arguments)}", file=sys.stderr)
        return 1
    except FolderWriteError as error:
        # The library names the folder; the user also reads where it came from.
        source = (
            "--to" if arguments.to is not None else f"the data folder (${DATA_ENVIRONMENT_VARIABLE}, else the default)"
        )
        raise FolderWriteError(error.errno, f"{source}: {error}") from error
    # What the dataset trains (the task whose preset reads it): the command the user runs next.
    task = next(name for name, entry in TASKS.items() if entry.dataset == arguments.dataset)
    found_by_default = arguments.to is None or folder.parent.resolve() == default_data_dir().resolve()
    data_dir = "" if found_by_default else f" --data-dir {folder.parent}"
    print(f"{arguments.dataset}: {folder}")
    print(f"next: transformer-lab train {task}{data_dir} --out runs/{task}")
    return 0


def _offline_next_step(arguments: argparse.Namespace) -> str:
    """What to do when the sources cannot be reached: a mirror, or the files copied by hand."""
    mirror = arguments.mirror or os.environ.get(MIRROR_ENVIRONMENT_VARIABLE, "")
    folder = dataset_folder(arguments.dataset, arguments.to)
    if mirror:
        fetch = f"check that {mirror} serves each https://HOST/PATH as {mirror.rstrip('/')}/HOST/PATH"
    else:
        fetch = (
            f"if this machine cannot reach the sources, fetch them from a copy with --mirror URL "
            f"(or ${MIRROR_ENVIRONMENT_VARIABLE}), which reads https://HOST/PATH from URL/HOST/PATH"
        )
    return (
        f"{fetch}; or copy the files into {folder} (docs/data.md lists them with their sha256) "
        "and run the same command again: it checks them and fetches only what is missing"
    )
