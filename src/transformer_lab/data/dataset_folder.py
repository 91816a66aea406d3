"""Where a dataset's files are: a data root holding `<name>/`, or the `<name>/` folder itself.

Shared by the corpus readers (Multi30k, AG News). The folder comes from `data_dir`, or
when it is None from the environment variable `TRANSFORMER_LAB_DATA`. Either may name
the data root that *contains* the dataset's folder (for example `~/data`) or the
dataset's folder itself (for example `~/data/multi30k`): if `<folder>/<name>` is
a directory it is used, otherwise `<folder>` must hold the files.
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_ENVIRONMENT_VARIABLE = "TRANSFORMER_LAB_DATA"


def data_root(data_dir: str | os.PathLike[str] | None, folder_name: str) -> tuple[Path, str]:
    """`data_dir`, or the folder TRANSFORMER_LAB_DATA names when it is None, with where it came from.

    The second value ("data_dir='...'" or "TRANSFORMER_LAB_DATA='...'") is for error messages.

    Raises:
        ValueError: data_dir is None and TRANSFORMER_LAB_DATA is not set (the message
            names `folder_name/` as what the folder should hold).
    """
    if data_dir is not None:
        return Path(data_dir), f"data_dir={str(data_dir)!r}"
    value = os.environ.get(DATA_ENVIRONMENT_VARIABLE, "")
    if not value:
        raise ValueError(
            f"data_dir must be a folder, got None and the environment variable "
            f"{DATA_ENVIRONMENT_VARIABLE} is not set; pass data_dir (or --data-dir) or set "
            f"{DATA_ENVIRONMENT_VARIABLE} to a folder that holds {folder_name}/"
        )
    return Path(value), f"{DATA_ENVIRONMENT_VARIABLE}={value!r}"


def resolve_dataset_dir(data_dir: str | os.PathLike[str] | None, folder_name: str) -> Path:
    """The folder that holds one dataset's files (see the module docstring for the rule).

    Args:
        data_dir: the data root containing `<folder_name>/`, or that folder itself; None
            reads the environment variable TRANSFORMER_LAB_DATA.
        folder_name: the dataset's folder name under the data root, e.g. "multi30k".

    Raises:
        ValueError: data_dir is None and TRANSFORMER_LAB_DATA is not set.
        FileNotFoundError: the folder does not exist.
    """
    folder, origin = data_root(data_dir, folder_name)
    if not folder.is_dir():
        raise FileNotFoundError(f"{origin}: expected an existing folder, got {str(folder)!r}, which is not one")
    nested = folder / folder_name
    return nested if nested.is_dir() else folder
