"""Under torchrun the first process of a machine prepares the data once; the others wait and read it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import sys, time
from pathlib import Path
from transformer_lab.training.run.once_per_machine import once_per_machine
folder = Path(sys.argv[1])

def work():
    with open(folder / "work.log", "a") as log:
        log.write("worked\\n")
    time.sleep(1.0)  # the waiting process must not read before this is done
    (folder / "data.txt").write_text("prepared")
    return "worked"

print(once_per_machine(work, lambda: "read " + (folder / "data.txt").read_text(), folder / ".ready"))
"""


def _start(folder: Path, rank: int) -> subprocess.Popen[str]:
    environment = {
        **os.environ,
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": "2",
        "MASTER_PORT": "29555",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"),
    }
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(folder)], env=environment, stdout=subprocess.PIPE, text=True
    )


def test_the_work_is_done_once_and_the_other_process_reads_its_result(tmp_path: Path) -> None:
    # A marker left by another launch must not release the waiting process early.
    (tmp_path / ".ready").write_text("another launch", encoding="utf-8")
    waiting = _start(tmp_path, rank=1)
    first = _start(tmp_path, rank=0)
    outputs = [process.communicate(timeout=120)[0].strip() for process in (first, waiting)]
    assert outputs == ["worked", "read prepared"]
    assert (tmp_path / "work.log").read_text() == "worked\n"


def test_a_single_process_just_works(tmp_path: Path, monkeypatch) -> None:
    from transformer_lab.training.run.once_per_machine import once_per_machine

    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert once_per_machine(lambda: 1, lambda: 2, tmp_path / ".ready") == 1
    assert not (tmp_path / ".ready").exists()
