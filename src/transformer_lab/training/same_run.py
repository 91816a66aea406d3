"""Whether a ``--resume`` continues the run its folder holds: the same task, dataset form and training files.

The Trainer restores weights, optimizer and position from ``last/`` whatever the command
says; a resume under another task's name, another synthetic task, another file format or
other training files would train on without a word, the checkpoint's step count meaning
nothing for the new data. :func:`check_same_run` compares what the command would train
with the ``config.json`` of ``last/`` and refuses the first difference in one line. Model
sizes are not compared here: the weights' header refuses those when they are loaded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .checkpoint import CONFIG_FILE, load_checkpoint_config

__all__ = ["check_same_run"]

# Data fields that say what is trained on (as opposed to how it is batched or sampled).
_DATASET_FIELDS = (
    "task",
    "file_format",
    "train_files",
    "valid_files",
    "prepared_dir",
    "train_split",
    "extra_train_splits",
    "source_language",
    "target_language",
    "text_fields",
    "label_field",
)
_FILE_FIELDS = ("train_files", "valid_files", "prepared_dir")
# Not compared: classification's train_file, which a run records as the file it chose
# (relative to ag_news/) when the command left it to the task; train_files covers own data.


def _comparable(name: str, value: Any) -> Any:
    """Paths as real absolute paths (a relative one was given from the same working folder); lists as lists."""
    if name in _FILE_FIELDS:
        if isinstance(value, (list, tuple)):
            return [os.path.realpath(item) if item else item for item in value]
        return os.path.realpath(value) if value else value
    return list(value) if isinstance(value, tuple) else value


def check_same_run(last_folder: Path, task: str, config: Mapping[str, Any]) -> None:
    """Raise a ``ValueError`` naming the difference unless ``config`` continues the run in ``last_folder``.

    ``config`` is the command's config as ``config_to_dict`` gives it.

    ``task`` is the name the checkpoints record (``config.json``'s ``"task"``).
    """
    saved = load_checkpoint_config(last_folder)
    where = f"--resume: {last_folder / CONFIG_FILE}"
    if saved.get("task") != task:
        raise ValueError(
            f"{where}: expected a run of the task this command trains ({task!r}), got a run of {saved.get('task')!r}; "
            "resume with the command that started it, or train into a new --out"
        )
    saved_data, data = saved.get("data"), config.get("data")
    if not isinstance(saved_data, Mapping) or not isinstance(data, Mapping):
        return
    differences = [
        f"data.{name}: {_comparable(name, saved_data[name])!r} in the run, {_comparable(name, data[name])!r} now"
        for name in _DATASET_FIELDS
        if name in saved_data and name in data and _comparable(name, saved_data[name]) != _comparable(name, data[name])
    ]
    if differences:
        raise ValueError(
            f"{where}: expected the data the run was started with, got other data ({'; '.join(differences)}); "
            "resume with the command that started it, or train into a new --out"
        )
