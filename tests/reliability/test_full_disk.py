"""A really full disk (a small tmpfs) during a save or a preparation: one line naming the folder, nothing half-written.

Needs root and mount(8); skipped, saying why, where a tmpfs cannot be mounted.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from torch import nn

from transformer_lab.cli import main
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


def made_up_corpus(folder: Path, pairs: int) -> tuple[Path, Path]:
    """Two aligned files of ``pairs`` made-up sentences: their prepared ids outgrow the small disk."""
    generator = random.Random(0)
    words = [f"w{number}" for number in range(300)]
    source, target = folder / "corpus.de", folder / "corpus.en"
    for path in (source, target):
        lines = (" ".join(generator.choices(words, k=12)) for _ in range(pairs))
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return source, target


def test_prepare_on_a_full_disk_is_one_line_naming_the_folder(
    small_disk: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = made_up_corpus(tmp_path, 20_000)
    out = small_disk / "prepared"
    arguments = ["prepare", "translation", "--train", str(source), str(target), "--out", str(out), "--no-progress"]
    assert main([*arguments, "--set", "data.vocab_size=400"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error == [
        f"transformer-lab prepare: error: could not write {str(out)!r} (No space left on device, ENOSPC); "
        "nothing of it was kept"
    ]
    assert list(small_disk.iterdir()) == []


def test_train_with_its_cache_on_a_full_disk_says_how_to_move_the_cache(
    small_disk: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = made_up_corpus(tmp_path, 20_000)
    run = tmp_path / "run"
    overrides = ["data.vocab_size=400", f"data.cache_dir={small_disk}", "train.max_steps=1", "train.progress_bar=false"]
    arguments = ["train", "translation", "--train", str(source), str(target), "--out", str(run)]
    assert main([*arguments, *(item for override in overrides for item in ("--set", override))]) == 2
    (error,) = capsys.readouterr().err.strip().splitlines()
    disk = re.escape(repr(str(small_disk)))[:-1]  # the quoted folder, without its closing quote
    assert re.fullmatch(
        rf"transformer-lab train: error: could not write {disk}/pairs-\w+' \(No space left on device, ENOSPC\); "
        rf"nothing of it was kept; prepared corpora are cached in {disk}': set TRANSFORMER_LAB_CACHE "
        r"\(they go in its prepared/\) or data.cache_dir \(they go in it\) to a folder on a disk with room",
        error,
    ), error
    assert [path for path in small_disk.rglob("*") if path.is_file()] == []  # nothing half-written
    assert not run.exists()  # no checkpoint, and the folder the run made is gone: no step was taken
