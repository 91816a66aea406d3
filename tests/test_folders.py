"""A new output folder appears complete or not at all; a full disk says which folder and that nothing was kept."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest

from transformer_lab.folders import DISK_ERRNOS, FolderWriteError, write_folder


def failing_write(code: int):
    def write(folder: Path) -> None:
        (folder / "half.bin").write_bytes(b"\0" * 100)
        raise OSError(code, os.strerror(code))

    return write


def test_a_written_folder_appears_whole(tmp_path: Path) -> None:
    out = write_folder(tmp_path / "out", lambda folder: (folder / "a.txt").write_text("a", encoding="utf-8"))
    assert out == tmp_path / "out"
    assert [path.name for path in tmp_path.iterdir()] == ["out"]
    assert (out / "a.txt").read_text(encoding="utf-8") == "a"


@pytest.mark.parametrize("code", sorted(DISK_ERRNOS))
def test_a_full_disk_names_the_folder_and_keeps_nothing(tmp_path: Path, code: int) -> None:
    with pytest.raises(FolderWriteError) as raised:
        write_folder(tmp_path / "out", failing_write(code))
    assert isinstance(raised.value, OSError) and raised.value.errno == code
    name = errno.errorcode[code]
    assert str(raised.value) == (
        f"could not write {str(tmp_path / 'out')!r} ({os.strerror(code)}, {name}); nothing of it was kept"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_folder_is_named_as_shown(tmp_path: Path) -> None:
    with pytest.raises(FolderWriteError, match=re.escape(f"could not write {str(tmp_path / 'corpus')!r} (")):
        write_folder(tmp_path / ".corpus.new-1", failing_write(errno.ENOSPC), shown_as=tmp_path / "corpus")
    assert list(tmp_path.iterdir()) == []


def test_other_errors_pass_unchanged(tmp_path: Path) -> None:
    """An input that cannot be read is not the output's fault: its error is not renamed."""
    with pytest.raises(FileNotFoundError) as raised:
        write_folder(tmp_path / "out", failing_write(errno.ENOENT))
    assert str(raised.value) == f"[Errno {errno.ENOENT}] {os.strerror(errno.ENOENT)}"
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="expected a new folder"):
        write_folder(tmp_path, failing_write(errno.ENOSPC))
