"""The system refusing a checkpoint's write, wherever in the save: one line naming the folder and the errno, exit 2.

ENOSPC (full disk), EDQUOT (quota), EROFS (read-only file system) and EIO (a failing disk,
often first seen at fsync) are raised at the point of a save where each really happens: the
weights' write, the temporary folder's creation, the fsync. The run's first checkpoint is
written normally, the second fails; ``last/`` is then still the first, complete and loadable,
and no temporary folder is left.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.tiny_runs import tiny_copy_options
from transformer_lab.cli import main
from transformer_lab.tasks.synthetic import train as synthetic_train
from transformer_lab.training import checkpoint as checkpoint_module
from transformer_lab.training import load_trainer_state

# errno, its name in the message, where in the save it is raised
FAULTS = [
    (errno.ENOSPC, "ENOSPC", "save_model"),
    (errno.EDQUOT, "EDQUOT", "save_model"),
    (errno.EROFS, "EROFS", "make_temporary_folder"),
    (errno.EIO, "EIO", "fsync"),
]


@pytest.mark.parametrize(("number", "name", "where"), FAULTS, ids=[f"{name} at {where}" for _, name, where in FAULTS])
def test_an_os_error_during_a_save_is_one_line_exit_2_and_the_previous_checkpoint_stands(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    number: int,
    name: str,
    where: str,
) -> None:
    saves = {"count": 0}
    real_write = checkpoint_module._write_atomically

    def counting_write(folder: Path, fill: Any) -> Path:
        saves["count"] += 1
        return real_write(folder, fill)

    def refuse(real: Any) -> Any:
        def maybe_refuse(*arguments: Any, **keywords: Any) -> Any:
            # The run's first save (best/ and last/ at step 2) goes through; the next fails.
            if saves["count"] > 2:
                raise OSError(number, os.strerror(number))
            return real(*arguments, **keywords)

        return maybe_refuse

    monkeypatch.setattr(checkpoint_module, "_write_atomically", counting_write)
    if where == "save_model":
        monkeypatch.setattr(checkpoint_module, "save_model", refuse(checkpoint_module.save_model))
    elif where == "make_temporary_folder":
        real_folder = checkpoint_module.make_temporary_folder
        monkeypatch.setattr(checkpoint_module, "make_temporary_folder", refuse(real_folder))
    else:
        monkeypatch.setattr(checkpoint_module, "_fsync_path", refuse(checkpoint_module._fsync_path))
    out = tmp_path / "run"
    options = tiny_copy_options(max_steps=4, train__eval_every_steps=2)
    assert main(["train", "copy", "--out", str(out), *options]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "Traceback" not in error
    assert error.startswith("transformer-lab train: error: could not write checkpoint ")
    assert f"{str(out)}/" in error and f"({os.strerror(number)}, {name})" in error
    assert "the previous checkpoint under that name (if any) is intact" in error
    assert load_trainer_state(out / "last")["global_step"] == 2
    synthetic_train.load(out / "last")
    assert not [path.name for path in out.iterdir() if ".tmp-" in path.name or ".old-" in path.name]
