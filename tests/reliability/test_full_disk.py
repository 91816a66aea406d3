"""A really full disk during a save (a small tmpfs): one line naming the checkpoint, the previous one intact.

Needs root and mount(8); skipped, saying why, where a tmpfs cannot be mounted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from torch import nn

from transformer_lab.training.checkpoint import load_checkpoint_config, load_model_weights, save_checkpoint


@pytest.fixture
def small_disk(tmp_path: Path):
    folder = tmp_path / "disk"
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root and mount(8)")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    yield folder
    subprocess.run(["umount", str(folder)], check=False)


def test_a_save_that_fills_the_disk_is_an_os_error_naming_the_checkpoint(small_disk: Path) -> None:
    small = nn.Linear(8, 8)
    folder = save_checkpoint(small_disk / "last", small, {"version": 1}, trainer_state={"step": 1})
    large = nn.Linear(256, 512)  # 0.5 MB of weights: more than the disk holds
    with pytest.raises(OSError, match=r"could not write checkpoint .*last.* intact") as raised:
        save_checkpoint(folder, large, {"version": 2}, trainer_state={"step": 2})
    assert raised.value.errno == 28  # ENOSPC, whichever library was writing
    assert sorted(path.name for path in small_disk.iterdir()) == ["last"]
    assert load_checkpoint_config(folder) == {"version": 1}
    restored = load_model_weights(folder, nn.Linear(8, 8))
    assert all((a == b).all() for a, b in zip(restored.parameters(), small.parameters()))


def test_trainer_state_that_fills_the_disk_is_an_os_error_too(small_disk: Path) -> None:
    import torch

    with pytest.raises(OSError) as raised:
        save_checkpoint(small_disk / "last", nn.Linear(2, 2), {}, trainer_state={"big": torch.zeros(200_000)})
    assert raised.value.errno == 28
    assert list(small_disk.iterdir()) == []
