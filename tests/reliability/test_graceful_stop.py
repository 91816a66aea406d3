"""SIGTERM or SIGINT during training: the step in progress ends, last/ is saved, one line, --resume continues."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.reliability.tiny_runs import tiny_copy_options
from transformer_lab.training.checkpoint import load_trainer_state

MAX_STEPS = 60
ARGUMENTS = tiny_copy_options(MAX_STEPS, train__log_every_steps=1, train__eval_every_steps=0)


def _train(out: Path, *extra: str) -> subprocess.Popen[str]:
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    command = [sys.executable, "-m", "transformer_lab", "train", "copy", "--out", str(out), *ARGUMENTS, *extra]
    return subprocess.Popen(command, env=environment, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _wait_for_steps(out: Path, steps: int, process: subprocess.Popen[str]) -> None:
    log = out / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if log.exists() and len(log.read_text(encoding="utf-8").splitlines()) >= steps:
            return
        time.sleep(0.05)
    raise AssertionError(f"the run did not log {steps} steps (exit {process.poll()})")


@pytest.mark.parametrize("signal_number, exit_code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stop_signal_saves_the_step_and_resume_continues(tmp_path: Path, signal_number: int, exit_code: int) -> None:
    out = tmp_path / "run"
    process = _train(out)
    _wait_for_steps(out, 3, process)
    process.send_signal(signal_number)
    _, error = process.communicate(timeout=120)
    assert process.returncode == exit_code, error
    lines = [line for line in error.strip().splitlines() if line.startswith("transformer-lab train:")]
    assert len(lines) == 1 and "Traceback" not in error, error
    name = signal.Signals(signal_number).name
    assert f"interrupted by {name} at step " in lines[0] and "--resume continues" in lines[0]
    step = int(lines[0].split(" at step ")[1].split(";")[0])
    assert 3 <= step < MAX_STEPS
    assert load_trainer_state(out / "last")["global_step"] == step
    logged = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert logged[-1] == step  # nothing logged past the saved step

    resumed = _train(out, "--resume")
    _, error = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, error
    assert load_trainer_state(out / "last")["global_step"] == MAX_STEPS
