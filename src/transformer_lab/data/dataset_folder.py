"""Where a dataset's files are: a data root holding `<name>/`, or the `<name>/` folder itself.

Shared by the corpus readers (Multi30k, AG News, couplets). The folder comes from
`data_dir`; when it is None, from the environment variable `TRANSFORMER_LAB_DATA`; when
that is unset, the user's data folder `default_data_dir()` that `transformer-lab download`
fills ($XDG_CACHE_HOME/transformer_lab/data, else ~/.cache/transformer_lab/data, as
Hugging Face datasets and torchvision keep theirs in the user's cache). Any of them may
name the data root that *contains* the dataset's folder (for example `~/data`) or the
dataset's folder itself (for example `~/data/multi30k`): if `<folder>/<name>` is a
directory it is used, otherwise `<folder>` must hold the files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

DATA_ENVIRONMENT_VARIABLE = "TRANSFORMER_LAB_DATA"
# The name `transformer-lab download` takes for each dataset folder.
DOWNLOAD_NAMES: dict[str, str] = {"multi30k": "multi30k", "ag_news": "ag-news", "couplet": "couplets"}


def default_data_dir() -> Path:
    """The data folder when none is named: $TRANSFORMER_LAB_DATA, else the user's cache folder."""
    value = os.environ.get(DATA_ENVIRONMENT_VARIABLE, "")
    if value:
        return Path(value)
    base = os.environ.get("XDG_CACHE_HOME", "") or str(Path.home() / ".cache")
    return Path(base) / "transformer_lab" / "data"


def data_root(data_dir: str | os.PathLike[str] | None, folder_name: str) -> tuple[Path, str]:
    """`data_dir`, or the default data folder when it is None, with where it came from.

    The second value ("data_dir='...'", "TRANSFORMER_LAB_DATA='...'" or "the default data
    folder '...'") is for error messages.
    """
    if data_dir is not None:
        if not os.fspath(data_dir):  # Path("") is the working folder: a dataset read from wherever the command ran
            raise ValueError(
                "data_dir (--data-dir): expected a folder, got '' (leave it out for $TRANSFORMER_LAB_DATA or the "
                "default data folder; '.' for the working folder)"
            )
        return Path(data_dir), f"data_dir={str(data_dir)!r}"
    folder = default_data_dir()
    if os.environ.get(DATA_ENVIRONMENT_VARIABLE, ""):
        return folder, f"{DATA_ENVIRONMENT_VARIABLE}={str(folder)!r}"
    return folder, f"the default data folder {str(folder)!r} ({DATA_ENVIRONMENT_VARIABLE} is not set)"


def download_hint(folder_name: str, data_dir: str | os.PathLike[str] | None = None, option: str = "") -> str:
    """The one command that fetches `folder_name` into the folder the readers look in.

    `option` is an extra flag of that command (e.g. the couplets' full wb14123 training set).
    """
    command = f"transformer-lab download {DOWNLOAD_NAMES.get(folder_name, folder_name)}"
    if option:
        command += f" {option}"
    if data_dir is not None:
        command += f" --to {data_dir}"
    return f"run `{command}` to fetch it"


class DatasetMissingError(FileNotFoundError):
    """A dataset not found where the readers looked; a command names a given folder as the user gave it.

    ``option`` is the argument that would name another folder, suggested where none was given:
    ``data_dir`` for the Python API, turned into the command's flag by :meth:`named`.
    """

    def __init__(self, data_dir: str | os.PathLike[str] | None, origin: str, rest: str, option: str = "") -> None:
        super().__init__(f"{origin}: {rest}" + (f" (or pass {option})" if option else ""))
        self.data_dir, self.origin, self.rest, self.option = data_dir, origin, rest, option

    def named(self, name: str, option: str = "--data-dir") -> DatasetMissingError:
        """The same error naming ``name`` (``--data-dir``, ``data.data_dir``) as where a given folder came from,
        or suggesting the command's ``option`` where the error suggested the API's."""
        if self.data_dir is None:  # the environment's or the default folder, named so already
            return DatasetMissingError(None, self.origin, self.rest, option if self.option else "")
        return DatasetMissingError(self.data_dir, f"{name} {str(self.data_dir)!r}", self.rest)

    def __reduce__(self) -> tuple[Any, ...]:
        # Copied or sent to another process whole, not as its message alone.
        return (DatasetMissingError, (self.data_dir, self.origin, self.rest, self.option))


def dataset_missing(
    data_dir: str | os.PathLike[str] | None,
    folder_name: str,
    expected: str,
    fetch: str | None = None,
    option: str = "",
) -> DatasetMissingError:
    """The error for a dataset not found where the readers looked, the same for every dataset.

    It starts with where the data folder came from (`data_root`'s "data_dir=...",
    "TRANSFORMER_LAB_DATA=..." or the default folder), so that a user who set the variable
    reads it named; then ``expected`` (what was looked for and not found) and ``fetch``
    (None: the download of `download_hint`; "": nothing), and ``option`` (see `DatasetMissingError`).
    """
    _, origin = data_root(data_dir, folder_name)
    fetch = download_hint(folder_name, data_dir) if fetch is None else fetch
    return DatasetMissingError(data_dir, origin, expected + (f"; {fetch}" if fetch else ""), option)


def data_folder_not_a_file(data_dir: str | os.PathLike[str] | None, folder_name: str) -> Path:
    """`data_root`'s folder, refused (`FileNotFoundError`) when it, or a folder above it, is a file.

    No download can fill such a path (it refuses a file as its folder), so the message names
    the file instead of a download to run.
    """
    folder, _ = data_root(data_dir, folder_name)
    blocking = next((path for path in (folder, *folder.parents) if path.exists() and not path.is_dir()), None)
    if blocking is None:
        return folder
    where = "which is a file" if blocking == folder else f"inside the file {str(blocking)!r}"
    raise dataset_missing(
        data_dir,
        folder_name,
        f"expected a folder holding {folder_name}/ (or its files), got {str(folder)!r}, {where}",
        "name the folder the data files are in",
    )


def resolve_dataset_dir(data_dir: str | os.PathLike[str] | None, folder_name: str) -> Path:
    """The folder that holds one dataset's files (see the module docstring for the rule).

    Args:
        data_dir: the data root containing `<folder_name>/`, or that folder itself; None
            reads TRANSFORMER_LAB_DATA, else takes the default data folder.
        folder_name: the dataset's folder name under the data root, e.g. "multi30k".

    Raises:
        FileNotFoundError: the folder does not exist (the message says the download to run).
    """
    folder = data_folder_not_a_file(data_dir, folder_name)
    if not folder.is_dir():
        raise dataset_missing(
            data_dir,
            folder_name,
            f"expected an existing folder holding {folder_name}/, got {str(folder)!r}, which does not exist",
            # No folder given: another one may hold the data.
            option="" if data_dir is not None else "data_dir",
        )
    nested = folder / folder_name
    return nested if nested.is_dir() else folder
