"""Side outputs fail softly: a disk that refuses TensorBoard's event files, a model card or a figure is one warning.

`train --tensorboard` on a read-only or full disk used to end the run with exit 1, a raw
errno and a thread traceback; `evaluate` on a read-only checkpoint failed after printing
its scores. Now the side output is named in one line and the work goes on; the evaluation's own
output, beside a read-only checkpoint by default, is refused before the work, naming --output.

The read-only and full disks are real: tmpfs mounts (skipped, saying why, where none can
be mounted); a file in the place of the event folder needs nothing.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.tiny_runs import tiny_copy_options
from transformer_lab.cli import main
from transformer_lab.training.model_card import CARD_FILE


def _mount(folder: Path, *options: str) -> None:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    mounted = subprocess.run(["mount", *options, str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount here: {mounted.stderr.decode(errors='replace').strip()}")


@pytest.fixture
def mounts() -> Iterator[list[Path]]:
    """Folders to unmount after the test, newest first."""
    mounted: list[Path] = []
    yield mounted
    for folder in reversed(mounted):
        subprocess.run(["umount", str(folder)], check=False)


def _full(folder: Path) -> None:
    """Fill the disk ``folder`` is on until it refuses another byte."""
    with (folder / "filler").open("wb", buffering=0) as filler:
        try:
            while True:
                filler.write(bytes(4096))
        except OSError as error:
            assert error.errno == errno.ENOSPC


def _trains_on_with_one_warning(
    out: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, said: str
) -> None:
    caplog.set_level("WARNING", logger="transformer_lab.training.tensorboard_log")
    assert main(["train", "copy", "--out", str(out), "--tensorboard", *tiny_copy_options(max_steps=3)]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Exception in thread" not in err, err
    warnings = [
        record.getMessage()
        for record in caplog.records
        if record.levelname == "WARNING" and record.name == "transformer_lab.training.tensorboard_log"
    ]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"tensorboard: could not write {out / 'tensorboard'} ({said}); training goes on")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert rows[-1]["event"] == "eval" and rows[-1]["step"] == 3  # metrics.jsonl still written, to the end
    assert (out / "last" / "model.safetensors").is_file()


@pytest.mark.parametrize("disk", ["read-only", "full"])
def test_tensorboard_on_a_disk_that_refuses_it_is_one_warning_and_training_goes_on(
    tmp_path: Path,
    mounts: list[Path],
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    disk: str,
) -> None:
    out = tmp_path / "run"
    events = out / "tensorboard"
    events.mkdir(parents=True)
    if disk == "read-only":
        _mount(events, "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs")
        mounts.append(events)
        said = "Read-only file system, EROFS"
    else:
        _mount(events, "-t", "tmpfs", "-o", "size=64k", "tmpfs")
        mounts.append(events)
        _full(events)
        said = "No space left on device, ENOSPC"
    _trains_on_with_one_warning(out, capsys, caplog, said)


def test_a_file_in_the_place_of_the_event_folder_is_one_warning_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "tensorboard").write_text("not a folder\n", encoding="utf-8")
    _trains_on_with_one_warning(out, capsys, caplog, "File exists, EEXIST")
    assert (out / "tensorboard").read_text(encoding="utf-8") == "not a folder\n"


def test_evaluate_on_a_read_only_checkpoint_prints_its_scores_and_names_what_it_could_not_write(
    classification_checkpoint: Path, tmp_path: Path, mounts: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = Path(shutil.copytree(classification_checkpoint, tmp_path / "checkpoint"))
    _mount(checkpoint, "--bind", str(checkpoint))
    mounts.append(checkpoint)
    _mount(checkpoint, "-o", "remount,bind,ro")
    before = {path.name: path.read_bytes() for path in checkpoint.iterdir()}
    figure = checkpoint / "confusion.png"
    data = classification_checkpoint.parents[1] / "data"
    arguments = ["evaluate", "classification", "--checkpoint", str(checkpoint), "--data-dir", str(data)]
    # The report is the evaluation's own output, written where asked; the card and the figure are side outputs.
    arguments += ["--output", str(tmp_path / "report.json"), "--confusion-png", str(figure)]
    assert main(arguments) == 0
    captured = capsys.readouterr()
    assert "accuracy" in captured.out
    assert "Traceback" not in captured.err
    assert captured.err.strip().splitlines() == [
        f"confusion matrix: not written: could not write '{figure}' (Read-only file system, EROFS); "
        "nothing was written",
        f"model card: not updated: could not write '{checkpoint / CARD_FILE}' (Read-only file system, EROFS)",
    ]
    assert {path.name: path.read_bytes() for path in checkpoint.iterdir()} == before


@pytest.mark.parametrize("task", ["translation", "classification", "couplet"])
def test_evaluate_on_a_read_only_checkpoint_without_output_is_refused_before_the_work(
    task: str, request: pytest.FixtureRequest, tmp_path: Path, mounts: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    given = request.getfixturevalue(f"{task}_checkpoint")
    checkpoint = Path(shutil.copytree(given, tmp_path / "checkpoint"))
    _mount(checkpoint, "--bind", str(checkpoint))
    mounts.append(checkpoint)
    _mount(checkpoint, "-o", "remount,bind,ro")
    before = {path.name: path.read_bytes() for path in checkpoint.iterdir()}
    arguments = ["evaluate", task, "--checkpoint", str(checkpoint)]
    if task == "translation":
        (tmp_path / "test.de").write_text("Ein Mann fährt Fahrrad.\n", encoding="utf-8")
        (tmp_path / "test.en").write_text("A man rides a bike.\n", encoding="utf-8")
        arguments += ["--source", str(tmp_path / "test.de"), "--reference", str(tmp_path / "test.en")]
    elif task == "classification":
        arguments += ["--data-dir", str(given.parents[1] / "data")]
    # The default output goes beside the checkpoint: refused before the split is scored, with the option that
    # moves it (was: exit 1, "failed: [Errno 30] Read-only file system: ..." once every line was decoded).
    assert main(arguments) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(f"transformer-lab evaluate: error: could not write '{checkpoint}/")
    assert line.endswith(" (Read-only file system, EROFS); nothing was written; --output names a file elsewhere")
    assert {path.name: path.read_bytes() for path in checkpoint.iterdir()} == before
