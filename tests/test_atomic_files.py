"""An output file is written whole or not at all: the previous file stays until the new one is complete."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from transformer_lab import atomic_files
from transformer_lab.atomic_files import write_text_atomically
from transformer_lab.write_errors import FolderWriteError


def test_the_new_text_replaces_the_old_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "hypotheses.txt"
    path.write_text("old\n", encoding="utf-8")
    assert write_text_atomically(path, "一\r\ntwo\n") == path
    assert path.read_bytes() == "一\r\ntwo\n".encode("utf-8")  # no newline translation
    assert sorted(tmp_path.iterdir()) == [path]


@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()])
def test_a_write_that_fails_keeps_the_previous_file_and_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: BaseException
) -> None:
    path = tmp_path / "report.json"
    path.write_text("previous", encoding="utf-8")

    def fail(descriptor: int) -> None:
        raise failure

    monkeypatch.setattr(atomic_files.os, "fsync", fail)
    with pytest.raises(type(failure)):
        write_text_atomically(path, "x" * 100_000)
    assert path.read_text(encoding="utf-8") == "previous"
    assert sorted(tmp_path.iterdir()) == [path]
    monkeypatch.undo()
    write_text_atomically(tmp_path / "new.txt", "whole")
    assert (tmp_path / "new.txt").read_text(encoding="utf-8") == "whole"


def test_a_folder_in_place_of_the_file_is_named_and_left_alone(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    with pytest.raises(IsADirectoryError, match=f"{tmp_path / 'out'}: expected a file to write, got a folder"):
        write_text_atomically(tmp_path / "out", "text")
    assert sorted(tmp_path.iterdir()) == [tmp_path / "out"] and not any((tmp_path / "out").iterdir())


def test_a_folder_in_place_of_the_file_is_named_by_what_gave_it(tmp_path: Path) -> None:
    """A caller that says which option or keyword gave the path has it named, and the folder too."""
    (tmp_path / "out").mkdir()
    expected = f"--output: expected a file to write, got the folder '{tmp_path / 'out'}'"
    with pytest.raises(IsADirectoryError) as raised:
        write_text_atomically(tmp_path / "out", "text", name="--output")
    assert str(raised.value) == expected
    with pytest.raises(FileNotFoundError, match=f"^--output: {tmp_path / 'nowhere' / 'a.txt'}: expected a file in "):
        write_text_atomically(tmp_path / "nowhere" / "a.txt", "text", name="--output")
    assert sorted(tmp_path.iterdir()) == [tmp_path / "out"] and not any((tmp_path / "out").iterdir())


def test_a_missing_folder_is_named_not_the_temporary(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "out.txt"
    with pytest.raises(FileNotFoundError, match=f"^{path}: expected a file in an existing folder, but .*nowhere does"):
        write_text_atomically(path, "text")
    assert not (tmp_path / "nowhere").exists()  # nothing made on the way


def test_a_folder_that_refuses_the_write_is_named_by_the_path_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(folder: Path, prefix: str, suffix: str, replacing: Path | None = None) -> tuple[int, Path]:
        raise PermissionError(13, "Permission denied", str(folder / f"{prefix}xyz{suffix}"))

    monkeypatch.setattr(atomic_files, "create_temporary_file", refuse)
    with pytest.raises(PermissionError) as raised:
        write_text_atomically(tmp_path / "out.txt", "text")
    # The error keeps its number and reason, for the commands' "could not write 'PATH' (Permission denied, EACCES)".
    error = raised.value
    assert (error.errno, error.strerror, error.filename) == (13, "Permission denied", str(tmp_path / "out.txt"))


def test_a_link_is_written_through_and_kept(tmp_path: Path) -> None:
    # The temporary was renamed over the link: the link became a plain file and its target kept the old text.
    (tmp_path / "results").mkdir()
    target = tmp_path / "results" / "real.jsonl"
    target.write_text("old\n", encoding="utf-8")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    write_text_atomically(link, "new\n")
    assert link.is_symlink() and target.read_text(encoding="utf-8") == "new\n"
    assert sorted(path.name for path in (tmp_path / "results").iterdir()) == ["real.jsonl"]  # no temporary left


def test_a_pipe_is_written_into_not_replaced(tmp_path: Path) -> None:
    # A named pipe (or >(...), /dev/stdout) was replaced by a plain file, and its reader waited forever.
    import os
    import threading

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()), daemon=True)
    reader.start()
    write_text_atomically(pipe, "through the pipe\n")
    reader.join(timeout=10)
    assert received == [b"through the pipe\n"]
    assert pipe.is_fifo()


@pytest.mark.parametrize("device", [True, False], ids=["dev-full", "full-disk"])
def test_a_full_disk_is_named_by_the_path_and_what_gave_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, device: bool
) -> None:
    # Was: "[Errno 28] No space left on device", naming no file and no option.
    path = Path("/dev/full") if device else tmp_path / "out.jsonl"
    if not device:

        def full(descriptor: int) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(atomic_files.os, "fsync", full)
    with pytest.raises(FolderWriteError) as raised:
        write_text_atomically(path, "x" * 100_000, name="--output")
    assert raised.value.errno == errno.ENOSPC
    assert str(raised.value) == (
        f"--output: could not write {str(path)!r} (No space left on device, ENOSPC); nothing was written"
    )
    assert device or sorted(tmp_path.iterdir()) == []
