"""SIGTERM or SIGINT during training: the step in progress ends, last/ is saved, one line, --resume continues.

SIGTERM while a corpus is prepared: one line, and no unfinished folder left behind.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.reliability.tiny_runs import tiny_copy_options
from transformer_lab.cli import main
from transformer_lab.data import pair_stream, prepared_pairs
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
    assert error.count("interrupted by") == 1, error  # said once (was: the log's line, then the command's)
    step = int(lines[0].split(" at step ")[1].split(";")[0])
    assert 3 <= step < MAX_STEPS
    assert load_trainer_state(out / "last")["global_step"] == step
    logged = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert logged[-1] == step  # nothing logged past the saved step

    resumed = _train(out, "--resume")
    _, error = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, error
    assert load_trainer_state(out / "last")["global_step"] == MAX_STEPS


def test_a_demo_stopped_by_a_signal_names_the_command_that_continues_it_and_that_command_does(tmp_path: Path) -> None:
    # The demo said "--resume continues from it", an option the demo refuses ("unrecognized arguments").
    out = tmp_path / "my demo"
    options = tiny_copy_options(MAX_STEPS, data__num_validation=20, data__num_test=40, train__log_every_steps=1)
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    command = [sys.executable, "-m", "transformer_lab"]
    process = subprocess.Popen(
        [*command, "demo", "--out", str(out), *options],
        env=environment,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    _wait_for_steps(out, 3, process)
    process.send_signal(signal.SIGINT)
    _, error = process.communicate(timeout=120)
    assert process.returncode == 130, error
    lines = [line for line in error.strip().splitlines() if line.startswith("transformer-lab demo:")]
    assert len(lines) == 1 and "Traceback" not in error and "--resume continues" not in error, error
    step = load_trainer_state(out / "last")["global_step"]
    continuing = shlex.join(["transformer-lab", "train", "copy", "--out", str(out), "--resume", *options])
    assert lines[0] == (
        f"transformer-lab demo: interrupted by SIGINT at step {step}; {out / 'last'} saved, `{continuing}` trains it "
        "on (the demo itself starts anew each time)"
    )
    resumed = subprocess.run(
        [*command, *shlex.split(continuing)[1:]], env=environment, capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed from {out / 'last'} at step {step}" in resumed.stderr
    assert load_trainer_state(out / "last")["global_step"] == MAX_STEPS


def test_a_stop_between_evaluations_adds_no_step_checkpoint_so_resume_keeps_the_same_ones(tmp_path: Path) -> None:
    # step-N/ folders are the keep_last newest evaluations'; the stop's own save is last/ only
    # (was: a step-N/ at the stop's step, which a resumed run then kept in place of an
    # evaluated one, so average-checkpoints averaged other weights than the uninterrupted run's).
    out = tmp_path / "run"
    every = ("--set", "train.eval_every_steps=20", "--set", "train.keep_last=2")
    process = _train(out, *every)
    _wait_for_steps(out, 3, process)
    process.send_signal(signal.SIGTERM)
    _, error = process.communicate(timeout=120)
    assert process.returncode == 143, error
    step = load_trainer_state(out / "last")["global_step"]
    evaluated = [f"step-{done:06d}" for done in range(20, step + 1, 20)]
    assert sorted(path.name for path in out.glob("step-*")) == evaluated[-2:]

    resumed = _train(out, "--resume", *every)
    _, error = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, error
    assert sorted(path.name for path in out.glob("step-*")) == ["step-000040", "step-000060"]


def _made_up_pairs(folder: Path, pairs: int) -> tuple[Path, Path]:
    source, target = folder / "corpus.de", folder / "corpus.en"
    for path, stem in ((source, "wort"), (target, "word")):
        path.write_text("".join(f"{stem}{n % 97} {stem}{n % 13} {stem}{n % 7}\n" for n in range(pairs)), "utf-8")
    return source, target


@pytest.fixture
def sigterm_at_the_second_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Preparation in chunks of 50 pairs, and SIGTERM to this process when the second is stored."""
    monkeypatch.setattr(pair_stream, "CHUNK_PAIRS", 50)
    append = prepared_pairs._append_encoded
    calls = []

    def append_then_signal(*arguments: object) -> None:
        append(*arguments)
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(prepared_pairs, "_append_encoded", append_then_signal)


@pytest.mark.usefixtures("sigterm_at_the_second_chunk")
def test_sigterm_while_preparing_is_one_line_and_leaves_no_partial_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = _made_up_pairs(tmp_path, 1_000)
    before = signal.getsignal(signal.SIGTERM)
    out = tmp_path / "prepared" / "de-en"
    arguments = ["prepare", "translation", "--train", str(source), str(target), "--out", str(out), "--no-progress"]
    assert main([*arguments, "--set", "data.vocab_size=300"]) == 143
    assert capsys.readouterr().err.strip().splitlines()[-1] == "transformer-lab prepare: stopped by SIGTERM"
    assert list((tmp_path / "prepared").iterdir()) == []  # neither the folder nor its unfinished copy
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.usefixtures("sigterm_at_the_second_chunk")
def test_sigterm_while_train_prepares_its_cache_leaves_no_partial_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = _made_up_pairs(tmp_path, 1_000)
    cache, run = tmp_path / "cache", tmp_path / "run"
    overrides = ["data.vocab_size=300", f"data.cache_dir={cache}", "train.max_steps=1", "train.progress_bar=false"]
    arguments = ["train", "translation", "--train", str(source), str(target), "--out", str(run)]
    assert main([*arguments, *(item for override in overrides for item in ("--set", override))]) == 143
    assert capsys.readouterr().err.strip().splitlines()[-1] == "transformer-lab train: stopped by SIGTERM"
    assert [path for path in cache.rglob("*") if path.is_file()] == []
    assert not run.exists()  # no step was taken, nothing to resume: the folder the run made is gone


