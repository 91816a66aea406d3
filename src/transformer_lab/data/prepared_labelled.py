"""Labelled text read by a `LabelledCorpusSpec`, whole or streamed, and prepared once into a memory-mapped `TokenStore`.

The spec names the training file (an AG News CSV, or the user's labelled file and its
fields), the validation rows (a file of their own, or carved), the cut and the BPE.
A prepared corpus holds what classification training needs: the training texts' token ids
(the store's ``tokens`` column) and class indices (its labels), each row's 1-based line in
its file (``line_numbers``, int64, for errors that point at the line), the tokenizer
(``tokenizer.json``), the class names, the validation rows as text (``validation.jsonl``)
and a ``manifest.json`` with the input files (size, mtime, sha256), the tokenizer's sha256,
the report and the format version. Written under a temporary name and renamed.

The rows are streamed, never held: a first pass keeps only their labels (and so the
classes and the held-out rows); then one pass learns the BPE from the training texts
(unless a tokenizer is given) and one more encodes them chunk by chunk into the store
while the held-out rows go to ``validation.jsonl`` and the training rows repeating a
held-out text are left out: what `LabelledCorpusSpec.read` reads whole.
"""

from __future__ import annotations

import array
import hashlib
import itertools
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from transformer_lab import strict_json
from transformer_lab.data.ag_news import (
    NewsArticle,
    log_malformed,
    read_ag_news_csv,
    read_classes_file,
    stream_ag_news_csv,
)
from transformer_lab.data.carve_error import CarveError, nothing_left_to_train
from transformer_lab.data.labelled_text import (
    LabelIds,
    LabelledExample,
    LabelledText,
    LabelledTextFile,
    label_spelling_difference,
    label_spelling_key,
    read_labelled_text,
    sorted_class_names,
    stream_labelled_text,
)
from transformer_lab.data.manifest_checks import SHA256, STRINGS, report_holding
from transformer_lab.data.pair_stream import chunked
from transformer_lab.data.prepared_cache import (
    MANIFEST_FILE,
    VALIDATION_FILE,
    InputWatch,
    described_settings,
    read_corpus_manifest,
    write_corpus_manifest,
)
from transformer_lab.data.splits import stratified_held_out
from transformer_lab.data.subword import SubwordTokenizer, check_word_lengths
from transformer_lab.data.token_store import TokenStore, TokenStoreWriter, ids_dtype
from transformer_lab.data.validation_overlap import ValidationOverlap
from transformer_lab.data.word_cache import WordCachedEncoder
from transformer_lab.shortened import shortened

logger = logging.getLogger(__name__)

LABELLED_KIND = "labelled"
_LISTED_CHARACTERS = 300  # of the class names said when a corpus is prepared
LABELLED_FORMAT_VERSION = 1
TOKENIZER_FILE = "tokenizer.json"
LINE_NUMBERS_FILE = "line_numbers"
_LINE_DTYPE = np.dtype("<i8")
CHUNK_ROWS = 20_000  # texts encoded and appended at a time
_HASHED_ROWS = 1024  # texts hashed at a time, to leave out those repeating a held-out text
_NO_HASHES = np.zeros(0, dtype=np.int64)
# The spec's format comes from the data config: an unknown suffix advises that setting.
FORMAT_SETTING = "data.file_format"


# What is trained and scored on: an AG News article or a record of a user's file (both have
# .text, .label as a class index, and .line_number).
LabelledRow = NewsArticle | LabelledExample


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


def held_out_positions(labels: np.ndarray, fraction: float, seed: int, class_names: Sequence[str] = ()) -> np.ndarray:
    """The increasing positions of the rows (class indices ``labels``) held out by the seeded stratified split.

    The split must hold out a row and keep a row, and every class must keep a training row
    (``class_names`` name it in the error): a class held out whole would never be trained.
    """
    held = stratified_held_out(labels, fraction, seed)
    sizes = np.bincount(labels)
    if len(held) in (0, len(labels)):
        # The share is rounded class by class: many small classes can hold out nothing at all.
        rounding = (
            f" (it is taken class by class, round({fraction} x the class's rows), and the largest of the "
            f"{np.count_nonzero(sizes):,} classes has {int(sizes.max()):,} row(s))"
            if len(held) == 0
            else ""
        )
        raise ValueError(
            f"data.validation_fraction={fraction} of {len(labels)} rows leaves "
            f"{len(labels) - len(held)} training and {len(held)} validation rows; both must be non-empty{rounding}"
        )
    kept = np.bincount(np.delete(labels, held), minlength=len(sizes))
    starved = np.flatnonzero((sizes > 0) & (kept == 0))
    if len(starved):
        label = int(starved[0])
        name = repr(class_names[label]) if label < len(class_names) else f"number {label}"
        raise CarveError(
            "data.validation_fraction={fraction} holds out all {rows} row(s) of the class {name}, which would "
            "then never be trained; give validation rows ({valid_files}), a smaller fraction, or more rows of it",
            ("valid_files",),
            fraction=fraction,
            rows=int(sizes[label]),
            name=name,
        )
    return held


