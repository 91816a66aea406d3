"""One writer per prepared folder or cache entry: a second waits for the first and reuses its corpus, or is refused.

Two processes filling one cache entry used to both prepare the whole corpus, the second then
dying at its rename with "[Errno 39] Directory not empty"; two `prepare --out DIR` alike.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from transformer_lab import file_lock
from transformer_lab.cli import main
from transformer_lab.data.pair_stream import PairFiles
from transformer_lab.data.prepared_pairs import PairCorpusSpec, pairs_kind
from transformer_lab.file_lock import writer_lock_path
from transformer_lab.folders import FolderWriteError, write_folder

SOURCE = Path(__file__).resolve().parents[2] / "src"

# Prepares a tiny corpus into a cache; "slow" holds the entry until the file "go" beside the cache appears.
PREPARE = """
import logging, sys, time
from pathlib import Path
logging.basicConfig(level=logging.INFO, format="%(message)s")
from transformer_lab.data import prepared_pairs as module
from transformer_lab.data.pair_stream import PairFiles
from transformer_lab.training.run.once_per_machine import prepared_corpus
if sys.argv[4] == "slow":
    write = module._write_prepared
    def slow(*arguments, **options):
        print("writing", flush=True)
        while not (Path(sys.argv[3]).parent / "go").exists():
            time.sleep(0.05)
        write(*arguments, **options)
    module._write_prepared = slow
spec = module.PairCorpusSpec(PairFiles.of(sys.argv[1:3], "de", "en"))
kind = module.pairs_kind(spec, bpe=module.BpeSettings(vocab_size=300, min_frequency=1), progress=False)
prepared_corpus(kind, "", sys.argv[3])
"""

HOLD = """
import sys, time
from pathlib import Path
from transformer_lab.file_lock import writer_lock
with writer_lock(Path(sys.argv[1]), wait=False):
    print("held", flush=True)
    time.sleep(60)
"""


def _pairs(folder: Path, count: int = 60) -> tuple[Path, Path]:
    source, target = folder / "corpus.de", folder / "corpus.en"
    for path, stem in ((source, "wort"), (target, "word")):
        path.write_text("".join(f"{stem}{n % 17} {stem}{n % 5}\n" for n in range(count)), encoding="utf-8")
    return source, target


def _python(*arguments: str) -> subprocess.Popen[str]:
    environment = {**os.environ, "PYTHONPATH": str(SOURCE), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", *arguments], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment
    )


def _tree(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` with its bytes (None for a folder): what 'nothing changed' compares."""
    return {
        str(path.relative_to(folder)): (None if path.is_dir() else path.read_bytes())
        for path in sorted(folder.rglob("*"))
    }


def test_a_second_process_wanting_the_same_cache_entry_waits_for_the_first_and_reuses_it(tmp_path: Path) -> None:
    source, target = _pairs(tmp_path)
    cache = tmp_path / "cache"
    first = _python(PREPARE, str(source), str(target), str(cache), "slow")
    assert first.stdout is not None and first.stdout.readline().strip() == "writing"  # it holds the entry
    second = _python(PREPARE, str(source), str(target), str(cache), "fast")
    assert second.stderr is not None
    said = [second.stderr.readline()]
    while said[-1] and "waiting" not in said[-1]:  # until it says that it waits (or ends)
        said.append(second.stderr.readline())
    waited = said[-1].strip()
    (tmp_path / "go").touch()
    second_err = "".join(said) + second.communicate(timeout=120)[1]
    first_err = first.communicate(timeout=120)[1]
    assert (first.returncode, second.returncode) == (0, 0), first_err + second_err
    entry = pairs_kind(PairCorpusSpec(PairFiles.of([source, target], "de", "en"))).cache_folder(cache)
    assert waited.startswith(f"{entry} is being prepared by process {first.pid} on "), second_err
    assert waited.endswith("; waiting for it to finish")
    assert f"reusing the prepared corpus {entry}" in second_err
    assert "preparing the corpus" not in second_err  # its corpus was the first's, not made twice
    assert sorted(path.name for path in cache.iterdir()) == [entry.name]  # no lock, no copy left
    assert (entry / "manifest.json").is_file()


@pytest.fixture
def held_out_folder(tmp_path: Path):
    """A `prepare --out` folder that another live process is writing."""
    out = tmp_path / "prepared"
    holder = _python(HOLD, str(out))
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    yield out, holder.pid
    holder.kill()
    holder.wait()


