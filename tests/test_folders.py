"""A new output folder appears complete or not at all; a full disk says which folder and that nothing was kept."""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from transformer_lab.data.prepared_cache import MANIFEST_FILE, cached_folder
from transformer_lab.folders import (
    DISK_ERRNOS,
    WRITING_LOCK,
    FolderWriteError,
    remove_abandoned_copies,
    write_folder,
)


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


def test_a_copy_left_by_a_killed_writer_is_removed_by_the_next_write(tmp_path: Path) -> None:
    script = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from transformer_lab.folders import write_folder\n"
        "def write(folder):\n"
        "    (folder / 'ids.bin').write_bytes(bytes(1000))\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "write_folder(Path(sys.argv[1]), write)\n"
    )
    source = Path(__file__).resolve().parents[1] / "src"
    killed = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "corpus")], env={**os.environ, "PYTHONPATH": str(source)}
    )
    assert killed.returncode == -signal.SIGKILL
    lock, left = sorted(tmp_path.iterdir())  # its writer lock and the hidden, unfinished copy
    assert lock.name == ".corpus.lock" and lock.read_text(encoding="utf-8").startswith("process ")
    assert left.name.startswith(".corpus.partial-") and (left / "ids.bin").is_file()
    write_folder(tmp_path / "other", lambda folder: (folder / "a.txt").write_text("a", encoding="utf-8"))
    assert [path.name for path in tmp_path.iterdir()] == ["other"]
    assert [path.name for path in (tmp_path / "other").iterdir()] == ["a.txt"]  # no lock file left in it


def test_a_running_writers_copy_and_folders_not_ours_are_left_alone(tmp_path: Path) -> None:
    foreign = tmp_path / ".notes.partial-1"  # a name like ours, but no lock file: not a copy of ours
    foreign.mkdir()
    seen = []

    def write(folder: Path) -> None:
        # Another writer beside this one, while this one runs: it must not take this copy.
        write_folder(tmp_path / "second", lambda other: (other / "b.txt").write_text("b", encoding="utf-8"))
        seen.append(folder.is_dir())
        assert remove_abandoned_copies(tmp_path) == []

    write_folder(tmp_path / "first", write)
    assert seen == [True]
    assert sorted(path.name for path in tmp_path.iterdir()) == [".notes.partial-1", "first", "second"]


def test_the_prepared_cache_removes_abandoned_copies_even_when_it_reuses_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "pairs-1234"

    def prepare(new: Path) -> None:
        (new / MANIFEST_FILE).write_text("{}", encoding="utf-8")

    assert cached_folder(folder, lambda _: None, prepare) == folder
    abandoned = tmp_path / ".pairs-5678.partial-99-abcdef12"  # its writer's lock is gone
    abandoned.mkdir()
    (abandoned / WRITING_LOCK).write_bytes(b"")
    assert cached_folder(folder, lambda _: None, prepare) == folder  # reused, and the copy removed
    assert [path.name for path in tmp_path.iterdir()] == ["pairs-1234"]


def test_the_prepared_cache_removes_the_copies_a_stop_left_while_it_replaced_a_stale_entry(tmp_path: Path) -> None:
    # A stop between the renames of an entry prepared again left a hidden full copy that nothing removed.
    folder = tmp_path / "pairs-1234"

    def prepare(new: Path) -> None:
        (new / MANIFEST_FILE).write_text("{}", encoding="utf-8")

    assert cached_folder(folder, lambda _: None, prepare) == folder
    left = [tmp_path / ".pairs-1234.stale-99-abcdef12", tmp_path / ".pairs-1234.new-99-abcdef12"]
    another_entry = tmp_path / ".pairs-5678.stale-98-abcdef12"  # its writer holds its own entry's lock
    for copy in (*left, another_entry):
        copy.mkdir()
        (copy / "ids.bin").write_bytes(b"\0" * 64)
    assert cached_folder(folder, lambda _: None, prepare) == folder
    assert sorted(path.name for path in tmp_path.iterdir()) == [another_entry.name, "pairs-1234"]


def test_an_output_that_is_a_pipe_or_a_link_to_a_file_passes_the_check_before_the_work(tmp_path: Path) -> None:
    # `classify --output >(cat)` was "could not write '/dev/fd/63' (No such file or directory, ENOENT)": the
    # probe tried to make a file in /dev/fd. A link's target folder is the one a write goes to.
    from transformer_lab.folders import check_file_output

    read_end, write_end = os.pipe()
    try:
        check_file_output(Path(f"/dev/fd/{write_end}"), "--output")
    finally:
        os.close(read_end)
        os.close(write_end)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "real.txt").write_text("old\n", encoding="utf-8")
    (tmp_path / "link.txt").symlink_to(tmp_path / "elsewhere" / "real.txt")
    check_file_output(tmp_path / "link.txt", "--output")
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["elsewhere", "link.txt", "real.txt"]
