"""One registry of tasks: the commands offer exactly its tasks, and a task registered at run time is trained
by `train`, printed by `config` and loaded by the checkpoint loader with no other change."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from transformer_lab.cli import build_parser, main
from transformer_lab.serve.registry import HANDLER_MODULES
from transformer_lab.tasks import registry, synthetic
from transformer_lab.tasks.task import Task


def command_choices(command: str) -> tuple[str, ...]:
    parser = build_parser()
    subparsers = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    task_argument = next(action for action in subparsers.choices[command]._actions if action.dest == "task")
    assert task_argument.choices is not None
    return tuple(task_argument.choices)


def test_the_commands_offer_the_registered_tasks() -> None:
    tasks = registry.TASKS
    assert command_choices("train") == tuple(tasks) == command_choices("config")
    assert command_choices("evaluate") == tuple(name for name, task in tasks.items() if task.evaluate is not None)
    assert command_choices("prepare") == tuple(name for name, task in tasks.items() if task.prepare is not None)
    assert set(HANDLER_MODULES) == set(registry.tasks_offering("serve"))
    with pytest.raises(ValueError, match="task 'copy': expected a new task name"):
        registry.register(registry.TASKS["copy"])
    with pytest.raises(ValueError, match="task: expected one of translation, .*, got 'summarise'"):
        registry.task_named("summarise")


TINY = ["data.num_train=64", "data.num_validation=8", "data.num_test=8", "model.d_model=16", "model.nhead=2"]
TINY += ["model.num_encoder_layers=1", "model.num_decoder_layers=1", "model.dim_feedforward=32"]
TINY += ["train.epochs=1", "train.progress_bar=false"]


def short_sort_config() -> synthetic.SyntheticConfig:
    """The toy task's one preset: sorting sequences of at most four symbols."""
    config = synthetic.default_config("sort")
    return synthetic.resolve(dataclasses.replace(config, data=dataclasses.replace(config.data, max_length=4)))


def train_short_sort(
    config: Any, out_dir: str | os.PathLike[str], *, resume: bool = False, init_from: object = None
) -> synthetic.TrainResult:
    return synthetic.train(config, out_dir, resume=resume)


def held_out_line(result: synthetic.TrainResult, config: Any) -> list[str]:
    return [f"short sort: {len(result.data.test)} held-out sequences"]


@pytest.fixture
def short_sort_task() -> Iterator[Task]:
    """The toy task, registered for one test and taken out again."""
    task = Task(
        name="short-sort",
        presets={"default": short_sort_config},
        train=train_short_sort,
        load=synthetic.load,
        checkpoint_task=synthetic.TASK_NAME,
        reads_data=False,
        closing_lines=held_out_line,
    )
    registry.register(task)
    try:
        yield task
    finally:
        del registry.TASKS[task.name]


def test_a_task_registered_at_run_time_trains_and_loads_through_the_commands(
    short_sort_task: Task, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "short-sort"]) == 0
    assert "max_length: 4" in capsys.readouterr().out

    out = tmp_path / "run"
    assert main(["train", "short-sort", "--out", str(out), *[part for item in TINY for part in ("--set", item)]]) == 0
    printed = capsys.readouterr().out
    assert "short sort: 8 held-out sequences" in printed
    assert json.loads(printed[: printed.rindex("}") + 1])["steps"] >= 1

    trained = registry.load_trained(out)
    assert trained.task == synthetic.TASK_NAME
    assert trained.config.data.max_length == 4 and trained.config.data.task == "sort"
    assert main(["train", "short-sort", "--out", str(tmp_path / "r2"), "--train", "a.txt"]) != 0
    assert "expected only with a task that reads data" in capsys.readouterr().err
