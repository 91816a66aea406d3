"""Labelled text prepared once into a memory-mapped `TokenStore`: token ids, labels and line numbers.

What classification training needs of a labelled corpus: the training texts' token ids (the
store's ``tokens`` column) and class indices (its labels), each row's 1-based line in its
file (``line_numbers``, int64, for errors that point at the line), the tokenizer
(``tokenizer.json``), the class names, the validation rows as text (``validation.jsonl``)
and a ``manifest.json`` with the input files (size, mtime, sha256), the tokenizer's sha256,
the report and the format version. Written under a temporary name and renamed.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from transformer_lab.data.prepared_cache import VALIDATION_FILE, input_records, read_corpus_manifest, write_manifest
from transformer_lab.data.subword import SubwordTokenizer
from transformer_lab.data.token_store import TokenStore, TokenStoreWriter, ids_dtype

LABELLED_KIND = "labelled"
LABELLED_FORMAT_VERSION = 1
TOKENIZER_FILE = "tokenizer.json"
LINE_NUMBERS_FILE = "line_numbers"
_LINE_DTYPE = np.dtype("<i8")
_CHUNK_ROWS = 20_000  # texts encoded and appended at a time


@dataclass(frozen=True)
class LabelledExample:
    """One row held out or read back: its text, its class index, its 1-based line."""

    text: str
    label: int
    line_number: int


@dataclass
class PreparedLabelled:
    """A prepared labelled corpus (see the module docstring)."""

    store: TokenStore
    line_numbers: np.ndarray  # [N] int64, the training rows' lines
    tokenizer: SubwordTokenizer
    class_names: tuple[str, ...]
    validation_rows: list[LabelledExample]
    report: dict[str, Any]
    folder: Path
    manifest: dict[str, Any]


def tokenizer_sha256(tokenizer: SubwordTokenizer) -> str:
    """The sha256 of the tokenizer's JSON (what identifies the ids a store holds)."""
    return hashlib.sha256(tokenizer.to_json().encode("utf-8")).hexdigest()


def write_prepared_labelled(
    folder: Path,
    train_rows: Sequence[LabelledExample],
    validation_rows: Sequence[LabelledExample],
    tokenizer: SubwordTokenizer,
    class_names: Sequence[str],
    report: dict[str, Any],
    inputs: Sequence[Path],
    description: dict[str, Any],
) -> None:
    """Write a prepared labelled corpus into the (new, temporary) ``folder``; see the module docstring."""
    started = time.perf_counter()
    writer = TokenStoreWriter(folder, ("tokens",), ids_dtype(tokenizer.vocab_size), labels=True)
    try:
        for start in range(0, len(train_rows), _CHUNK_ROWS):
            chunk = train_rows[start : start + _CHUNK_ROWS]
            writer.append({"tokens": tokenizer.encode_batch([row.text for row in chunk])}, [row.label for row in chunk])
        writer.finish()
    except BaseException:
        writer.close()
        raise
    np.asarray([row.line_number for row in train_rows], dtype=_LINE_DTYPE).tofile(folder / LINE_NUMBERS_FILE)
    (folder / TOKENIZER_FILE).write_text(tokenizer.to_json(), encoding="utf-8")
    with (folder / VALIDATION_FILE).open("w", encoding="utf-8") as file:
        for row in validation_rows:
            record = {"text": row.text, "label": row.label, "line": row.line_number}
            file.write(json.dumps(record, ensure_ascii=False) + "\n")
    write_manifest(
        folder,
        {
            "format_version": LABELLED_FORMAT_VERSION,
            "kind": LABELLED_KIND,
            "description": description,
            "inputs": input_records(inputs),
            "tokenizer_sha256": tokenizer_sha256(tokenizer),
            "class_names": list(class_names),
            "report": report,
            "seconds": round(time.perf_counter() - started, 2),
        },
    )


def read_labelled_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of a prepared labelled folder; a ValueError naming the file if it is not one."""
    return read_corpus_manifest(folder, LABELLED_KIND, LABELLED_FORMAT_VERSION)


def _read_validation(path: Path, num_classes: int) -> list[LabelledExample]:
    rows = []
    with path.open(encoding="utf-8") as file:
        for number, line in enumerate(file, 1):
            try:
                record = json.loads(line)
                row = LabelledExample(str(record["text"]), int(record["label"]), int(record["line"]))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                raise ValueError(
                    f"{path}: line {number}: expected {{'text': ..., 'label': ..., 'line': ...}}, got {line[:80]!r}"
                ) from None
            if not 0 <= row.label < num_classes:
                raise ValueError(f"{path}: line {number}: expected a label in [0, {num_classes}), got {row.label}")
            rows.append(row)
    return rows


def open_prepared_labelled(folder: str | os.PathLike[str]) -> PreparedLabelled:
    """Open a folder written by `write_prepared_labelled` (the ids mapped)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"prepared corpus: expected a folder written by 'prepare', got {str(folder)!r}")
    manifest = read_labelled_manifest(folder)
    tokenizer = SubwordTokenizer.load(folder / TOKENIZER_FILE)
    if tokenizer_sha256(tokenizer) != manifest.get("tokenizer_sha256"):
        raise ValueError(f"{folder}: {TOKENIZER_FILE} differs from the one the ids were made with; prepare it again")
    store = TokenStore.open(folder)
    lines_path = folder / LINE_NUMBERS_FILE
    expected = len(store) * _LINE_DTYPE.itemsize
    if not lines_path.is_file() or lines_path.stat().st_size != expected:
        raise ValueError(f"{lines_path}: expected {expected} bytes ({len(store)} int64 line numbers); prepare it again")
    line_numbers = np.memmap(lines_path, dtype=_LINE_DTYPE, mode="r") if len(store) else np.zeros(0, _LINE_DTYPE)
    class_names = tuple(str(name) for name in manifest["class_names"])
    validation = _read_validation(folder / VALIDATION_FILE, len(class_names))
    return PreparedLabelled(
        store, line_numbers, tokenizer, class_names, validation, dict(manifest["report"]), folder, manifest
    )
