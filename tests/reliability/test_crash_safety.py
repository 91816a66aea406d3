"""A training run killed with SIGKILL anywhere loses nothing; a full disk keeps the old checkpoint.

The run is the tiny copy task of ``crash_driver.py``, killed three times (mid-way through
writing a weights file, between the two renames of a save, and right after a step chosen
at random), resumed each time, and finally compared with an uninterrupted run: the final
weights must be bitwise equal. After every kill, every checkpoint folder under its final
name must load completely.
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.reliability.crash_driver import TINY, tiny_config
from transformer_lab.cli import main
from transformer_lab.tasks.synthetic import train as synthetic_train
from transformer_lab.training import (
    MODEL_FILE,
    load_checkpoint_config,
    load_trainer_state,
    save_checkpoint,
)
from transformer_lab.training import checkpoint as checkpoint_module

REPOSITORY = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("crash_driver.py")
CHECKPOINT_NAME = re.compile(r"^(last|best|step-\d+)$")


def run_driver(out_dir: Path, *options: str) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPOSITORY / "src"), str(REPOSITORY)]),
        "OMP_NUM_THREADS": "1",
    }
    return subprocess.run(
        [sys.executable, str(DRIVER), str(out_dir), *options],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_killed(result: subprocess.CompletedProcess) -> None:
    assert (
        result.returncode == -signal.SIGKILL
    ), f"expected death by SIGKILL, got {result.returncode}: {result.stderr[-2000:]}"


def assert_every_checkpoint_is_whole(out_dir: Path) -> list[str]:
    """Every folder under a checkpoint's final name loads completely; return their names."""
    names = sorted(path.name for path in out_dir.iterdir() if CHECKPOINT_NAME.match(path.name))
    for name in names:
        folder = out_dir / name
        synthetic_train.load(folder)  # config and every weight
        state = load_trainer_state(folder)
        assert state["global_step"] > 0
    return names


def last_step(out_dir: Path) -> int:
    return int(load_trainer_state(out_dir / "last")["global_step"])


def test_sigkill_anywhere_then_resume_equals_the_uninterrupted_run(tmp_path: Path) -> None:
    reference = synthetic_train.train(tiny_config(), tmp_path / "reference")
    assert reference.summary["steps"] == 16
    reference_weights = load_file(str(tmp_path / "reference" / "last" / MODEL_FILE))

    out = tmp_path / "killed"
    # 1. Killed with half of the second save's weights file written (saves at steps 3, 6, ...).
    assert_killed(run_driver(out, "--kill-in-save", "2"))
    assert "last" in assert_every_checkpoint_is_whole(out)
    assert last_step(out) == 3
    assert any(path.name.startswith(".") for path in out.iterdir())  # the half-written temporary

    # 2. Resumed, then killed between "old last/ renamed aside" and "new last/ renamed in".
    assert_killed(run_driver(out, "--resume", "--kill-between-renames", "1"))
    assert not (out / "last").exists()  # the window: the name is absent ...
    assert any(path.name.startswith(".last.old-") for path in out.iterdir())  # ... the old one aside
    assert_every_checkpoint_is_whole(out)

    # 3. Resumed (recovering last/ from aside), then killed right after a random step.
    kill_step = random.Random(10).randrange(8, 15)
    assert_killed(run_driver(out, "--resume", "--kill-at-step", str(kill_step)))
    assert_every_checkpoint_is_whole(out)
    assert last_step(out) < kill_step  # the steps since the last checkpoint are redone

    # 4. Resumed to the end: the same weights, bit for bit, and the same logged losses.
    synthetic_train.train(tiny_config(), out, resume=True)
    final_weights = load_file(str(out / "last" / MODEL_FILE))
    assert final_weights.keys() == reference_weights.keys()
    for name, tensor in reference_weights.items():
        assert torch.equal(
            final_weights[name], tensor
        ), f"{name} differs from the uninterrupted run (kill step {kill_step})"
    assert_every_checkpoint_is_whole(out)
    assert not [path.name for path in out.iterdir() if path.name.startswith(".")]  # temporaries tidied

    def train_rows(folder: Path) -> list[tuple]:
        rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        return [(row["step"], row["train_loss"]) for row in rows if row["event"] == "train"]

    assert train_rows(out) == train_rows(tmp_path / "reference")


def test_disk_full_while_saving_keeps_the_previous_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = torch.nn.Linear(4, 4)
    folder = save_checkpoint(tmp_path / "last", model, {"version": 1}, trainer_state={"global_step": 1})
    before = (folder / MODEL_FILE).read_bytes()

    def write_half_then_fill_the_disk(model: torch.nn.Module, filename: str, *args: object, **kwargs: object) -> None:
        Path(filename).write_bytes(b"\0" * 64)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(checkpoint_module, "save_model", write_half_then_fill_the_disk)
    with torch.no_grad():
        model.weight.add_(1.0)
    with pytest.raises(
        OSError,
        match=r"could not write checkpoint '.*last' \(No space left on device, ENOSPC\).*previous checkpoint .* intact",
    ) as caught:
        save_checkpoint(tmp_path / "last", model, {"version": 2}, trainer_state={"global_step": 2})
    assert caught.value.errno == errno.ENOSPC
    assert (folder / MODEL_FILE).read_bytes() == before
    assert load_checkpoint_config(folder) == {"version": 1}
    assert load_trainer_state(folder)["global_step"] == 1
    assert sorted(path.name for path in tmp_path.iterdir()) == ["last"]  # no temporary left behind


def test_disk_full_during_cli_training_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_save_model = checkpoint_module.save_model
    calls = []

    def second_save_fills_the_disk(model: torch.nn.Module, filename: str, *args: object, **kwargs: object) -> None:
        calls.append(filename)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_save_model(model, filename, *args, **kwargs)

    monkeypatch.setattr(checkpoint_module, "save_model", second_save_fills_the_disk)
    out = tmp_path / "run"
    overrides = [argument for override in TINY for argument in ("--set", override)]
    assert main(["train", "copy", "--out", str(out), *overrides]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "No space left on device" in error[0] and "intact" in error[0]
    assert last_step(out) == 3  # the first checkpoint survived