def carve_validation(
    rows: Sequence[LabelledRow], fraction: float, seed: int, class_names: Sequence[str] = ()
) -> tuple[list[LabelledRow], list[LabelledRow]]:
    """(training rows, validation rows) by the seeded stratified split of ``rows`` (classes ``class_names``).

    A training row whose text is a validation row's is left out: validation scores texts the model has not learned.
    """
    labels = np.asarray([row.label for row in rows], dtype=np.int64)
    held = set(held_out_positions(labels, fraction, seed, class_names).tolist())
    validation = [row for index, row in enumerate(rows) if index in held]
    carved_texts = {row.text for row in validation}
    return [row for index, row in enumerate(rows) if index not in held and row.text not in carved_texts], validation


def labelled_report(
    train_file: Path, validation_file: Path | None, train_rows: int, validation_rows: int, skipped: int
) -> dict[str, Any]:
    """What was read, as a prepared corpus's manifest records it."""
    return {
        "train_file": str(train_file),
        "validation_file": None if validation_file is None else str(validation_file),
        "train_rows": train_rows,
        "validation_rows": validation_rows,
        "skipped_malformed": skipped,
    }


@dataclass
class _Scanned:
    """What a first pass over the training file found, and how to read its rows again (``rows()``)."""

    class_names: tuple[str, ...]
    labels: np.ndarray  # [N] int64, every row's class index (all a first pass keeps of the rows)
    num_skipped: int
    rows: Callable[[], Iterator[LabelledExample]]


