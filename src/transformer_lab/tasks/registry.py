"""The one checkpoint loader: which task wrote a checkpoint, and that task's ``load``.

The CLI, ``evaluate``, ``average-checkpoints``, the web server's handlers and the lab all
rebuild a trained model through here or through the task's own ``load`` (the same
``tasks.loading`` code underneath), so a run folder resolves to its ``best/`` and a bad
file is named the same way everywhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from torch import nn

from transformer_lab.tasks import classification, couplet, synthetic, translation
from transformer_lab.training import load_checkpoint_config
from transformer_lab.training.checkpoint import resolve_checkpoint

# task name (config.json's "task") -> load(checkpoint) -> (model, vocabulary or None, config)
LOADERS: dict[str, Callable[[str | os.PathLike[str]], tuple[Any, Any, Any]]] = {
    translation.TASK_NAME: translation.load_translator,
    couplet.TASK_NAME: couplet.load,
    classification.TASK_NAME: classification.load_classifier,
    synthetic.TASK_NAME: synthetic.load,
}


@dataclass
class TrainedModel:
    """A checkpoint rebuilt: its task, folder, model (eval mode), vocabulary (None for synthetic) and config."""

    task: str
    folder: Path
    model: nn.Module
    vocabulary: Any
    config: Any


def checkpoint_task(checkpoint: str | os.PathLike[str]) -> str:
    """The task that wrote ``checkpoint`` (a checkpoint or run folder); an unknown one is an error naming it."""
    folder = resolve_checkpoint(checkpoint)
    task = load_checkpoint_config(folder).get("task")
    if task not in LOADERS:
        raise ValueError(
            f"checkpoint {str(folder)!r}: expected a checkpoint of one of the tasks {sorted(LOADERS)}, "
            f"got task {task!r}"
        )
    return str(task)


def load_trained(checkpoint: str | os.PathLike[str], tasks: tuple[str, ...] = ()) -> TrainedModel:
    """Rebuild whatever task wrote ``checkpoint``; with ``tasks``, refuse any other task, naming it."""
    folder = resolve_checkpoint(checkpoint)
    task = checkpoint_task(folder)
    if tasks and task not in tasks:
        raise ValueError(
            f"checkpoint {str(folder)!r}: expected a checkpoint of {' or '.join(tasks)}, got task {task!r}"
        )
    model, vocabulary, config = LOADERS[task](folder)
    return TrainedModel(task=task, folder=folder, model=model, vocabulary=vocabulary, config=config)