def test_prepare_into_a_folder_another_process_writes_is_refused_at_once_naming_it(
    held_out_folder: tuple[Path, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, pid = held_out_folder
    source, target = _pairs(tmp_path)
    before = _tree(tmp_path)
    arguments = ["prepare", "translation", "--train", str(source), str(target), "--out", str(out), "--no-progress"]
    assert main([*arguments, "--set", "data.vocab_size=300"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"transformer-lab prepare: error: out_dir: {out} is being written by process {pid} on ")
    assert error.endswith("; wait for it to end or choose another folder") and "\n" not in error
    assert _tree(tmp_path) == before  # the holder's lock untouched, nothing written


def test_a_writer_lock_left_by_a_dead_process_is_taken_and_removed(tmp_path: Path) -> None:
    source, target = _pairs(tmp_path)
    out = tmp_path / "prepared"
    writer_lock_path(out).write_text("process 999999 on elsewhere (since 2026-01-01 00:00:00)", encoding="utf-8")
    arguments = ["prepare", "translation", "--train", str(source), str(target), "--out", str(out), "--no-progress"]
    assert main([*arguments, "--set", "data.vocab_size=300"]) == 0
    assert (out / "manifest.json").is_file()
    assert not os.path.lexists(writer_lock_path(out))


def test_a_read_only_parent_is_one_line_naming_the_folder_not_its_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a read-only tmpfs needs root and mount(8)")
    source, target = _pairs(tmp_path)
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        out = disk / "prepared"
        arguments = ["prepare", "translation", "--train", str(source), str(target), "--out", str(out)]
        assert main([*arguments, "--no-progress", "--set", "data.vocab_size=300"]) == 2
        assert capsys.readouterr().err.strip().splitlines() == [
            f"transformer-lab prepare: error: --out: could not write '{out}' (Read-only file system, EROFS); "
            "nothing was written"
        ]  # proven before any work, and named as the option
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def _refused(code: int) -> Callable[..., int | str]:
    def open_lock_file(path: Path, flags: int) -> int | str:
        raise PermissionError(code, os.strerror(code), str(path))

    return open_lock_file


@pytest.mark.parametrize("code", [errno.EACCES, errno.EPERM], ids=["EACCES", "EPERM"])
def test_a_parent_not_this_users_to_write_is_one_line_naming_the_folder_not_its_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], code: int
) -> None:
    # `--out /opt/models/ex` as a user who may not write /opt/models (or `--out /sys/ex`, even as root).
    source, target = _pairs(tmp_path)
    out = tmp_path / "prepared"
    monkeypatch.setattr(file_lock, "open_lock_file", _refused(code))
    arguments = ["prepare", "translation", "--train", str(source), str(target), "--out", str(out)]
    assert main([*arguments, "--no-progress", "--set", "data.vocab_size=300"]) == 2
    name = errno.errorcode[code]
    assert capsys.readouterr().err.strip().splitlines() == [
        f"transformer-lab prepare: error: could not write '{out}' ({os.strerror(code)}, {name}); nothing of it was kept"
    ]  # was: "[Errno 13] Permission denied: '.../.prepared.lock'", the hidden lock named, not --out
    assert not out.exists()


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES], ids=["EROFS", "EACCES"])
def test_a_cache_folder_on_a_read_only_disk_or_not_this_users_is_one_line_naming_the_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], code: int
) -> None:
    # `train --train ... --set data.cache_dir=/mnt/ro` (a read-only disk), or a cache of another user's.
    source, target = _pairs(tmp_path)
    cache, run = tmp_path / "cache", tmp_path / "run"

    def refused(path: Path, flags: int) -> int | str:
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(file_lock, "open_lock_file", refused)
    arguments = ["train", "translation", "--train", str(source), str(target), "--out", str(run)]
    settings = ["data.vocab_size=300", f"data.cache_dir={cache}", "train.max_steps=1", "train.progress_bar=false"]
    assert main([*arguments, *(item for setting in settings for item in ("--set", setting))]) == 2
    (error,) = capsys.readouterr().err.strip().splitlines()
    # Was: "Read-only file system; prepared corpora are cached in ...: ... to a folder on a disk with room",
    # naming no folder and asking for room; for EACCES "[Errno 13] Permission denied: '.../.pairs-....lock'".
    assert error.startswith(f"transformer-lab train: error: could not write '{cache}/pairs-"), error
    assert error.endswith(
        f"({os.strerror(code)}, {errno.errorcode[code]}); nothing of it was kept; prepared corpora are cached in "
        f"'{cache}': set TRANSFORMER_LAB_CACHE (they go in its prepared/) or data.cache_dir (they go in it) to a "
        "folder this user can write"
    ), error
    assert not run.exists()


def test_a_permission_error_inside_the_writing_is_not_taken_for_the_folders(tmp_path: Path) -> None:
    # An input the writer cannot read is its own error, not "could not write" the folder.
    def write(folder: Path) -> None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), "input.txt")

    with pytest.raises(PermissionError) as raised:
        write_folder(tmp_path / "out", write)
    assert not isinstance(raised.value, FolderWriteError) and raised.value.filename == "input.txt"
    assert list(tmp_path.iterdir()) == []
