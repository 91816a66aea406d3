"""A cache of prepared corpora: one folder per inputs and settings, reused while they hold, rebuilt when not.

Every prepared corpus (pairs, couplets, labelled text) keeps a ``manifest.json`` that
records its input files (path, size, mtime, inode, ctime and the sha256 of the bytes read,
checked unchanged from before the first read to the end). A cached folder is reused while its
inputs are unchanged (same size, mtime, inode and ctime, or same sha256 after one moved) and the
kind's own check finds nothing else changed; otherwise it is prepared again beside the
old one and swapped in, so that a reader never sees half a corpus. One process fills a
cache entry at a time: another that wants it waits for the first (saying so, naming it)
and then reuses what it made. A cache entry that is a symbolic link is refused, never
followed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import glob
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from transformer_lab import strict_json
from transformer_lab.data import line_stream
from transformer_lab.data.download import sha256_of_file
from transformer_lab.data.line_stream import checked_file
from transformer_lab.data.manifest_checks import (
    COUNT,
    Check,
    check_file_sizes,
    check_manifest,
    file_checksums,
    verify_files,
)
from transformer_lab.data.token_store import check_format_version, read_versioned_json
from transformer_lab.file_lock import symbolic_link_problem, writer_lock
from transformer_lab.folders import (
    DISK_ERRNOS,
    FolderWriteError,
    described_refusal,
    remove_abandoned_copies,
    write_folder,
    writes_refused_as,
)

logger = logging.getLogger(__name__)

MANIFEST_FILE = "manifest.json"
VALIDATION_FILE = "validation.jsonl"  # the held-out pairs, as text: they are decoded against
CACHE_ENVIRONMENT_VARIABLE = "TRANSFORMER_LAB_CACHE"
# A write refused for these wants more room; the others (a read-only disk, a permission) another folder.
ROOM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
# What each kind of corpus is called in messages.
CORPUS_NAMES = {"pairs": "parallel text (pairs)", "couplets": "couplets", "labelled": "labelled text"}
# Data settings naming files to read: a prepared run reads its folder, so they are compared, never recorded.
FILE_LIST_SETTINGS = ("train_files", "valid_files")
# The data settings of a run that no prepared corpus depends on, each with what it is for: `prepare`
# refuses them by name rather than take them and record nothing. A task's data config adds its own.
RUN_ONLY_DATA_SETTINGS = {
    "max_tokens": "the padded tokens of a training batch",
    "prepared_dir": "the prepared folder a run trains from",
    "cache_dir": "where a run keeps the corpora it prepares",
}
IDENTITIES = ("vocabulary", "tokenizer")  # CorpusIdentity.what: the description's record of where the ids came from
# A rule of the carve rather than of the text, which changed what a corpus holds all the same.
REPEATS_LEFT_OUT = "a training example repeating a carved validation example left out"
# The checks of the input files' text that readers gained since corpora were cached, in order; a
# manifest records how many its files passed ("input_checks"; none recorded: none). A cache entry
# read with fewer is prepared again: reused, it would serve a file the readers now refuse. A reader's
# new check is appended here.
INPUT_CHECKS = (
    "a carriage return inside a line refused",
    "a NUL character refused",
    "a line past 1 MiB refused",
    "a byte-order mark past a file's start refused",
    REPEATS_LEFT_OUT,
)


def default_cache_root() -> Path:
    """Where prepared corpora are cached: $TRANSFORMER_LAB_CACHE (``~`` = home), else the user's cache folder.

    A $TRANSFORMER_LAB_CACHE where no folder can be written is a ValueError naming the
    variable and its value: the error of the write itself named only a path under it.
    """
    value = os.environ.get(CACHE_ENVIRONMENT_VARIABLE, "")
    if value:
        root = Path(value).expanduser() / "prepared"
        try:
            root.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=root, prefix=".write-check-"):
                pass
        except OSError as error:
            raise ValueError(
                f"{CACHE_ENVIRONMENT_VARIABLE}: expected a folder this user can write (or a path where one can be "
                f"made), got {value!r}, {_why_unwritable(Path(value), error)}"
            ) from None
        return root
    base = os.environ.get("XDG_CACHE_HOME", "") or str(Path.home() / ".cache")
    return Path(base) / "transformer_lab" / "prepared"


def _why_unwritable(folder: Path, error: OSError) -> str:
    """Why no folder could be written at ``folder``: the file in the way, else the system's reason."""
    for candidate in (folder, *folder.parents):
        if candidate.exists() or candidate.is_symlink():
            if candidate.is_dir():
                break
            return "which is a file" if candidate == folder else f"a path through the file {str(candidate)!r}"
    return f"where writing failed: {error.strerror or error}"