@dataclass(frozen=True)
class LabelledCorpusSpec:
    """What a labelled corpus is read from, how its validation rows are chosen and how its BPE is learned.

    Class names given to the readers (a resumed or fine-tuned run's) fix the classes and
    their order; None reads them from the training file.
    """

    train_file: Path
    # An AG News CSV's classes.txt (read when present, else the release's names); None: train_file is
    # the user's labelled file, read with the fields and format below.
    classes_file: Path | None = None
    skip_malformed: bool = False  # AG News: skip (count, report) malformed lines instead of failing
    text_fields: tuple[str, ...] = ("text",)
    label_field: str = "label"
    file_format: str = ""  # "csv", "tsv" or "jsonl"; "" = from the suffix
    valid_file: Path | None = None  # validation rows of their own (None: carved from train_file)
    validation_fraction: float = 0.1  # share of each class carved out of train_file
    split_seed: int = 1234  # which rows are carved
    num_train: int = 0  # only the first N rows of train_file (0 = all)
    vocab_size: int = 8000
    lowercase: bool = True
    min_frequency: int = 2

    def input_files(self) -> list[Path]:
        """Every file the corpus reads: the training file, AG News's class names (if present), the validation file."""
        files = [self.train_file]
        if self.classes_file is not None and self.classes_file.is_file():
            files.append(self.classes_file)
        return files if self.valid_file is None else [*files, self.valid_file]

    def learn_tokenizer(self, rows: Iterable[LabelledRow]) -> SubwordTokenizer:
        """The byte-level BPE learned from the texts of the training ``rows``."""

        def texts() -> Iterator[str]:
            for row in rows:
                # Here, where the file and line are known: the trainer would name only the text's index.
                check_word_lengths(row.text, f"{self.train_file}: line {row.line_number}")
                yield row.text

        return SubwordTokenizer.train(
            texts(), vocab_size=self.vocab_size, lowercase=self.lowercase, min_frequency=self.min_frequency
        )

    def read_file(self, path: Path, max_records: int = 0) -> LabelledTextFile:
        """A labelled file read whole with the spec's fields and format (the first ``max_records``; 0 = all)."""
        return read_labelled_text(
            path,
            self.text_fields,
            self.label_field,
            self.file_format,
            max_records=max_records,
            format_name=FORMAT_SETTING,
        )

    def read(
        self, class_names: Sequence[str] | None = None
    ) -> tuple[list[LabelledRow], list[LabelledRow], tuple[str, ...], int]:
        """The corpus read whole: (training rows, validation rows, class names, malformed lines skipped)."""
        from_checkpoint = class_names is not None
        rows, class_names, num_skipped = self._training_rows(class_names)
        if self.valid_file is not None:
            validation: list[LabelledRow] = list(
                self.read_file(self.valid_file).examples(class_names, from_checkpoint=from_checkpoint)
            )
            return rows, validation, class_names, num_skipped
        train, validation = carve_validation(rows, self.validation_fraction, self.split_seed, class_names)
        return train, validation, class_names, num_skipped

    def _training_rows(self, class_names: Sequence[str] | None) -> tuple[list[LabelledRow], tuple[str, ...], int]:
        """(the training file's rows (the first num_train), the class names, malformed lines skipped)."""
        if self.classes_file is not None:
            read = read_ag_news_csv(self.train_file, skip_malformed=self.skip_malformed)
            names = read_classes_file(self.classes_file)
            self._check_ag_news_classes(class_names, names)
            return list(read.articles[: self.num_train or None]), names, read.num_skipped
        labelled = self.read_file(self.train_file, max_records=self.num_train)
        from_checkpoint = class_names is not None
        if class_names is None:
            class_names = self._label_classes(labelled.labels)
        return list(labelled.examples(class_names, from_checkpoint=from_checkpoint)), tuple(class_names), 0

    def _check_ag_news_classes(self, class_names: Sequence[str] | None, names: tuple[str, ...]) -> None:
        """Refuse a checkpoint's ``class_names`` (None: none given) that are not AG News's ``names``."""
        if class_names is not None and tuple(class_names) != names:
            raise ValueError(
                f"{self.train_file}: expected the checkpoint's classes {list(class_names)!r}, "
                f"got the AG News classes {list(names)!r}"
            )

    def _label_classes(self, labels: Iterable[str]) -> tuple[str, ...]:
        """The classes of the user's training file, from its labels: at least two."""
        class_names = sorted_class_names(labels)
        if len(class_names) < 2:
            raise ValueError(
                f"{self.train_file}: field {self.label_field!r}: expected at least 2 distinct labels to classify, "
                f"got {list(class_names)!r}"
            )
        return class_names

    def scan(self, class_names: Sequence[str] | None) -> _Scanned:
        """One pass over the training file (the whole read's checks and errors), keeping only the labels."""
        cut = self.num_train or None
        if self.classes_file is not None:
            names = read_classes_file(self.classes_file)
            labels = array.array("q")
            malformed: list[tuple[int, str]] = []
            try:
                # Read to the end, as a whole read does: a malformed line past num_train still counts.
                for article in stream_ag_news_csv(
                    self.train_file, skip_malformed=self.skip_malformed, malformed=malformed
                ):
                    if cut is None or len(labels) < cut:
                        labels.append(article.label)
            finally:
                log_malformed(self.train_file, malformed)
            self._check_ag_news_classes(class_names, names)

            def articles() -> Iterator[LabelledExample]:
                stream = stream_ag_news_csv(self.train_file, skip_malformed=self.skip_malformed)
                for article in itertools.islice(stream, cut):
                    yield LabelledExample(article.text, article.label, article.line_number)

            return _Scanned(names, np.frombuffer(labels, dtype=np.int64), len(malformed), articles)

        def records() -> Iterator[LabelledText]:
            return stream_labelled_text(
                self.train_file,
                self.text_fields,
                self.label_field,
                self.file_format,
                max_records=self.num_train,
                format_name=FORMAT_SETTING,
            )

        # The labels as they first appear (few), then each row's label as an index among them.
        first_seen: dict[str, int] = {}
        first_line: list[int] = []
        seen = array.array("q")
        for record in records():
            index = first_seen.setdefault(record.label, len(first_seen))
            if index == len(first_line):
                first_line.append(record.line_number)
            seen.append(index)
        from_checkpoint = class_names is not None
        if class_names is None:
            class_names = self._label_classes(first_seen)
        label_id = LabelIds(class_names, self.train_file, self.label_field, from_checkpoint=from_checkpoint)
        # In order of appearance: an unseen label is named at its first line, as a whole read names it.
        class_of_seen = np.asarray(
            [label_id(LabelledText("", label, line)) for label, line in zip(first_seen, first_line)], dtype=np.int64
        )

        def labelled() -> Iterator[LabelledExample]:
            for record in records():
                yield LabelledExample(record.text, label_id(record), record.line_number)

        return _Scanned(tuple(class_names), class_of_seen[np.frombuffer(seen, dtype=np.int64)], 0, labelled)


