"""Labelled text prepared once into a memory-mapped `TokenStore`: token ids, labels and line numbers.

What classification training needs of a labelled corpus: the training texts' token ids (the
store's ``tokens`` column) and class indices (its labels), each row's 1-based line in its
file (``line_numbers``, int64, for errors that point at the line), the tokenizer
(``tokenizer.json``), the class names, the validation rows as text (``validation.jsonl``)
and a ``manifest.json`` with the input files (size, mtime, sha256), the tokenizer's sha256,
the report and the format version. Written under a temporary name and renamed.

The rows are streamed, never held: the caller counts them and chooses the held-out ones
first (a pass that keeps only their labels); then one pass learns the BPE from the
training texts (unless a tokenizer is given) and one more encodes them chunk by chunk into
the store while the held-out rows go to ``validation.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from transformer_lab.data.manifest_checks import SHA256, STRINGS, report_holding
from transformer_lab.data.prepared_cache import VALIDATION_FILE, InputWatch, read_corpus_manifest, write_corpus_manifest
from transformer_lab.data.subword import SubwordTokenizer
from transformer_lab.data.token_store import TokenStore, TokenStoreWriter, ids_dtype
from transformer_lab.data.word_cache import WordCachedEncoder

LABELLED_KIND = "labelled"
LABELLED_FORMAT_VERSION = 1
TOKENIZER_FILE = "tokenizer.json"
LINE_NUMBERS_FILE = "line_numbers"
_LINE_DTYPE = np.dtype("<i8")
CHUNK_ROWS = 20_000  # texts encoded and appended at a time


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


def _marked(rows: Iterable[LabelledExample], held: np.ndarray) -> Iterator[tuple[bool, LabelledExample]]:
    """(held out?, row) for every row; ``held`` the increasing 0-based positions held out."""
    next_held = 0
    for position, row in enumerate(rows):
        is_held = next_held < len(held) and int(held[next_held]) == position
        next_held += is_held
        yield is_held, row


def _validation_record(row: LabelledExample) -> str:
    return json.dumps({"text": row.text, "label": row.label, "line": row.line_number}, ensure_ascii=False) + "\n"


def write_prepared_labelled(
    folder: Path,
    rows: Callable[[], Iterable[LabelledExample]],
    held: np.ndarray,
    validation_rows: Sequence[LabelledExample],
    tokenizer: SubwordTokenizer | Callable[[Iterable[str]], SubwordTokenizer],
    class_names: Sequence[str],
    report: dict[str, Any],
    inputs: Sequence[Path],
    description: dict[str, Any],
) -> None:
    """Write a prepared labelled corpus into the (new, temporary) ``folder``; see the module docstring.

    ``rows()`` streams the training file's rows anew on each call, in file order, labels
    as class indices. ``held`` (increasing positions among them) are the validation rows
    carved from it; ``validation_rows`` those of a file of their own (then ``held`` is
    empty). ``tokenizer`` is the one to encode with, or how to learn it from the training
    texts. ``report["train_rows"]`` is checked against the rows written.
    """
    started = time.perf_counter()
    # Before the first read: a file that changes from here to the manifest is refused, not kept.
    watch = InputWatch(inputs)
    if not isinstance(tokenizer, SubwordTokenizer):
        tokenizer = tokenizer(row.text for is_held, row in _marked(rows(), held) if not is_held)
    writer = TokenStoreWriter(folder, ("tokens",), ids_dtype(tokenizer.vocab_size), labels=True)
    encoder = WordCachedEncoder(tokenizer)

    def append(chunk: list[LabelledExample], line_file: BinaryIO) -> None:
        writer.append({"tokens": encoder.encode_batch([row.text for row in chunk])}, [row.label for row in chunk])
        np.asarray([row.line_number for row in chunk], dtype=_LINE_DTYPE).tofile(line_file)

    try:
        with (folder / LINE_NUMBERS_FILE).open("wb") as line_file:
            with (folder / VALIDATION_FILE).open("w", encoding="utf-8") as validation_file:
                validation_file.writelines(map(_validation_record, validation_rows))
                chunk: list[LabelledExample] = []
                for is_held, row in _marked(rows(), held):
                    if is_held:
                        validation_file.write(_validation_record(row))
                        continue
                    chunk.append(row)
                    if len(chunk) == CHUNK_ROWS:
                        append(chunk, line_file)
                        chunk = []
                if chunk:
                    append(chunk, line_file)
        if len(writer) != report["train_rows"]:
            raise ValueError(
                f"{report['train_file']}: expected {report['train_rows']} training rows (counted), "
                f"read {len(writer)}; did the file change?"
            )
        writer.finish()
    except BaseException:
        writer.close()
        raise
    (folder / TOKENIZER_FILE).write_text(tokenizer.to_json(), encoding="utf-8")
    write_corpus_manifest(
        folder,
        LABELLED_KIND,
        LABELLED_FORMAT_VERSION,
        description,
        watch,
        started,
        tokenizer_sha256=tokenizer_sha256(tokenizer),
        class_names=list(class_names),
        report=report,
    )


def read_labelled_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of a prepared labelled folder; a ValueError naming the file if it is not one."""
    fields = {
        "tokenizer_sha256": SHA256,
        "class_names": STRINGS,
        "report": report_holding("train_file", "skipped_malformed"),
    }
    return read_corpus_manifest(folder, LABELLED_KIND, LABELLED_FORMAT_VERSION, fields)


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
