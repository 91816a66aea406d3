"""Which checkpoints are served, under which names, by which task handler.

Every task whose ``Task`` offers the "serve" surface (``tasks.registry``) has a handler
module here named after its checkpoint task, ``serve/<task>_handler.py``: it names its
``TASK`` (the ``task`` field of its checkpoints' ``config.json``), its ``ENDPOINTS`` and
offers ``load(checkpoint, device) -> handler`` (its model on that torch device); a handler
has ``task``, ``describe()`` for the page, and the methods its endpoints call. Serving a
new task is that one module.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, Sequence

import torch

from transformer_lab.devices import resolve_device
from transformer_lab.tasks.registry import tasks_offering
from transformer_lab.training import load_checkpoint_config, resolve_checkpoint


def handler_modules() -> dict[str, ModuleType]:
    """Checkpoint task -> its handler module, for every registered task that offers "serve"."""
    modules = {}
    for task in tasks_offering("serve"):
        name = f"{__package__}.{task}_handler"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name != name:
                raise
            raise ValueError(f"task {task!r}: offers the serve surface, but no module {name} handles it") from None
        if getattr(module, "TASK", None) != task:
            raise ValueError(f"{name}: expected TASK = {task!r}, got {getattr(module, 'TASK', None)!r}")
        modules[task] = module
    return modules


class TaskHandler(Protocol):
    """What the app needs of every loaded model."""

    task: str

    def describe(self) -> dict[str, Any]:
        """Facts the page shows or needs (layers, heads, labels, decoding defaults)."""
        ...


@dataclass
class ServedModel:
    name: str
    checkpoint: Path
    handler: TaskHandler  # made by its task's handler module's load

    @property
    def task(self) -> str:
        return self.handler.task

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "task": self.task, "checkpoint": str(self.checkpoint), **self.handler.describe()}


def _split_name(argument: str) -> tuple[str | None, str]:
    """``NAME=PATH`` -> (NAME, PATH); a plain PATH -> (None, PATH)."""
    name, separator, path = argument.partition("=")
    if separator and name and "/" not in name and os.sep not in name:
        return name, path
    return None, argument


def _default_name(given: Path, checkpoint: Path) -> str:
    """A run folder is named after itself; a checkpoint inside a run as ``run/checkpoint``."""
    if checkpoint == given and (checkpoint.parent / "metrics.jsonl").is_file():
        return f"{checkpoint.parent.name}/{checkpoint.name}"
    return given.resolve().name


def load_served_models(
    arguments: Sequence[str | os.PathLike[str]], device: str | torch.device = "cpu"
) -> dict[str, ServedModel]:
    """Load every ``[NAME=]PATH`` once, each with the handler of its checkpoint's task, its model on ``device``.

    ``device`` is "auto", "cpu", "cuda", "cuda:N" or a ``torch.device``. Unknown tasks,
    missing folders and two models under one name are errors naming the argument.
    """
    device = resolve_device(device)
    if not arguments:
        raise ValueError("--checkpoint: expected at least one checkpoint to serve, got none")
    modules = handler_modules()
    served: dict[str, ServedModel] = {}
    for argument in arguments:
        name, path_text = _split_name(str(argument))
        checkpoint = resolve_checkpoint(path_text)
        name = name or _default_name(Path(path_text), checkpoint)
        if name in served:
            raise ValueError(
                f"--checkpoint {argument}: expected a unique name, but {name!r} is already served from "
                f"{served[name].checkpoint}; name it with NAME=PATH"
            )
        task = load_checkpoint_config(checkpoint).get("task")
        if task not in modules:
            raise ValueError(
                f"--checkpoint {argument}: expected a checkpoint of a served task "
                f"({', '.join(sorted(modules))}), got task {task!r}"
            )
        served[name] = ServedModel(name=name, checkpoint=checkpoint, handler=modules[task].load(checkpoint, device))
    return served