def _marked(
    rows: Iterable[LabelledExample], held: np.ndarray, carved: np.ndarray = _NO_HASHES
) -> Iterator[tuple[str, LabelledExample]]:
    """(role, row) for every row: "held" out (``held``: the increasing 0-based positions held out), "repeat" (a
    training row whose text's hash is one of the sorted ``carved``: a held-out text), else "train"."""
    position = next_held = 0
    # Hashed a few rows at a time: a pass holds no more rows than before. With no held-out text, none is.
    for chunk in chunked(rows, _HASHED_ROWS):
        if len(carved):
            hashes = np.fromiter((hash(row.text) for row in chunk), dtype=np.int64, count=len(chunk))
            repeats: Iterable[bool] = np.isin(hashes, carved).tolist()
        else:
            repeats = itertools.repeat(False)
        for row, repeat in zip(chunk, repeats):
            is_held = next_held < len(held) and int(held[next_held]) == position
            next_held += is_held
            position += 1
            yield ("held" if is_held else "repeat" if repeat else "train"), row


def _check_every_class_trained(trained: np.ndarray, sizes: np.ndarray, class_names: Sequence[str]) -> None:
    """Refuse a class whose rows outside validation all repeat held-out texts: left out, it would never be trained."""
    starved = np.flatnonzero((sizes > 0) & (trained == 0))
    if len(starved):
        label = int(starved[0])
        raise CarveError(
            "the class {name} keeps no training row: its rows outside validation all repeat a held-out row's text "
            "(validation would score texts the model learned, so they are left out of training); give validation "
            "rows ({valid_files}) or more varied rows of it",
            ("valid_files",),
            name=repr(class_names[label]),
        )


def _validation_record(row: LabelledExample) -> str:
    return json.dumps({"text": row.text, "label": row.label, "line": row.line_number}, ensure_ascii=False) + "\n"


