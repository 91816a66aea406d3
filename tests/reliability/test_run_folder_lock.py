"""One process trains a run folder: a second writer is refused naming the holder; early kills never stick."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.tiny_runs import tiny_copy_options
from transformer_lab.cli import main
from transformer_lab.training import averaging
from transformer_lab.training.run import run_lock
from transformer_lab.training.run.run_folder import prune_folder
from transformer_lab.training.run.run_lock import LOCK_FILE, RunFolderLock, folder_holder

TINY_COPY = tiny_copy_options()

HOLD = """
import sys, time
from pathlib import Path
from transformer_lab.training.run.run_lock import RunFolderLock
with RunFolderLock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def held_folder(tmp_path: Path):
    """A run folder whose lock another live process holds."""
    out = tmp_path / "run"
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True, env=environment
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    yield out, holder.pid
    holder.kill()
    holder.wait()


def test_a_second_train_or_resume_in_a_held_folder_is_refused_naming_the_holder(
    held_folder: tuple[Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    out, pid = held_folder
    assert main(["train", "copy", "--out", str(out), *TINY_COPY]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"transformer-lab train: error: --out: {out} is being trained by process {pid} on ")
    assert "\n" not in error
    assert main(["train", "copy", "--out", str(out), "--resume"]) == 2
    assert f"is being trained by process {pid}" in capsys.readouterr().err
    assert sorted(path.name for path in out.iterdir()) == [LOCK_FILE]  # nothing written beside the lock
    assert folder_holder(out) == f"{(out / LOCK_FILE).read_text(encoding='utf-8')}"
    code = main(["average-checkpoints", "--run", str(out), "--last", "2", "--out", str(out)])
    assert code == 2
    assert f"--out: {out} is being trained by process {pid}" in capsys.readouterr().err


def test_a_lock_left_by_a_dead_process_is_taken_over_and_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_FILE).write_text("process 999999 on elsewhere (since 2026-01-01 00:00:00)", encoding="utf-8")
    caplog.set_level("INFO", logger="transformer_lab.training.run.run_lock")
    assert main(["train", "copy", "--out", str(out), *TINY_COPY]) == 0
    assert "taking over the lock left by process 999999 on elsewhere" in caplog.text
    assert (out / "last").is_dir()
    assert (out / LOCK_FILE).read_text(encoding="utf-8") == ""  # released at the end
    assert folder_holder(out) is None
    with RunFolderLock(out):  # and free for the next run
        pass


def test_any_number_of_runs_killed_before_their_first_save_leave_the_folder_restartable(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    for number in (1, 2, 3):
        (out / f"metrics.jsonl.interrupted-{number}").write_text(f'{{"run": {number}}}\n', encoding="utf-8")
    (out / "metrics.jsonl").write_text('{"run": 4}\n', encoding="utf-8")
    assert main(["train", "copy", "--out", str(out), "--resume"]) == 2  # nothing to resume: said plainly
    assert main(["train", "copy", "--out", str(out), *TINY_COPY]) == 0
    assert (out / "metrics.jsonl.interrupted-4").read_text(encoding="utf-8") == '{"run": 4}\n'
    assert (out / "last").is_dir()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("model.d_model=x", r"model\.d_model: expected an int, got 'x'"),
        # Where CUDA is, cuda:99 is past the last GPU; elsewhere there is no CUDA at all.
        ("train.device=cuda:99", r"train\.device: expected (a device this machine has|a CUDA index below)"),
    ],
)
def test_a_run_refused_before_its_first_file_leaves_no_folder(
    tmp_path: Path, setting: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(["train", "copy", "--out", str(out), *TINY_COPY, "--set", setting]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and re.search(message, error), error
    assert not out.exists()  # nor its lock file: the next run starts as in a new folder
    # A folder that existed before keeps its other files.
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    assert main(["train", "copy", "--out", str(out), *TINY_COPY, "--set", setting]) == 2
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine"


def _read_only(*arguments: object, **keywords: object) -> None:
    raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(arguments[0]))


def test_a_run_folder_on_a_read_only_disk_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Said as prepare and average-checkpoints say it (exit 2), not as a failed run with errno 30."""
    out = tmp_path / "run"
    with monkeypatch.context() as patched:
        patched.setattr(Path, "mkdir", _read_only)
        assert main(["train", "copy", "--out", str(out), *TINY_COPY]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"transformer-lab train: error: --out: could not write '{out}' (Read-only file system, EROFS); nothing was "
        "written"
    ]  # proven before any work, and named as the option
    assert not out.exists()
    # A folder that exists (a run to resume on a disk remounted read-only) is said to be unchanged.
    out.mkdir()
    monkeypatch.setattr(run_lock, "open_lock_file", _read_only)
    assert main(["train", "copy", "--out", str(out), *TINY_COPY]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"transformer-lab train: error: --out: could not write '{out}' (Read-only file system, EROFS); "
        "nothing in it was changed"
    ]
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("code", [errno.EACCES, errno.EPERM], ids=["EACCES", "EPERM"])
def test_a_run_folder_not_this_users_to_write_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], code: int
) -> None:
    """`train --out /sys/x` (EPERM even for root), or a folder of another user's (EACCES)."""

    def refused(*arguments: object, **keywords: object) -> None:
        raise PermissionError(code, os.strerror(code), str(arguments[0]))

    out = tmp_path / "run"
    with monkeypatch.context() as patched:
        patched.setattr(Path, "mkdir", refused)
        assert main(["train", "copy", "--out", str(out), *TINY_COPY]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"transformer-lab train: error: --out: could not write '{out}' ({os.strerror(code)}, "
        f"{errno.errorcode[code]}); nothing was written"
    ]  # was: "transformer-lab train: error: [Errno 1] Operation not permitted: '/sys/x'"
    assert not out.exists()


@pytest.mark.parametrize("pruned_during", ["_check_one_vocabulary", "load_model_weights"])
@pytest.mark.parametrize("still_training", [True, False], ids=["still training", "not training"])
def test_a_step_pruned_while_averaged_is_named_with_the_run_still_training(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    pruned_during: str,
    still_training: bool,
) -> None:
    out = tmp_path / "run"
    options = tiny_copy_options(3, train__eval_every_steps=1, train__keep_last=3)
    assert main(["train", "copy", "--out", str(out), *options]) == 0
    oldest = out / "step-000001"
    original = getattr(averaging, pruned_during)

    def prune_then_read(*arguments: object, **keywords: object) -> object:
        # What a run saving its next step does to its oldest one, between the listing and the reading.
        if oldest.is_dir():
            prune_folder(oldest)
        return original(*arguments, **keywords)

    monkeypatch.setattr(averaging, pruned_during, prune_then_read)
    averaged = tmp_path / "averaged"
    command = ["average-checkpoints", "--run", str(out), "--last", "3", "--out", str(averaged)]
    if still_training:
        with RunFolderLock(out):
            code = main(command)
    else:
        code = main(command)
    error = capsys.readouterr().err.strip()
    assert code == 1
    assert "\n" not in error
    assert error.startswith(
        f"transformer-lab average-checkpoints: failed: --run: {oldest} was deleted while it was read"
    )
    if still_training:
        assert f"{out} is still training (process {os.getpid()} on " in error
    else:
        assert "by another process" in error
    assert not averaged.exists()


def test_a_step_pruned_between_the_listing_and_the_check_is_not_called_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A step folder listed, then pruned by the run before it is checked, is gone, not "not a complete checkpoint"."""
    out = tmp_path / "run"
    assert (
        main(["train", "copy", "--out", str(out), *tiny_copy_options(2, train__eval_every_steps=1, train__keep_last=2)])
        == 0
    )
    listed = list(out.iterdir())
    gone = out / "step-000000"  # listed by iterdir, deleted before its files were looked at
    monkeypatch.setattr(Path, "iterdir", lambda self: iter([*listed, gone]) if self == out else iter([]))
    averaged = tmp_path / "averaged"
    assert main(["average-checkpoints", "--run", str(out), "--last", "1", "--out", str(averaged)]) == 0
    assert "skipping" not in capsys.readouterr().err
    assert (averaged / "model.safetensors").is_file()
