"""The one registry of tasks, and the one checkpoint loader: which task wrote a checkpoint, and its ``load``.

Every package under ``tasks/`` whose ``__init__`` defines ``TASK`` (or ``TASKS``) is
registered when this module is imported; `register` (or `registered`) adds one at run time.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from torch import nn

import transformer_lab.tasks
from transformer_lab.atomic_files import check_not_an_input
from transformer_lab.setting_error import SettingError
from transformer_lab.tasks.evaluation import EvaluationOptions, EvaluationReport, unread_option_error
from transformer_lab.tasks.task import Task, VocabularyFunctions
from transformer_lab.training import load_checkpoint_config
from transformer_lab.training.checkpoint import (
    checkpoint_files,
    resolve_checkpoint,
    trained_task_name,
    weights_version,
)
from transformer_lab.word_lists import in_words

TASKS: dict[str, Task] = {}


def register(task: Task) -> Task:
    """Add ``task`` to the registry (a second task of the same name is an error naming it); returns it."""
    if task.name in TASKS:
        raise ValueError(f"task {task.name!r}: expected a new task name, got one already registered")
    TASKS[task.name] = task
    return task


@contextmanager
def registered(*tasks: Task) -> Iterator[tuple[Task, ...]]:
    """``tasks`` registered inside the ``with`` block and taken out after it, even after an error."""
    added: list[Task] = []
    try:
        for task in tasks:
            added.append(register(task))
        yield tasks
    finally:
        for task in added:
            del TASKS[task.name]


def package_tasks() -> list[Task]:
    """The tasks of every package under ``tasks/``, by package name (a package's ``TASKS`` in its own order)."""
    found: list[Task] = []
    for package in sorted(pkgutil.iter_modules(transformer_lab.tasks.__path__), key=lambda module: module.name):
        if not package.ispkg:
            continue
        module = importlib.import_module(f"{transformer_lab.tasks.__name__}.{package.name}")
        if not hasattr(module, "TASK") and not hasattr(module, "TASKS"):
            raise ValueError(f"{module.__file__}: expected a task package to define TASK (or TASKS), got neither")
        found += list(module.TASKS) if hasattr(module, "TASKS") else [module.TASK]
    return found


for _task in package_tasks():
    register(_task)


def task_named(name: str) -> Task:
    """The registered task called ``name``; an unknown name is one line listing the tasks."""
    if name not in TASKS:
        raise ValueError(f"task: expected one of {', '.join(TASKS)}, got {name!r}")
    return TASKS[name]


def tasks_offering(surface: str) -> tuple[str, ...]:
    """The checkpoint task names of the tasks that offer ``surface`` (see ``tasks.task.SURFACES``)."""
    return tuple(checkpoint_tasks(surface))


def tasks_evaluating() -> tuple[str, ...]:
    """The names of the tasks whose checkpoints ``evaluate`` scores (those with an ``evaluate``)."""
    return tuple(name for name, task in TASKS.items() if task.evaluate is not None)


def data_option_error(flag: str, name: str) -> ValueError:
    """The one-line error for a data option (``--data-dir``, ``--train``, ...) given to a task that reads no data."""
    readers = ", ".join(other.name for other in TASKS.values() if other.reads_data)
    return ValueError(f"{flag}: expected only with a task that reads data ({readers}), got it with {name}")


def evaluate(
    name: str, checkpoint: str | os.PathLike[str], split: str | None, options: EvaluationOptions
) -> EvaluationReport:
    """Score ``checkpoint`` with the evaluation of the task called ``name`` (``split`` None: its default).

    An option the task does not read (``Task.evaluation_options``) is refused in one line
    naming the tasks that read it; the task's evaluation checks the rest.
    """
    task = task_named(name)
    if task.evaluate is None:
        scored = ", ".join(tasks_evaluating())
        raise ValueError(f"task: expected one of {scored}, got {name!r}, which has no evaluation")
    if split is not None and task.evaluation_splits and split not in task.evaluation_splits:
        # Named as typed, before the checkpoint is loaded (a split's reader names no option).
        known = ", ".join(task.evaluation_splits)
        raise ValueError(f"--split: expected one of {known} for the {name} task, got {split!r}")
    if options.data_dir is not None and not task.reads_data:
        raise data_option_error("--data-dir", name)
    for flag in options.task_options:
        if not task.reads_option(flag):
            readers = [other.name for other in TASKS.values() if other.evaluate and other.reads_option(flag)]
            raise unread_option_error(flag, name, readers)
    check_not_an_input("--output", options.output, {**options.task_options, **checkpoint_files(checkpoint)})
    try:
        folder = resolve_checkpoint(checkpoint)
    except (OSError, ValueError):
        folder = None  # the task's loading says what is wrong with it
    if folder is None:
        return task.evaluate(Path(checkpoint), split, options)
    weights = weights_version(folder)
    report = task.evaluate(Path(checkpoint), split, replace(options, scored_weights=(folder, weights)))
    return replace(report, replaced=weights_version(folder) != weights)


def checkpoint_tasks(surface: str | None = None) -> dict[str, Task]:
    """Checkpoint task name -> the first registered task that writes it (its ``load`` rebuilds them all).

    With ``surface``, only the tasks that offer it (see ``tasks.task.SURFACES``).
    """
    found: dict[str, Task] = {}
    for task in TASKS.values():
        if surface is None or surface in task.surfaces:
            found.setdefault(task.checkpoint_task, task)
    return found


@dataclass
class TrainedModel:
    """A checkpoint rebuilt: its task, folder, model (eval mode), vocabulary (None for synthetic) and config."""

    task: str
    folder: Path
    model: nn.Module
    vocabulary: Any
    config: Any

    def vocabulary_functions(self) -> VocabularyFunctions[Any]:
        """The vocabulary functions of the task that wrote it; a task without them is an error naming it."""
        functions = checkpoint_tasks()[self.task].vocabulary
        if functions is None:
            raise ValueError(f"task {self.task!r}: expected vocabulary functions (Task.vocabulary), got none")
        return functions


def checkpoint_task(checkpoint: str | os.PathLike[str]) -> str:
    """The task that wrote ``checkpoint`` (a checkpoint or run folder); an unknown one is an error naming it."""
    folder = resolve_checkpoint(checkpoint)
    task = load_checkpoint_config(folder).get("task")
    if task not in checkpoint_tasks():
        raise ValueError(
            f"checkpoint {str(folder)!r}: expected a checkpoint of one of the tasks {sorted(checkpoint_tasks())}, "
            f"got task {task!r}"
        )
    return str(task)


def load_trained(checkpoint: str | os.PathLike[str], tasks: tuple[str, ...] = ()) -> TrainedModel:
    """Rebuild whatever task wrote ``checkpoint``; with ``tasks``, refuse any other task, naming it."""
    folder = resolve_checkpoint(checkpoint)
    task = checkpoint_task(folder)
    if tasks and task not in tasks:
        # Named as the commands name them (copy, not the "synthetic" their checkpoints record), in a
        # SettingError so that a command says its --checkpoint.
        names = [other.name for other in TASKS.values() if other.checkpoint_task in tasks]
        raise SettingError(
            "{checkpoint} {folder}: expected a checkpoint of {expected}, got task {trained!r}",
            ("checkpoint",),
            folder=str(folder),
            expected=in_words(names),
            trained=trained_task_name(load_checkpoint_config(folder)),
        )
    model, vocabulary, config = checkpoint_tasks()[task].load(folder)
    return TrainedModel(task=task, folder=folder, model=model, vocabulary=vocabulary, config=config)