def write_prepared_labelled(
    folder: Path,
    spec: LabelledCorpusSpec,
    tokenizer: SubwordTokenizer | None,
    class_names: Sequence[str] | None,
    description: dict[str, Any],
) -> None:
    """Prepare ``spec``'s corpus, streamed, into the (new, temporary) ``folder``; see the module docstring.

    ``tokenizer`` and ``class_names`` (a resumed or fine-tuned run's) are kept instead of
    being learned from the data. ``description`` is what the corpus was made from (the
    settings and files), recorded so that a cache can tell whether it still holds.
    """
    scanned = spec.scan(class_names)
    if class_names is None:
        # Said as found: a class spelt two ways ("pos" and "1") is two classes the model learns apart.
        found = shortened(", ".join(scanned.class_names), _LISTED_CHARACTERS)
        logger.info("%s: %d classes in the labels: %s", spec.train_file, len(scanned.class_names), found)
    if spec.valid_file is not None:
        held = np.zeros(0, dtype=np.int64)
        validation_rows = spec.read_file(spec.valid_file).examples(
            scanned.class_names, from_checkpoint=class_names is not None
        )
    else:
        held = held_out_positions(scanned.labels, spec.validation_fraction, spec.split_seed, scanned.class_names)
        validation_rows = []
    overlap = ValidationOverlap([row.text for row in validation_rows])
    train_rows = len(scanned.labels) - len(held)
    started = time.perf_counter()
    # After the label pass (whose errors name the file and line, as a whole read's do): a file that
    # changes from here to the manifest is refused, not kept.
    watch = InputWatch(spec.input_files())
    # The carved rows' texts, read in a pass that stops after the last: a training row repeating one is left out.
    # Kept as sorted hashes, 8 bytes a held-out row, not as text (a clash of 64 bits is negligible).
    carved_rows = itertools.islice(_marked(scanned.rows(), held), int(held[-1]) + 1 if len(held) else 0)
    carved = np.unique(np.fromiter((hash(row.text) for role, row in carved_rows if role == "held"), dtype=np.int64))
    # A pass that stops at the first training row: past the start only where the held-out texts are all there is.
    if len(carved) and not any(role == "train" for role, _ in _marked(scanned.rows(), held, carved)):
        raise nothing_left_to_train(train_rows, len(held), "rows", "texts", "validation rows")
    if tokenizer is None:
        tokenizer = spec.learn_tokenizer(row for role, row in _marked(scanned.rows(), held, carved) if role == "train")
    writer = TokenStoreWriter(folder, ("tokens",), ids_dtype(tokenizer.vocab_size), labels=True)
    encoder = WordCachedEncoder(tokenizer)

    trained = np.zeros(len(scanned.class_names), dtype=np.int64)  # training rows kept, by class

    def append(chunk: list[LabelledExample], line_file: BinaryIO) -> None:
        labels = [row.label for row in chunk]
        writer.append({"tokens": encoder.encode_batch([row.text for row in chunk])}, labels)
        np.asarray([row.line_number for row in chunk], dtype=_LINE_DTYPE).tofile(line_file)
        trained[:] += np.bincount(labels, minlength=len(trained))

    repeating_validation = 0
    try:
        with (folder / LINE_NUMBERS_FILE).open("wb") as line_file:
            with (folder / VALIDATION_FILE).open("w", encoding="utf-8") as validation_file:
                validation_file.writelines(map(_validation_record, validation_rows))
                chunk: list[LabelledExample] = []
                for role, row in _marked(scanned.rows(), held, carved):
                    if role == "held":
                        validation_file.write(_validation_record(row))
                        continue
                    if role == "repeat":
                        repeating_validation += 1
                        continue
                    chunk.append(row)
                    overlap.see(row.text)
                    if len(chunk) == CHUNK_ROWS:
                        append(chunk, line_file)
                        chunk = []
                if chunk:
                    append(chunk, line_file)
        kept_rows = len(writer)
        if kept_rows + repeating_validation != train_rows:
            raise ValueError(
                f"{spec.train_file}: expected {train_rows} training rows (counted), read "
                f"{kept_rows + repeating_validation}; did the file change?"
            )
        _check_every_class_trained(trained, np.bincount(scanned.labels, minlength=len(trained)), scanned.class_names)
        writer.finish()
    except BaseException:
        writer.close()
        raise
    overlap.warn(
        str(spec.valid_file),
        str(spec.train_file),
        "texts",
        lambda index: f"line {validation_rows[index].line_number}, {validation_rows[index].text!r}",
    )
    (folder / TOKENIZER_FILE).write_text(tokenizer.to_json(), encoding="utf-8")
    report = labelled_report(
        spec.train_file, spec.valid_file, kept_rows, len(validation_rows) + len(held), scanned.num_skipped
    )
    if repeating_validation:
        logger.info(
            "%s: left out %d training rows whose text is a held-out validation row's, so that validation scores "
            "texts the model has not learned",
            spec.train_file,
            repeating_validation,
        )
    write_corpus_manifest(
        folder,
        LABELLED_KIND,
        LABELLED_FORMAT_VERSION,
        description,
        watch,
        started,
        tokenizer_sha256=tokenizer_sha256(tokenizer),
        class_names=list(scanned.class_names),
        report=report,
    )


def labelled_settings(description: dict[str, Any]) -> dict[str, Any]:
    """The classification data settings a corpus was made with, by field (its batches' seed is not described)."""
    return described_settings(description)


def read_labelled_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of a prepared labelled folder; a ValueError naming the file if it is not one."""
    fields = {
        "tokenizer_sha256": SHA256,
        "class_names": STRINGS,
        "report": report_holding("train_file", "skipped_malformed"),
    }
    manifest = read_corpus_manifest(folder, LABELLED_KIND, LABELLED_FORMAT_VERSION, fields)
    # A corpus prepared before the reader refused a class spelt two ways: prepared again, the reader names the line.
    first_of_key: dict[str, str] = {}
    for name in manifest["class_names"]:
        other = first_of_key.setdefault(label_spelling_key(name), name)
        if other != name:
            raise ValueError(
                f"{folder / MANIFEST_FILE}: expected each class spelt one way, got {other!r} and {name!r}, which "
                f"differ only in {label_spelling_difference(name, other)}; prepare the corpus again"
            )
    return manifest


def _read_validation(path: Path, num_classes: int) -> list[LabelledExample]:
    rows = []
    with path.open(encoding="utf-8") as file:
        for number, line in enumerate(file, 1):
            try:
                record = strict_json.loads(line)
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
