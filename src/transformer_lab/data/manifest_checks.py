"""A prepared corpus's ``manifest.json`` checked field by field, and the checksums of the files beside it.

Every field is checked for its type as the manifest is read, so that an edited or damaged
manifest is one error naming the file and the field, never a TypeError deep in the code
or a check quietly skipped (``inputs: []`` would turn the staleness check off).

The manifest keeps the size and sha256 of every file of the folder (``files``). Opening a
folder compares the sizes, which costs a ``stat`` each; :func:`verify_files` reads every
file and compares the sha256, which catches a corruption that keeps the size. A manifest
written before the checksums were kept has no ``files``: it is read as before (the store's
own sizes are still checked), and only verifying it asks to prepare it again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from transformer_lab.data.download import sha256_of_file

# A check of one field: whether a value passes, and what it should be (for the message).
Check = tuple[Callable[[Any], bool], str]

_SHA256 = re.compile(r"[0-9a-f]{64}")
_INPUT_STATE = ("mtime_ns", "inode", "ctime_ns")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_sha256(value: Any) -> bool:
    return isinstance(value, str) and _SHA256.fullmatch(value) is not None


SHA256: Check = (_is_sha256, "a sha256 (64 lowercase hex digits)")
COUNT: Check = (_is_count, "an int >= 0")
COUNT_OR_NONE: Check = (lambda value: value is None or _is_count(value), "an int >= 0 or null")
STRINGS: Check = (
    lambda value: isinstance(value, list) and bool(value) and all(isinstance(item, str) for item in value),
    "a non-empty list of strings",
)


def report_holding(*keys: str) -> Check:
    """A report or count object: JSON scalars by name, holding at least ``keys``."""

    def passes(value: Any) -> bool:
        if not isinstance(value, dict) or any(key not in value for key in keys):
            return False
        return all(item is None or isinstance(item, (int, str)) for item in value.values())

    return passes, f"an object of counts and names holding {', '.join(map(repr, keys))}"


_COMMON: dict[str, Check] = {
    "kind": (lambda value: isinstance(value, str), "a string"),
    "description": (lambda value: isinstance(value, dict), "an object"),
    "seconds": (lambda value: isinstance(value, (int, float)) and not isinstance(value, bool), "a number"),
}


def check_manifest(path: Path, manifest: dict[str, Any], fields: Mapping[str, Check]) -> None:
    """Check the common fields, ``inputs``, ``files`` (if any) and the kind's ``fields``; a ValueError naming one."""
    for field, (passes, expected) in {**_COMMON, **fields}.items():
        if not passes(manifest.get(field)):
            _fail(path, field, expected, manifest.get(field, "nothing"))
    inputs = manifest.get("inputs")
    # Every corpus reads at least one file: an empty list would make every reuse look fresh.
    if not isinstance(inputs, list) or not inputs:
        _fail(path, "inputs", "a non-empty list of the input files read", inputs)
    for index, record in enumerate(inputs):
        _check_record(path, f"inputs[{index}]", record, _input_checks(record))
    files = manifest.get("files")
    if files is not None:
        if not isinstance(files, dict) or not files:
            _fail(path, "files", "an object of the folder's files with their size and sha256", files)
        for name, record in files.items():
            if "/" in name or name.startswith("."):
                _fail(path, f"files[{name!r}]", "a file name of the folder", name)
            _check_record(path, f"files[{name!r}]", record, {"size": COUNT, "sha256": SHA256})


def _input_checks(record: Any) -> dict[str, Check]:
    """An input's path, size and sha256; its mtime, inode and ctime where recorded (older manifests lack them)."""
    checks: dict[str, Check] = {"path": (lambda value: isinstance(value, str), "a path"), "size": COUNT}
    checks.update({key: COUNT for key in _INPUT_STATE if isinstance(record, dict) and key in record})
    return {**checks, "sha256": SHA256}


def _check_record(path: Path, field: str, record: Any, checks: Mapping[str, Check]) -> None:
    """One record of ``inputs`` or ``files``: an object whose every key passes its check."""
    if not isinstance(record, dict):
        _fail(path, field, "an object", record)
    for key, (passes, expected) in checks.items():
        if not passes(record.get(key)):
            _fail(path, f"{field}.{key}", expected, record.get(key, "nothing"))


def _fail(path: Path, field: str, expected: str, given: Any) -> NoReturn:
    shown = repr(given)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    raise ValueError(f"{path}: {field}: expected {expected}, got {shown}; prepare the corpus again")


def file_checksums(folder: Path, manifest_name: str) -> dict[str, dict[str, Any]]:
    """The size and sha256 of every file of ``folder`` but the manifest and hidden ones, by name."""
    return {
        path.name: {"size": path.stat().st_size, "sha256": sha256_of_file(path)}
        for path in sorted(folder.iterdir())
        if path.is_file() and path.name != manifest_name and not path.name.startswith(".")
    }


def check_file_sizes(folder: Path, manifest: dict[str, Any]) -> None:
    """Each file the manifest lists is there with its recorded size (a ``stat`` each); ValueError naming one."""
    for name, record in manifest.get("files", {}).items():
        path = folder / name
        try:
            size = path.lstat().st_size
        except FileNotFoundError:
            raise ValueError(f"{path}: expected a file of the prepared corpus, got none; prepare it again") from None
        if size != record["size"]:
            raise ValueError(
                f"{path}: expected {record['size']} bytes as the manifest records, got {size}; prepare it again"
            )


def verify_files(folder: Path, manifest_path: Path, manifest: dict[str, Any]) -> dict[str, int]:
    """Read every file the manifest lists and compare its sha256; the count of files and bytes checked.

    A ValueError names the first file that differs, or a manifest without checksums.
    """
    if "files" not in manifest:
        raise ValueError(
            f"{manifest_path}: holds no checksums of the folder's files (prepared by an earlier version), so it "
            "cannot be verified; prepare it again to have them"
        )
    check_file_sizes(folder, manifest)
    for name, record in manifest["files"].items():
        if sha256_of_file(folder / name) != record["sha256"]:
            raise ValueError(
                f"{folder / name}: its sha256 differs from the one the manifest records (the file is damaged); "
                "prepare the corpus again"
            )
    return {"files": len(manifest["files"]), "bytes": sum(record["size"] for record in manifest["files"].values())}
