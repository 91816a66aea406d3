"""Which checkpoints are served, under which names, by which task's handler.

Every registered task that offers the "serve" surface declares it (``tasks.task.Serving``):
its predictor loads a checkpoint once, on the given device, and its handler answers the
page over that predictor. Serving a new task changes nothing here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from transformer_lab.devices import resolve_device
from transformer_lab.shortened import shortened
from transformer_lab.tasks.registry import checkpoint_tasks
from transformer_lab.training import load_checkpoint_config, resolve_checkpoint
from transformer_lab.training.checkpoint import trained_task_name


@dataclass
class ServedModel:
    name: str
    checkpoint: Path
    task: str  # the checkpoint task (``config.json``'s ``task``)
    handler: Any  # its task's Serving.handler over its predictor (``describe()``: what the page shows)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "task": self.task, "checkpoint": str(self.checkpoint), **self.handler.describe()}


def _split_name(argument: str) -> tuple[str | None, str]:
    """``NAME=PATH`` -> (NAME, PATH); a plain PATH -> (None, PATH), also one holding '=' that exists as it is."""
    name, separator, path = argument.partition("=")
    # os.path.exists: a NAME=PATH too long to be a file name is no path (Path.exists raises ENAMETOOLONG).
    if separator and name and "/" not in name and os.sep not in name and not os.path.exists(argument):
        if not path:
            raise ValueError(f"--checkpoint {argument}: expected a checkpoint path after {name}=, got an empty one")
        return name, path
    return None, argument


# A name a request may give: room for "run/checkpoint" of two folder names at the common 255-byte limit.
MAX_MODEL_NAME_CHARACTERS = 512


def _default_name(given: Path, checkpoint: Path) -> str:
    """A run folder is named after itself; a checkpoint inside a run as ``run/checkpoint``."""
    if checkpoint == given and (checkpoint.parent / "metrics.jsonl").is_file():
        return f"{checkpoint.parent.name}/{checkpoint.name}"
    return given.resolve().name


def load_served_models(
    arguments: Sequence[str | os.PathLike[str]], device: str | torch.device = "cpu"
) -> dict[str, ServedModel]:
    """Load every ``[NAME=]PATH`` once through its checkpoint's task's predictor, its model on ``device``.

    ``device`` is "auto", "cpu", "cuda", "cuda:N" or a ``torch.device``. Unknown tasks,
    missing folders and two models under one name are errors naming the argument.
    """
    device = resolve_device(device)
    if not arguments:
        raise ValueError("--checkpoint: expected at least one checkpoint to serve, got none")
    tasks = checkpoint_tasks("serve")
    served: dict[str, ServedModel] = {}
    for argument in arguments:
        if not os.fspath(argument):
            raise ValueError("--checkpoint: expected [NAME=]PATH, got an empty value")
        name, path_text = _split_name(os.fspath(argument))
        checkpoint = resolve_checkpoint(path_text, "--checkpoint")
        name = name or _default_name(Path(path_text), checkpoint)
        if len(name) > MAX_MODEL_NAME_CHARACTERS:
            # Served, it could never be asked for: a request's model name is bounded.
            raise ValueError(
                f"--checkpoint {shortened(os.fspath(argument), 120)}: expected a model name of at most "
                f"{MAX_MODEL_NAME_CHARACTERS} characters, got {len(name)}; name it with NAME=PATH"
            )
        if name in served:
            raise ValueError(
                f"--checkpoint {argument}: expected a unique name, but {name!r} is already served from "
                f"{served[name].checkpoint}; name it with NAME=PATH"
            )
        config = load_checkpoint_config(checkpoint)
        task = config.get("task")
        if task not in tasks:
            raise ValueError(
                f"--checkpoint {argument}: expected a checkpoint of a served task "
                f"({', '.join(sorted(tasks))}), got task {trained_task_name(config)!r}"
            )
        serving = tasks[task].serving
        assert serving is not None  # a Task offering "serve" has one
        handler = serving.handler(tasks[task].predictor_for(checkpoint, device))
        served[name] = ServedModel(name=name, checkpoint=checkpoint, task=task, handler=handler)
    return served