# The child: importing torch waits (after saying so on stdout) until the test's Ctrl-C arrives;
# the command line starts as the console script (pyproject.toml's entry point, KIND "console
# script") or `python -m transformer_lab` starts it.
_SLOW_TORCH_IMPORT = """
import builtins, sys, time
real_import = builtins.__import__
def slow_import(name, *arguments, **keywords):
    if name == "torch" and "torch" not in sys.modules:
        print("importing torch", flush=True)
        time.sleep(120)
    return real_import(name, *arguments, **keywords)
builtins.__import__ = slow_import
sys.argv = ["transformer-lab", "explain"]
if KIND == "console script":
    import importlib
    module, function = ENTRY.split(":")
    sys.exit(getattr(importlib.import_module(module), function)())
import runpy
runpy.run_module("transformer_lab", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("entry", ["console script", "python -m transformer_lab"])
def test_ctrl_c_while_torch_is_imported_is_one_line_and_exit_130(entry: str) -> None:
    root = Path(__file__).resolve().parents[2]
    # A regular expression, not tomllib: the tests run on Python 3.10 too.
    (script,) = re.findall(r'^transformer-lab = "(.+)"$', (root / "pyproject.toml").read_text(), flags=re.MULTILINE)
    child = f"KIND = {entry!r}\nENTRY = {script!r}\n" + _SLOW_TORCH_IMPORT
    environment = {**os.environ, "PYTHONPATH": str(root / "src")}
    process = subprocess.Popen(
        [sys.executable, "-c", child], env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "importing torch\n"  # the child is inside the import now
    process.send_signal(signal.SIGINT)
    output, error = process.communicate(timeout=60)
    assert (process.returncode, output, error) == (130, "", "transformer-lab: interrupted\n")


# timeout(1) sends SIGTERM to the command and then to its process group: the command gets it twice at once.
_STOPPED_TWICE_AT_ONCE = """
import os, signal, sys, time
from transformer_lab.training.run.stop_signal import StopRequests, Terminated, raise_on_sigterm

def twice() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.05)  # the first one's handler has run when its copy arrives
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.05)

if sys.argv[1] == "prepare":
    with raise_on_sigterm():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except Terminated:
            os.kill(os.getpid(), signal.SIGTERM)  # the copy, during the clean-up
            time.sleep(0.05)
            print("cleaned up", flush=True)
            time.sleep(0.6)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
            print("not stopped", flush=True)
else:
    with StopRequests() as stop:
        twice()
        print("saving last/" if stop.requested else "not asked", flush=True)
        time.sleep(0.6)  # a signal this much later is a second request: now
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        print("not stopped", flush=True)
"""


@pytest.mark.parametrize("where", ["prepare", "train"])
def test_a_stop_signal_sent_twice_at_once_is_one_request(where: str) -> None:
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    command = [sys.executable, "-c", _STOPPED_TWICE_AT_ONCE, where]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=60)
    # The unfinished folder's removal runs to its end, or the checkpoint is saved; a signal half a
    # second later is a second request and still ends the process at once.
    expected = "cleaned up\n" if where == "prepare" else "saving last/\n"
    assert (done.stdout, done.returncode) == (expected, -signal.SIGTERM)


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_during_the_closing_validation_saves_its_step(tmp_path: Path, signal_number: int) -> None:
    # A run whose last step is no evaluation step validates once more at its end; a signal there ended the
    # process (SIGTERM) or the run (SIGINT) without saving, and every step since the last save was lost.
    from tests.training.test_trainer import D_MODEL, TinyModel, config, epoch_batches, loss_fn
    from transformer_lab.training import Trainer, TrainingInterrupted

    def evaluate(model: object) -> dict[str, float]:
        if trainer.global_step == 7:  # the closing validation: steps 2, 4 and 6 were saved by theirs
            os.kill(os.getpid(), signal_number)
        return {"val_loss": 1.0}

    trainer = Trainer(
        TinyModel(),
        config(max_steps=7, eval_every_steps=2, keep_last=0),
        tmp_path,
        loss_fn,
        epoch_batches,
        d_model=D_MODEL,
        evaluate_fn=evaluate,
    )
    with pytest.raises(TrainingInterrupted) as stopped:
        trainer.fit()
    assert stopped.value.signal_number == signal_number
    assert load_trainer_state(tmp_path / "last")["global_step"] == 7
    logged = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [row["step"] for row in logged if row["event"] == "eval"] == [2, 4, 6, 7]


# The child: a command that ends well, then a Ctrl-C during the interpreter's shutdown (an exit hook,
# registered last so it runs first, sends it while torch's own hooks are still to run).
_CTRL_C_AT_SHUTDOWN = """
import atexit, os, signal, sys, time
from transformer_lab.console import main

def ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.1)

code = main(["explain"])
atexit.register(ctrl_c)
sys.exit(code)
"""


def test_ctrl_c_after_the_command_has_ended_keeps_its_exit_code_without_a_traceback() -> None:
    # Was "Exception ignored in atexit callback ... KeyboardInterrupt" under exit 0, or a death by the signal.
    root = Path(__file__).resolve().parents[2]
    environment = {**os.environ, "PYTHONPATH": str(root / "src"), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-c", _CTRL_C_AT_SHUTDOWN], env=environment, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0
    assert result.stdout  # explain printed its walk
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr
