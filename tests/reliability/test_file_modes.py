"""What a command writes gets the modes a plain open() and mkdir give under the umask, so others can read a run.

The atomic writers make a temporary file or folder and rename it into place; ``tempfile``'s
would be private (0600, 0700) for good. A file that replaces another keeps that file's mode.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from torch import nn

from tests.data.loopback import serve_folder
from transformer_lab import atomic_files
from transformer_lab.atomic_files import write_text_atomically
from transformer_lab.cli import main
from transformer_lab.data.download import download_file
from transformer_lab.training.checkpoint import save_checkpoint


@pytest.fixture(params=[0o022, 0o027], ids=["umask-022", "umask-027"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def tree_modes(folder: Path) -> dict[str, int]:
    """The mode of ``folder`` and of everything under it, by path relative to ``folder``."""
    return {".": mode(folder), **{str(path.relative_to(folder)): mode(path) for path in sorted(folder.rglob("*"))}}


def expected_modes(folder: Path, umask: int) -> dict[str, int]:
    """What open() and mkdir would have given each of them."""
    return {name: (0o777 if (folder / name).is_dir() else 0o666) & ~umask for name in tree_modes(folder)}


def test_a_checkpoint_folder_and_its_files_get_the_umasks_modes(tmp_path: Path, umask: int) -> None:
    folder = save_checkpoint(tmp_path / "best", nn.Linear(2, 2), {"d_model": 2}, extra_files={"vocabulary.txt": "a"})
    assert tree_modes(folder) == expected_modes(folder, umask)
    assert mode(folder) == 0o777 & ~umask  # a non-empty check: the folder is in it
    save_checkpoint(folder, nn.Linear(2, 2), {"d_model": 2})  # replacing a checkpoint, as every save does
    assert tree_modes(folder) == expected_modes(folder, umask)


def test_a_new_text_file_gets_the_umasks_mode(tmp_path: Path, umask: int) -> None:
    assert mode(write_text_atomically(tmp_path / "hypotheses.txt", "one\n")) == 0o666 & ~umask


@pytest.mark.parametrize("existing", [0o644, 0o640, 0o600, 0o664])
def test_a_replaced_text_file_keeps_its_mode(tmp_path: Path, umask: int, existing: int) -> None:
    path = tmp_path / "README.md"
    path.write_text("old\n", encoding="utf-8")
    path.chmod(existing)
    write_text_atomically(path, "new\n")
    assert (path.read_text(encoding="utf-8"), mode(path)) == ("new\n", existing)


def test_a_prepared_corpus_folder_gets_the_umasks_modes(tmp_path: Path, umask: int) -> None:
    source, target = tmp_path / "corpus.de", tmp_path / "corpus.en"
    source.write_text("".join(f"wort{n % 7} wort{n % 3}\n" for n in range(40)), encoding="utf-8")
    target.write_text("".join(f"word{n % 7} word{n % 3}\n" for n in range(40)), encoding="utf-8")
    out = tmp_path / "de-en"
    settings = [
        "--set",
        "data.vocab_size=280",
        "--set",
        "data.min_frequency=1",
        "--set",
        "data.num_carved_validation=4",
    ]
    assert main(["prepare", "translation", "--train", str(source), str(target), "--out", str(out), *settings]) == 0
    assert tree_modes(out) == expected_modes(out, umask)


def test_a_downloaded_file_gets_the_umasks_mode_and_a_replaced_one_keeps_its_own(tmp_path: Path, umask: int) -> None:
    served = tmp_path / "served"
    served.mkdir()
    text = "Eine Frau liest.\n"
    (served / "val.de.gz").write_bytes(gzip.compress(text.encode("utf-8")))
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    data = tmp_path / "data"
    with serve_folder(served) as server:
        fresh = download_file(f"{server.base_url}val.de.gz", data / "val.de", digest, gunzip=True, progress=False)
        assert (mode(data), mode(fresh)) == (0o777 & ~umask, 0o666 & ~umask)
        tampered = data / "val.en"
        tampered.write_text("not the file\n", encoding="utf-8")
        tampered.chmod(0o640)
        download_file(f"{server.base_url}val.de.gz", tampered, digest, gunzip=True, progress=False)
    assert (tampered.read_text(encoding="utf-8"), mode(tampered)) == (text, 0o640)


def test_a_private_files_new_text_is_never_readable_by_others_under_its_temporary_name(
    tmp_path: Path, umask: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("old\n", encoding="utf-8")
    path.chmod(0o600)
    seen = []
    real_fsync = os.fsync

    def look(descriptor: int) -> None:  # the text is written, not yet renamed into place
        seen.append(stat.S_IMODE(os.fstat(descriptor).st_mode))
        real_fsync(descriptor)

    monkeypatch.setattr(atomic_files.os, "fsync", look)
    write_text_atomically(path, "private\n")
    assert (seen, mode(path)) == ([0o600], 0o600)