def corpus_description(config: Any, unused: Sequence[str], inputs: Iterable[Path]) -> dict[str, Any]:
    """What a corpus prepared by a data config depends on: its fields but ``unused``, and the files it reads.

    As the manifest reads it back (tuples become lists), so that the two compare equal.
    """
    settings = {key: value for key, value in dataclasses.asdict(config).items() if key not in unused}
    return json.loads(json.dumps({**settings, "inputs": [str(path.resolve()) for path in inputs]}))


def described_settings(description: dict[str, Any], unfixed: Sequence[str] = ()) -> dict[str, Any]:
    """The data settings a corpus described by :func:`corpus_description` was made with, by data config field.

    All its fields but the input files, where its ids came from and ``unfixed`` (those a
    run from the prepared folder still uses, such as a seed that also shuffles the batches).
    """
    return {key: value for key, value in description.items() if key not in ("inputs", *IDENTITIES, *unfixed)}


def _as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _comparable(name: str, value: Any) -> Any:
    value = _as_json(value)
    if name in FILE_LIST_SETTINGS and isinstance(value, list):
        return [str(Path(str(path)).resolve()) for path in value]  # the same files, however they were typed
    return value


def _setting_shown(value: Any) -> str:
    value = _as_json(value)
    return repr(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def check_prepared_settings(
    folder: Path, fixed: Mapping[str, Any], data_config: Any, given: Callable[[str], bool]
) -> None:
    """Refuse a data setting that the corpus in ``folder`` fixes and that ``data_config`` gives with another value.

    ``fixed`` holds the corpus's own values by field; ``given(field)`` says whether the run
    set the field (a preset's default is no choice). Such a setting would be recorded and
    not used: the ids, the tokenizer and the split are the folder's.
    """
    for name, own in fixed.items():
        if not hasattr(data_config, name) or not given(name):
            continue
        value = getattr(data_config, name)
        if _comparable(name, value) != _comparable(name, own):
            raise ValueError(
                f"data.{name}: expected the prepared corpus {folder}'s own value ({_setting_shown(own)}) or none, "
                f"got {_setting_shown(value)}; prepare the corpus again to change it"
            )


def differs_from_default(data_config: Any) -> Callable[[str], bool]:
    """Whether a field of the dataclass ``data_config`` holds another value than its default.

    What a caller that has only the config (not where each value came from) takes as given:
    a field left at its default was not chosen. A preset's own value (``--preset base``'s
    37,000 BPE entries) counts as chosen.
    """
    defaults: dict[str, Any] = {}
    for field in dataclasses.fields(data_config):
        if field.default is not dataclasses.MISSING:
            defaults[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            defaults[field.name] = field.default_factory()
    return lambda name: name not in defaults or _as_json(getattr(data_config, name)) != _as_json(defaults[name])


DataConfig = TypeVar("DataConfig")


def corpus_data_config(data_config: DataConfig, fixed: Mapping[str, Any]) -> DataConfig:
    """``data_config`` with the values the prepared corpus was made with (``fixed``), as a checkpoint records them.

    The file lists stay as given: a run from a prepared folder reads the folder, not them.
    """
    changes = {
        name: tuple(value) if isinstance(getattr(data_config, name), tuple) and isinstance(value, list) else value
        for name, value in fixed.items()
        if name not in FILE_LIST_SETTINGS and hasattr(data_config, name)
    }
    return dataclasses.replace(data_config, **changes)  # type: ignore[type-var]


def fixed_settings_of(
    folder: Path, manifest: dict[str, Any], settings: Callable[[dict[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    """``settings`` of the manifest's description; a description without them is a ValueError naming the file."""
    try:
        return settings(manifest["description"])
    except (KeyError, TypeError, IndexError):
        raise ValueError(
            f"{folder / MANIFEST_FILE}: description: expected the settings the corpus was made with, "
            f"got {manifest['description']!r:.200}; prepare the corpus again"
        ) from None


class InputChangedError(ValueError):
    """An input file changed while a corpus was prepared from it: nothing of that corpus may be kept."""


class ReadDigest:
    """A sha256 that also counts the bytes given to it: the size and hash of what was actually read."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.size = 0

    def update(self, data: bytes, /) -> None:
        self._hash.update(data)
        self.size += len(data)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def file_state(status: os.stat_result) -> dict[str, int]:
    """What tells one version of a file from another without reading it (ctime: no user can set it back)."""
    return {
        "size": status.st_size,
        "mtime_ns": status.st_mtime_ns,
        "inode": status.st_ino,
        "ctime_ns": status.st_ctime_ns,
    }


def prepared_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The files of the prepared folder ``folder`` (none where it is gone): what an output must not replace."""
    folder = Path(folder)
    return sorted(path for path in folder.iterdir() if path.is_file()) if folder.is_dir() else []


class InputWatch:
    """The input files of one preparation: their state taken before any is read, checked again at the end.

    Create it before the first read. Files streamed by the preparation are hashed through
    :meth:`digest` as they are read; the others are hashed by :meth:`records`. The records
    then hold the hash and size of the bytes actually read, and a file whose size, mtime,
    inode or ctime moved meanwhile (or whose bytes read differ from its size) is an
    :class:`InputChangedError`, so that the corpus being written is not kept.
    """

    def __init__(self, paths: Iterable[str | os.PathLike[str]]) -> None:
        # Checked as the readers check them, so a missing file is named as one, not as a failed stat.
        self.paths = [checked_file(path) for path in paths]
        self._before = [file_state(path.stat()) for path in self.paths]
        self._digests: dict[int, ReadDigest] = {}

    def digest(self, index: int) -> ReadDigest:
        """The digest to feed the bytes of ``paths[index]`` as they are streamed (one pass, from the start)."""
        return self._digests.setdefault(index, ReadDigest())

    def records(self) -> list[dict[str, Any]]:
        """Each file's absolute path, state and sha256, for a manifest; InputChangedError if one changed."""
        records = []
        for index, (path, before) in enumerate(zip(self.paths, self._before, strict=True)):
            digest = self._digests.get(index)
            if digest is None:
                digest = ReadDigest()
                with path.open("rb") as file:
                    # The streams' block (read when called): this read holds no more of a file than they do.
                    while block := file.read(line_stream.BLOCK_BYTES):
                        digest.update(block)
            after = file_state(path.stat())
            if after != before or digest.size != after["size"]:
                raise InputChangedError(
                    f"{path}: changed while it was read; nothing was kept (expected it as when reading "
                    f"began: {_shown(before)}; got {_shown(after)}, {digest.size} bytes read); prepare it again"
                )
            records.append({"path": str(path.resolve()), **after, "sha256": digest.hexdigest()})
        return records


def _shown(state: dict[str, int]) -> str:
    return ", ".join(f"{key} {value}" for key, value in state.items())


def records_changed(records: Iterable[dict[str, Any]], missing_ok: bool = False) -> str | None:
    """Why recorded input files no longer match, or None.

    A changed size is a change. Otherwise a file whose mtime, inode and ctime are all as
    recorded is unchanged without being read: an edit that keeps the size and sets the mtime
    back still moves the ctime, which no user can set. When any of them moved (a copy, a
    save by rename, a touch, a manifest from before they were recorded) the sha256 decides,
    so that reuse costs a read only when something happened to the file.
    ``missing_ok``: a file that is gone is no change (a prepared folder outlives its text).
    """
    for record in records:
        path = Path(record["path"])
        try:
            status = path.stat()
        except OSError:
            if missing_ok:
                continue
            return f"{path} is gone"
        state = file_state(status)
        if state["size"] != record["size"]:
            return f"{path} changed size ({record['size']} -> {status.st_size} bytes)"
        if any(state[key] != record.get(key) for key in ("mtime_ns", "inode", "ctime_ns")):
            if sha256_of_file(path) != record["sha256"]:
                return f"{path} changed (its sha256 differs)"
    return None


def cached_folder(
    folder: Path,
    stale_reason: Callable[[Path], str | None],
    prepare: Callable[[Path], None],
) -> Path:
    """``folder``, prepared by ``prepare(new_folder)`` when missing or when ``stale_reason(folder)`` says why.

    ``stale_reason`` reads the folder's manifest and returns None when it can be reused; an
    unreadable manifest (ValueError, KeyError, TypeError, OSError) counts as stale. Both
    reuse and rebuilding are logged. A full disk is a ``FolderWriteError`` (same errno)
    naming the folder and how to move the cache. Another process preparing ``folder`` is
    waited for (one line names it), then its corpus is judged like any other.
    """
    linked = symbolic_link_problem(folder, "cache entry")
    if linked:
        raise ValueError(f"{linked}: remove it and the corpus is prepared there anew")
    try:
        with contextlib.ExitStack() as held:
            # The lock is the first thing written: a cache folder on a read-only disk, or not this
            # user's to write, fails here and is the entry's fault, named as a full disk is.
            with writes_refused_as(folder, "nothing of it was kept", permission=True):
                held.enter_context(writer_lock(folder, wait=True, option="cache entry"))
            return _cached_folder(folder, stale_reason, prepare)
    except OSError as error:
        if not isinstance(error, FolderWriteError) and error.errno not in DISK_ERRNOS:
            raise
        place = "a folder on a disk with room" if error.errno in ROOM_ERRNOS else "a folder this user can write"
        raise FolderWriteError(
            error.errno,
            f"{described_refusal(error, folder)}; prepared corpora are cached in {str(folder.parent)!r}: set "
            f"TRANSFORMER_LAB_CACHE (they go in its prepared/) or data.cache_dir (they go in it) to {place}",
        ) from error


_REPLACEMENT_ROLES = ("stale", "new")  # the entry's copies while it is prepared again: the old one, the new one


def _replacement_prefix(folder: Path, role: str) -> str:
    """The name, less its writer's pid and a random tail, of ``folder``'s ``role`` copy while it is replaced."""
    return f".{folder.name}.{role}-"


def _replacement_copy(folder: Path, role: str) -> Path:
    """A new name for ``folder``'s ``role`` copy: its prefix, this process's pid and a random tail."""
    return folder.parent / f"{_replacement_prefix(folder, role)}{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _cached_folder(
    folder: Path,
    stale_reason: Callable[[Path], str | None],
    prepare: Callable[[Path], None],
) -> Path:
    # The old and new copies of an entry prepared again, where a stop came between the renames: made
    # under the entry's writer lock, which this process holds now, so their writer is gone.
    for role in _REPLACEMENT_ROLES:
        for copy in folder.parent.glob(glob.escape(_replacement_prefix(folder, role)) + "*"):
            shutil.rmtree(copy, ignore_errors=True)
            logger.info("removed %s, left by a process stopped while it replaced %s", copy, folder)
    if (folder / MANIFEST_FILE).is_file():
        try:
            reason = stale_reason(folder)
        except (ValueError, KeyError, TypeError, OSError) as error:
            reason = f"its manifest is unreadable ({error})"
        if reason is None:
            logger.info("reusing the prepared corpus %s", folder)
            # What a killed preparation left, however large; writing a folder does this itself.
            remove_abandoned_copies(folder.parent)
            return folder
        logger.info("preparing the corpus again in %s: %s", folder, reason)
        replaced, prepared_new = _replacement_copy(folder, "stale"), _replacement_copy(folder, "new")
        write_folder(prepared_new, prepare, shown_as=folder, locked=True)
        os.replace(folder, replaced)
        os.replace(prepared_new, folder)
        shutil.rmtree(replaced, ignore_errors=True)
        return folder
    if folder.exists():
        shutil.rmtree(folder)  # a folder without a manifest is no corpus (and never one of ours)
    logger.info("preparing the corpus in %s", folder)
    return write_folder(folder, prepare, locked=True)  # this process holds the entry's writer lock


def write_pairs_jsonl(path: Path, pairs: Iterable[tuple[str, str]], keys: tuple[str, str]) -> None:
    """One JSON object per pair, ``{keys[0]: first, keys[1]: second}``."""
    with path.open("w", encoding="utf-8") as file:
        for first, second in pairs:
            file.write(json.dumps({keys[0]: first, keys[1]: second}, ensure_ascii=False) + "\n")


def read_pairs_jsonl(path: Path, keys: Sequence[str]) -> list[tuple[str, str]]:
    """The pairs `write_pairs_jsonl` wrote; a bad line is a ValueError naming the file and the line."""
    pairs = []
    with path.open(encoding="utf-8") as file:
        for number, line in enumerate(file, 1):
            try:
                record = strict_json.loads(line)
                pairs.append((str(record[keys[0]]), str(record[keys[1]])))
            except (ValueError, KeyError, TypeError):  # bad JSON or a key twice are ValueErrors
                expected = "{" + ", ".join(f"{key!r}: ..." for key in keys) + "}"
                raise ValueError(f"{path}: line {number}: expected {expected}, got {line[:80]!r}") from None
    return pairs


def write_corpus_manifest(
    folder: Path,
    kind: str,
    format_version: int,
    description: dict[str, Any],
    inputs: InputWatch,
    started: float,
    **fields: Any,
) -> None:
    """Write the manifest :func:`read_corpus_manifest` reads back.

    It holds the kind, the format version, the description, the inputs' records (checked
    unchanged since ``inputs`` was created, else InputChangedError), how many of `INPUT_CHECKS`
    their text passed (all: the readers made them), the kind's own ``fields``
    (its vocabulary's sha256, its report), the size and sha256 of every file written in
    ``folder`` so far, and the seconds since ``started`` (a ``time.perf_counter()`` reading).
    """
    manifest = {
        "format_version": format_version,
        "kind": kind,
        "description": description,
        "inputs": inputs.records(),
        "input_checks": len(INPUT_CHECKS),
        **fields,
        "files": file_checksums(folder, MANIFEST_FILE),
        "seconds": round(time.perf_counter() - started, 2),
    }
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1, ensure_ascii=False), encoding="utf-8")


def _corpus_named(kind: Any) -> str:
    if kind in CORPUS_NAMES:
        return f"a {CORPUS_NAMES[kind]} corpus"
    return f"a corpus of kind {kind!r}" if isinstance(kind, str) else "a manifest that names no kind"


class CorpusKindError(ValueError):
    """A prepared folder of another kind than the one asked for; the caller names the option that gave it."""

    def __init__(self, folder: Path, expected: str, found: Any, option: str = "prepared corpus") -> None:
        self.folder, self.expected, self.found, self.option = Path(folder), expected, found, option
        super().__init__(f"{option} {folder}: expected {_corpus_named(expected)}, got {_corpus_named(found)}")

    def for_option(self, option: str) -> CorpusKindError:
        """The same error naming ``option`` (``--prepared``) as where the folder came from."""
        return CorpusKindError(self.folder, self.expected, self.found, option)

    def __reduce__(self) -> tuple[Any, ...]:
        return (CorpusKindError, (self.folder, self.expected, self.found, self.option))


class NotAPreparedFolderError(FileNotFoundError):
    """A prepared corpus's path that is no folder (nothing there, a file); the caller names the option that gave it."""

    def __init__(self, folder: Path, option: str = "prepared corpus") -> None:
        self.folder, self.option = Path(folder), option
        if not os.path.lexists(folder):
            what = "which does not exist"
        elif self.folder.is_file():
            what = "which is a file"
        else:
            what = "which is not a folder"
        super().__init__(f"{option}: expected a folder written by 'prepare', got {str(folder)!r}, {what}")

    def for_option(self, option: str) -> NotAPreparedFolderError:
        """The same error naming ``option`` (``--prepared``) as where the folder came from."""
        return NotAPreparedFolderError(self.folder, option)

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent to another process whole, not as its message alone.
        return (NotAPreparedFolderError, (self.folder, self.option))


def read_corpus_manifest(
    folder: Path, kind: str, format_version: int, fields: dict[str, Check] | None = None
) -> dict[str, Any]:
    """The manifest of a prepared corpus of ``kind``, every field checked (the kind's ``fields`` too).

    A NotAPreparedFolderError when ``folder`` is no folder; a CorpusKindError when it holds another
    kind; a ValueError names the file and the field that is not as written, or a file of the
    folder whose size is not the one recorded.
    """
    if not folder.is_dir():
        raise NotAPreparedFolderError(folder)
    path = folder / MANIFEST_FILE
    manifest = read_versioned_json(path, None)
    # The kind before the version: preparing again cannot turn a corpus of another kind into this one.
    if isinstance(manifest.get("kind"), str) and manifest["kind"] != kind:
        raise CorpusKindError(folder, kind, manifest["kind"])
    check_format_version(path, manifest, format_version)
    if manifest.get("kind") != kind:
        raise CorpusKindError(folder, kind, manifest.get("kind"))
    check_manifest(path, manifest, fields or {})
    check_file_sizes(folder, manifest)
    return manifest


def verify_prepared(folder: str | os.PathLike[str], kind: str | None = None) -> dict[str, int]:
    """Read every file of a prepared folder and compare its sha256 with the manifest's; the files and bytes read.

    A CorpusKindError when ``kind`` is given and the folder holds another; a ValueError names
    the first file that differs (a damage that kept its size), a manifest without checksums
    (from an earlier version: prepare it again), or an input file changed since (as
    ``train --prepared`` refuses it).
    """
    folder = Path(folder)
    path = folder / MANIFEST_FILE
    if not folder.is_dir():
        raise NotAPreparedFolderError(folder)
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: expected a folder written by 'prepare', got no {MANIFEST_FILE} in it")
    manifest = read_versioned_json(path, None)
    if kind is not None and manifest.get("kind") != kind:
        raise CorpusKindError(folder, kind, manifest.get("kind"))
    check_manifest(path, manifest, {})
    checked = verify_files(folder, path, manifest)
    # The check `train --prepared` makes: a folder verified here is one a run takes.
    check_inputs_unchanged(folder, manifest, "--verify")
    return checked


def check_inputs_unchanged(folder: Path, manifest: dict[str, Any], option: str) -> None:
    """Refuse the prepared ``folder`` (given by ``option``) when an input file changed since it was prepared.

    An input that is gone is no change: a prepared folder outlives the text it was made from.
    """
    changed = records_changed(manifest["inputs"], missing_ok=True)
    if changed:
        raise ValueError(f"{option}: {folder} is stale: {changed}; prepare it again")


def prepared_corpus_record(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """What a run from the prepared ``folder`` (or a cache entry) records of its corpus, for a resume to compare.

    Each input file's record as prepared (path, sha256, size and the state that tells an edit
    without reading it), and the sha256 of each file of the folder (none for a folder
    prepared before they were kept): a folder prepared again in place, from other files or
    with other settings, records something else, and so does a cache entry whose files changed.
    """
    path = Path(folder) / MANIFEST_FILE
    manifest = read_versioned_json(path, None)
    check_manifest(path, manifest, {})
    return {
        "inputs": [dict(record) for record in manifest["inputs"]],
        "files": {name: record["sha256"] for name, record in manifest.get("files", {}).items()},
    }


def inputs_change(recorded: Any, where: str) -> str | None:
    """How the input files a run ``recorded`` (:func:`prepared_corpus_record`'s) changed since, or None.

    Read where the files still are (`records_changed`: a file read only when its state moved);
    one that is gone is no change, the data may live elsewhere now. ``recorded`` is read from
    the run's ``where``: another shape is a ValueError naming it.
    """
    if not _is_corpus_record(recorded) or not all(COUNT[0](item.get("size")) for item in recorded["inputs"]):
        raise ValueError(
            f"{where}: expected the input files, sizes and checksums of the corpus the run trained on, "
            f"got {recorded!r:.200}"
        )
    return records_changed(recorded["inputs"], missing_ok=True)


def _is_corpus_record(value: Any) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("inputs"), list) or not value["inputs"]:
        return False
    inputs_ok = all(
        isinstance(item, dict) and isinstance(item.get("path"), str) and isinstance(item.get("sha256"), str)
        for item in value["inputs"]
    )
    files = value.get("files")
    return inputs_ok and isinstance(files, dict) and all(isinstance(item, str) for item in files.values())


def corpus_change(recorded: Any, now: dict[str, Any], where: str) -> str | None:
    """How the corpus ``now`` came to differ from the one a run ``recorded`` (both :func:`prepared_corpus_record`'s).

    None when it is the same; else a phrase ("was prepared again from ...") naming what changed.

    ``recorded`` is read from the run's ``where`` (its ``config.json``): another shape is a
    ValueError naming it.
    """
    if not _is_corpus_record(recorded):
        raise ValueError(
            f"{where}: expected the input files and checksums of the prepared corpus the run trained on, "
            f"got {recorded!r:.200}"
        )
    then_paths = [item["path"] for item in recorded["inputs"]]
    now_paths = [item["path"] for item in now["inputs"]]
    if then_paths != now_paths:
        return f"was prepared again from {', '.join(now_paths)} (the run's corpus from {', '.join(then_paths)})"
    for then, current in zip(recorded["inputs"], now["inputs"], strict=True):
        if then["sha256"] != current["sha256"]:
            return f"was prepared again from {current['path']} after it changed (another sha256 than the run's)"
    then_files, now_files = recorded["files"], now["files"]
    if then_files and now_files:  # a folder prepared before its files' checksums were kept has none to compare
        for name in sorted(set(then_files) | set(now_files)):
            if then_files.get(name) != now_files.get(name):
                return f"was prepared again from the same files with other settings (its {name} differs)"
    return None


@dataclass(frozen=True)
class CorpusIdentity:
    """What fixes a prepared corpus's ids besides its files: the vocabulary or tokenizer they were made with.

    ``what`` ("vocabulary", "tokenizer") names the manifest's ``{what}_sha256`` and the
    description's record of where it came from; ``given_sha256`` is a checkpoint's (a
    resumed or fine-tuned run keeps its ids), or None when it is built from the data.
    """

    what: str
    given_sha256: str | None = None

    @property
    def given_facts(self) -> str:
        """The description's key for what a given vocabulary or tokenizer is (its sizes), where a kind records it."""
        return f"given_{self.what}"

    def described(self, description: dict[str, Any]) -> dict[str, Any]:
        """``description`` with where the vocabulary or tokenizer came from, as the manifest records it."""
        return {**description, self.what: "built" if self.given_sha256 is None else "given"}

    def stale_reason(self, manifest: dict[str, Any], description: dict[str, Any]) -> str | None:
        """Why a cached corpus cannot serve ``description`` with this identity, or None."""
        recorded = dict(manifest["description"])
        origin = recorded.pop(self.what, None)
        recorded.pop(self.given_facts, None)  # facts of a given one (its sizes), whose sha256 is compared below
        if recorded != description:
            return "the files or the settings differ"
        missing = _checks_missed(manifest)
        if missing:
            return f"its files were read before the readers' checks added since ({'; '.join(missing)})"
        changed = records_changed(manifest["inputs"])
        if changed:
            return changed
        if self.given_sha256 is not None and manifest[f"{self.what}_sha256"] != self.given_sha256:
            return f"the {self.what} differs"
        if self.given_sha256 is None and origin != "built":
            return f"its {self.what} was a checkpoint's"
        return None

    def given_mismatch(self, manifest: dict[str, Any]) -> str | None:
        """How a prepared corpus's ids were made with another vocabulary or tokenizer than the given one, or None.

        None too when none is given: a corpus built from its data serves a run that builds none.
        """
        if self.given_sha256 is None or manifest[f"{self.what}_sha256"] == self.given_sha256:
            return None
        if manifest["description"].get(self.what) == "built":
            return f"whose {self.what} was built from its own data"
        return f"prepared with another {self.what}"

    def check_prepared(self, folder: Path, manifest: dict[str, Any]) -> None:
        """Refuse a prepared folder (``data.prepared_dir``) whose inputs changed or whose ids are another's."""
        check_inputs_unchanged(folder, manifest, "data.prepared_dir")
        mismatch = self.given_mismatch(manifest)
        if mismatch:
            raise ValueError(
                f"data.prepared_dir: expected a corpus prepared with the checkpoint's {self.what}, got {folder}, "
                f"{mismatch}"
            )


def _checks_missed(manifest: dict[str, Any]) -> tuple[str, ...]:
    """The checks of `INPUT_CHECKS` that a corpus's input files were never put through (all, for no record)."""
    passed = manifest.get("input_checks")
    return INPUT_CHECKS[passed if type(passed) is int and passed >= 0 else 0 :]


class PreparedCorpus(Protocol):
    """What every opened prepared corpus holds besides its data: its folder, its manifest, its report."""

    @property
    def folder(self) -> Path: ...

    @property
    def manifest(self) -> dict[str, Any]: ...

    @property
    def report(self) -> dict[str, Any]: ...


Prepared = TypeVar("Prepared", bound=PreparedCorpus)


@dataclass(frozen=True)
class CorpusKind(Generic[Prepared]):
    """One run's corpus of one kind: what it depends on, how it is written and opened, what it must match.

    ``training.run.once_per_machine.prepared_corpus`` serves it from a given folder or the
    cache; ``transformer-lab prepare`` writes it with :meth:`prepare`. ``describe`` and
    ``write`` are called only to prepare or judge a cache entry, so that a prepared folder
    opens without the files it was made from.
    """

    name: str  # the cache entry's prefix and the manifest's kind: "pairs", "couplets", "labelled"
    identity: CorpusIdentity
    describe: Callable[[], dict[str, Any]]  # the settings and input files it depends on, JSON-ready
    write: Callable[[Path, dict[str, Any]], None]  # into a new folder, recording the description given
    open: Callable[[Path], Prepared]
    read_manifest: Callable[[Path], dict[str, Any]]
    # Why a corpus cannot serve this run besides its identity (a checkpoint's classes), or None.
    refusal: Callable[[dict[str, Any]], str | None] = lambda manifest: None
    # Description fields whose change replaces the cache entry instead of keying another (a BPE's settings).
    unkeyed: tuple[str, ...] = ()
    # The data settings a prepared corpus was made with, by field, read from its manifest's description.
    fixed_settings: Callable[[dict[str, Any]], dict[str, Any]] = lambda description: {}
    # The run's data config (a dataclass): a prepared folder is refused when it sets one of those otherwise.
    data_config: Any = None

    @cached_property
    def description(self) -> dict[str, Any]:
        return self.describe()

    def cache_folder(self, cache_dir: str | os.PathLike[str] = "") -> Path:
        """This corpus's entry in the cache ``cache_dir`` ("" = :func:`default_cache_root`; ``~`` = the home folder)."""
        key = {field: value for field, value in self.description.items() if field not in self.unkeyed}
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()[:20]
        # A "~" no shell expanded (`--set data.cache_dir=~/cache`, a config file) means the home
        # folder, as for other tools' caches; taken as written it made a folder named "~" here.
        return (Path(cache_dir).expanduser() if cache_dir else default_cache_root()) / f"{self.name}-{digest}"

    def stale_reason(self, folder: Path) -> str | None:
        """Why the cached corpus in ``folder`` cannot serve this run, or None."""
        manifest = self.read_manifest(folder)
        return self.refusal(manifest) or self.identity.stale_reason(manifest, self.description)

    def write_described(self, folder: Path) -> None:
        """Prepare the corpus into the new ``folder``, its manifest recording where its ids came from."""
        self.write(folder, self.identity.described(self.description))

    def prepare(self, out_dir: str | os.PathLike[str]) -> Prepared:
        """The corpus prepared into the new folder ``out_dir`` (``transformer-lab prepare``), opened."""
        return self.open(write_folder(out_dir, self.write_described))

    def check_prepared(self, prepared: Prepared) -> Prepared:
        """``prepared`` (``data.prepared_dir``); a ValueError when its inputs changed or it cannot serve this run.

        A data setting that the corpus fixes is refused when the run's data config holds
        another value than its default (only the command line knows what was typed).
        """
        # The ids first: a corpus of another vocabulary also records other settings, which say less.
        self.identity.check_prepared(prepared.folder, prepared.manifest)
        if self.data_config is not None:
            fixed = fixed_settings_of(prepared.folder, prepared.manifest, self.fixed_settings)
            check_prepared_settings(prepared.folder, fixed, self.data_config, differs_from_default(self.data_config))
        refused = self.refusal(prepared.manifest)
        if refused:
            raise ValueError(f"data.prepared_dir: {refused} in {prepared.folder}")
        return prepared
