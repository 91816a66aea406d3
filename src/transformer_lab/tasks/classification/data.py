"""Classification data: AG News or the user's labelled file, the validation split, the BPE, the prepared corpus."""

from __future__ import annotations

import array
import itertools
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from transformer_lab.data import (
    LABELLED_TEXT_FORMATS,
    ClassificationBatch,
    LabelledTextFile,
    NewsArticle,
    SubwordTokenizer,
    ag_news_path,
    read_ag_news_csv,
    read_class_names,
    read_labelled_text,
    resolve_ag_news_dir,
    sorted_class_names,
)
from transformer_lab.data._checks import ANY_COUNT, CORPUS_FIELD_BOUNDS, SEED_RANGE, check_int_fields
from transformer_lab.data.ag_news import CLASSES_FILE, log_malformed, stream_ag_news_csv
from transformer_lab.data.batching import token_budget_spans
from transformer_lab.data.labelled_text import LabelIds, LabelledText, stream_labelled_text
from transformer_lab.data.lazy_batches import ClassificationBatches
from transformer_lab.data.prepared_cache import CorpusIdentity, CorpusKind, corpus_description
from transformer_lab.data.prepared_labelled import (
    LABELLED_KIND,
    LabelledExample,
    PreparedLabelled,
    open_prepared_labelled,
    read_labelled_manifest,
    tokenizer_sha256,
    write_prepared_labelled,
)
from transformer_lab.data.splits import stratified_held_out
from transformer_lab.data.token_store import TokenStore
from transformer_lab.training.run.once_per_machine import prepared_corpus

# What a prepared corpus does not depend on: where the data and the cache are, and the batches.
_UNDESCRIBED = ("data_dir", "max_tokens", "seed", "prepared_dir", "cache_dir")


@dataclass(frozen=True)
class ClassificationDataConfig:
    """Where the data is, how the validation split is carved, how text becomes batches."""

    data_dir: str | None = None  # folder holding ag_news/ (None: $TRANSFORMER_LAB_DATA, else the download folder)
    # Training CSV, relative to the ag_news/ folder or absolute; "" = train.csv when
    # present, else train_subset/train_subset_12k.csv. Training records the file it used.
    train_file: str = ""
    validation_fraction: float = 0.1  # share of each class held out of the training file
    split_seed: int = 1234  # which rows are held out
    skip_malformed: bool = False  # skip (count, report) malformed CSV lines instead of failing
    num_train: int = 0  # use only the first N rows of the training file (0 = all): quick runs
    vocab_size: int = 8000  # byte-level BPE entries, specials included
    # News topics hardly depend on case; lowercasing halves the sparse word forms that
    # 12k rows must teach.
    lowercase: bool = True
    min_frequency: int = 2  # fewest occurrences for a BPE merge
    max_tokens: int = 2048  # padded tokens per training batch (~35 articles)
    seed: int = 1234  # shuffling of the batches
    # Your own data instead of AG News (then data_dir, train_file and skip_malformed are
    # not used): exactly one labelled CSV / TSV / JSON Lines file; training records it as
    # an absolute path.
    train_files: tuple[str, ...] = ()
    valid_files: tuple[str, ...] = ()  # zero or one file; none: carve validation_fraction out of train_files
    file_format: str = ""  # "csv", "tsv" or "jsonl"; "" = from each file's suffix
    text_fields: tuple[str, ...] = ("text",)  # several are joined with "\n" (as title + description)
    label_field: str = "label"  # string or integer labels; the classes are those of train_files
    # A folder written by `transformer-lab prepare classification` to train from ("" = read
    # and prepare the data into the cache folder, or reuse it there).
    prepared_dir: str = ""
    cache_dir: str = ""  # where prepared corpora are kept ("" = $TRANSFORMER_LAB_CACHE, else ~/.cache)

    def __post_init__(self) -> None:
        check_int_fields(self, "data", {**CORPUS_FIELD_BOUNDS, "num_train": ANY_COUNT, "split_seed": SEED_RANGE})
        if len(self.train_files) > 1:
            raise ValueError(f"data.train_files: expected at most one training file, got {list(self.train_files)!r}")
        if len(self.valid_files) > 1:
            raise ValueError(f"data.valid_files: expected at most one validation file, got {list(self.valid_files)!r}")
        if self.valid_files and not self.train_files:
            raise ValueError(
                f"data.valid_files: expected only together with data.train_files (AG News carves its own), "
                f"got {list(self.valid_files)!r} without a training file"
            )
        if self.file_format not in ("", *LABELLED_TEXT_FORMATS):
            raise ValueError(
                f"data.file_format: expected one of {', '.join(LABELLED_TEXT_FORMATS)} or '' (from the suffix), "
                f"got {self.file_format!r}"
            )
        if not self.text_fields:
            raise ValueError("data.text_fields: expected at least one field name, got none")
        if self.prepared_dir and self.train_files:
            raise ValueError(
                "data.prepared_dir: expected either a prepared folder or data.train_files (--train), got both"
            )


# What the task trains and scores on: an AG News article or a record of a user's file
# (both have .text, .label as a class index, and .line_number).
Example = NewsArticle | LabelledExample


@dataclass
class ClassificationData:
    """The training rows encoded (ids, labels, lines), the validation rows, and the tokenizer trained on them.

    ``train_articles`` holds the training rows' text where it was read whole (`read_corpus`);
    None for a prepared corpus, whose text stays in its files.
    """

    tokenizer: SubwordTokenizer
    class_names: tuple[str, ...]
    train_file: Path
    validation_articles: list[Example]
    train_store: TokenStore  # the training ids (column "tokens") and labels, one row per article
    train_line_numbers: np.ndarray  # [N] the training rows' 1-based lines in train_file
    num_skipped: int
    validation_file: Path | None = None  # a separate validation file (None: carved from train_file)
    train_articles: list[Example] | None = None

    @property
    def report(self) -> dict[str, Any]:
        """What was read, as recorded in a prepared corpus's manifest."""
        return {
            "train_file": str(self.train_file),
            "validation_file": None if self.validation_file is None else str(self.validation_file),
            "train_rows": len(self.train_store),
            "validation_rows": len(self.validation_articles),
            "skipped_malformed": self.num_skipped,
        }


def read_labelled_file(
    config: ClassificationDataConfig,
    path: str | os.PathLike[str],
    *,
    max_records: int = 0,
    text_fields: Sequence[str] | None = None,
    label_field: str | None = None,
    file_format: str | None = None,
) -> LabelledTextFile:
    """Read a labelled file with the config's fields and format (each overridable; None keeps the config's)."""
    return read_labelled_text(
        path,
        config.text_fields if text_fields is None else tuple(text_fields),
        config.label_field if label_field is None else label_field,
        config.file_format if file_format is None else file_format,
        max_records=max_records,
    )


def labelled_examples(read: LabelledTextFile, class_names: Sequence[str]) -> list[LabelledExample]:
    """The records of ``read`` with their labels as indices into ``class_names``; an unseen label is a ValueError."""
    ids = read.label_ids(class_names)
    return [LabelledExample(record.text, label, record.line_number) for record, label in zip(read.records, ids)]


def _training_file(config: ClassificationDataConfig) -> Path:
    """The training file: AG News's, or the user's, which is read strictly (``skip_malformed`` refused)."""
    if config.num_train < 0:
        raise ValueError(f"data.num_train must be >= 0 (0 = all rows), got {config.num_train}")
    if not config.train_files:
        return ag_news_path("train", config.data_dir, config.train_file)
    if config.skip_malformed:
        raise ValueError(
            "data.skip_malformed: expected False with data.train_files (a labelled file is read strictly, "
            "nothing is skipped), got True"
        )
    return Path(config.train_files[0])


def _check_ag_news_classes(path: Path, class_names: Sequence[str] | None, names: tuple[str, ...]) -> None:
    """Refuse a checkpoint's ``class_names`` (None: none given) that are not AG News's ``names``."""
    if class_names is not None and tuple(class_names) != names:
        raise ValueError(
            f"{path}: expected the checkpoint's classes {list(class_names)!r}, "
            f"got the AG News classes {list(names)!r}"
        )


def _label_classes(path: Path, config: ClassificationDataConfig, labels: Iterable[str]) -> tuple[str, ...]:
    """The classes of the user's training file, from its labels: at least two."""
    class_names = sorted_class_names(labels)
    if len(class_names) < 2:
        raise ValueError(
            f"{path}: field {config.label_field!r}: expected at least 2 distinct labels to classify, "
            f"got {list(class_names)!r}"
        )
    return class_names


def _training_rows(
    config: ClassificationDataConfig, class_names: Sequence[str] | None = None
) -> tuple[Path, list[Example], tuple[str, ...], int]:
    """(training file, its rows (the first num_train), the class names, malformed lines skipped).

    ``class_names`` fixes the classes (a resumed or fine-tuned run keeps its checkpoint's
    order); None reads them from the data.
    """
    path = _training_file(config)
    if not config.train_files:
        read = read_ag_news_csv(path, skip_malformed=config.skip_malformed)
        articles = read.articles if config.num_train == 0 else read.articles[: config.num_train]
        names = read_class_names(config.data_dir)
        _check_ag_news_classes(path, class_names, names)
        return path, list(articles), names, read.num_skipped
    labelled = read_labelled_file(config, path, max_records=config.num_train)
    if class_names is not None:
        return path, list(labelled_examples(labelled, class_names)), tuple(class_names), 0
    class_names = _label_classes(path, config, labelled.labels)
    return path, list(labelled_examples(labelled, class_names)), class_names, 0


def carve_validation(config: ClassificationDataConfig, rows: list[Example]) -> tuple[list[Example], list[Example]]:
    """(training rows, validation rows) by the seeded stratified split of ``rows``."""
    held = set(_carved_positions(config, np.asarray([row.label for row in rows], dtype=np.int64)).tolist())
    return (
        [row for index, row in enumerate(rows) if index not in held],
        [row for index, row in enumerate(rows) if index in held],
    )


def _carved_positions(config: ClassificationDataConfig, labels: np.ndarray) -> np.ndarray:
    """The increasing positions of the rows (classes ``labels``) held out by the seeded stratified split."""
    held = stratified_held_out(labels, config.validation_fraction, config.split_seed)
    if len(held) in (0, len(labels)):
        raise ValueError(
            f"data.validation_fraction={config.validation_fraction} of {len(labels)} rows leaves "
            f"{len(labels) - len(held)} training and {len(held)} validation rows; both must be non-empty"
        )
    return held


@dataclass
class _StreamedRows:
    """What a first pass over the training file found, and how to read its rows again (``rows()``)."""

    path: Path
    class_names: tuple[str, ...]
    labels: np.ndarray  # [N] int64, every row's class index (all a first pass keeps of the rows)
    num_skipped: int
    rows: Callable[[], Iterator[LabelledExample]]


def _streamed_rows(config: ClassificationDataConfig, class_names: Sequence[str] | None) -> _StreamedRows:
    """One pass over the training file (`_training_rows`'s checks and errors), keeping only the labels."""
    path = _training_file(config)
    cut = config.num_train or None
    if not config.train_files:
        names = read_class_names(config.data_dir)
        labels = array.array("q")
        malformed: list[tuple[int, str]] = []
        try:
            # Read to the end, as a whole read does: a malformed line past num_train still counts.
            for article in stream_ag_news_csv(path, skip_malformed=config.skip_malformed, malformed=malformed):
                if cut is None or len(labels) < cut:
                    labels.append(article.label)
        finally:
            log_malformed(path, malformed)
        _check_ag_news_classes(path, class_names, names)

        def articles() -> Iterator[LabelledExample]:
            stream = stream_ag_news_csv(path, skip_malformed=config.skip_malformed)
            for article in itertools.islice(stream, cut):
                yield LabelledExample(article.text, article.label, article.line_number)

        return _StreamedRows(path, names, np.frombuffer(labels, dtype=np.int64), len(malformed), articles)

    def records() -> Iterator[LabelledText]:
        return stream_labelled_text(
            path, config.text_fields, config.label_field, config.file_format, max_records=config.num_train
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
    if class_names is None:
        class_names = _label_classes(path, config, first_seen)
    label_id = LabelIds(class_names, path, config.label_field)
    # In order of appearance: an unseen label is named at its first line, as a whole read names it.
    class_of_seen = np.asarray(
        [label_id(LabelledText("", label, line)) for label, line in zip(first_seen, first_line)], dtype=np.int64
    )

    def labelled() -> Iterator[LabelledExample]:
        for record in records():
            yield LabelledExample(record.text, label_id(record), record.line_number)

    classes = class_of_seen[np.frombuffer(seen, dtype=np.int64)]
    return _StreamedRows(path, tuple(class_names), classes, 0, labelled)


def read_corpus(
    config: ClassificationDataConfig,
    tokenizer: SubwordTokenizer | None = None,
    class_names: Sequence[str] | None = None,
) -> ClassificationData:
    """Read the training file whole, take validation (its own file, or carved), train the BPE on the rest, encode it.

    `build_data` prepares this once into a store and reuses it; this keeps the text.

    ``tokenizer`` and ``class_names``, when given (resume, fine-tuning), are kept instead
    of being learned from the data; a training label outside ``class_names`` is then a
    ValueError naming the file, the line and the label.
    """
    path, rows, class_names, num_skipped = _training_rows(config, class_names)
    validation_file = Path(config.valid_files[0]) if config.valid_files else None
    if validation_file is not None:
        train_articles = rows
        validation_articles: list[Example] = list(
            labelled_examples(read_labelled_file(config, validation_file), class_names)
        )
    else:
        train_articles, validation_articles = carve_validation(config, rows)
    texts = [article.text for article in train_articles]
    if tokenizer is None:
        tokenizer = SubwordTokenizer.train(
            texts, vocab_size=config.vocab_size, lowercase=config.lowercase, min_frequency=config.min_frequency
        )
    return ClassificationData(
        tokenizer=tokenizer,
        class_names=tuple(class_names),
        train_file=path,
        validation_articles=validation_articles,
        train_store=TokenStore.from_sequences(
            {"tokens": tokenizer.encode_batch(texts)}, [article.label for article in train_articles]
        ),
        train_line_numbers=np.asarray([article.line_number for article in train_articles], dtype=np.int64),
        num_skipped=num_skipped,
        validation_file=validation_file,
        train_articles=train_articles,
    )


def build_data(
    config: ClassificationDataConfig,
    tokenizer: SubwordTokenizer | None = None,
    class_names: Sequence[str] | None = None,
) -> ClassificationData:
    """The run's data: a prepared folder, or the data prepared once into the cache folder (and reused there).

    ``tokenizer`` and ``class_names`` (a resumed or fine-tuned run's) are kept instead of
    being learned; the training ids and labels are memory-mapped, the validation rows text.
    """
    prepared = prepared_corpus(corpus_kind(config, tokenizer, class_names), config.prepared_dir, config.cache_dir)
    report = prepared.report
    validation_file = report.get("validation_file")
    return ClassificationData(
        tokenizer=prepared.tokenizer,
        class_names=prepared.class_names,
        train_file=Path(report["train_file"]),
        validation_articles=list(prepared.validation_rows),
        train_store=prepared.store,
        train_line_numbers=prepared.line_numbers,
        num_skipped=int(report["skipped_malformed"]),
        validation_file=None if validation_file is None else Path(validation_file),
    )


def _input_files(config: ClassificationDataConfig) -> list[Path]:
    """Every file the data of ``config`` reads: the training file, AG News's class names, the validation file."""
    if config.train_files:
        return [Path(path) for path in (*config.train_files, *config.valid_files)]
    classes = resolve_ag_news_dir(config.data_dir) / CLASSES_FILE
    return [ag_news_path("train", config.data_dir, config.train_file), *([classes] if classes.is_file() else [])]


def corpus_kind(
    config: ClassificationDataConfig,
    tokenizer: SubwordTokenizer | None = None,
    class_names: Sequence[str] | None = None,
) -> CorpusKind[PreparedLabelled]:
    """``config``'s prepared data, streamed (the ids of `read_corpus`); a given tokenizer and classes are kept."""

    def refusal(manifest: dict[str, Any]) -> str | None:
        if class_names is None or tuple(class_names) == tuple(manifest["class_names"]):
            return None
        return f"expected the checkpoint's classes {list(class_names)!r}, got {list(manifest['class_names'])!r}"

    return CorpusKind(
        LABELLED_KIND,
        CorpusIdentity("tokenizer", None if tokenizer is None else tokenizer_sha256(tokenizer)),
        lambda: corpus_description(config, _UNDESCRIBED, _input_files(config)),
        lambda folder, description: _write_corpus(config, folder, tokenizer, class_names, description),
        open_prepared_labelled,
        read_labelled_manifest,
        refusal,
    )


def prepare_corpus(
    config: ClassificationDataConfig,
    out_dir: str | os.PathLike[str],
    tokenizer: SubwordTokenizer | None = None,
    class_names: Sequence[str] | None = None,
) -> PreparedLabelled:
    """Prepare ``config``'s data, streamed, into the new folder ``out_dir`` (the ids of `read_corpus`)."""
    return corpus_kind(config, tokenizer, class_names).prepare(out_dir)


def _write_corpus(
    config: ClassificationDataConfig,
    folder: Path,
    tokenizer: SubwordTokenizer | None,
    class_names: Sequence[str] | None,
    description: dict[str, Any],
) -> None:
    # Streamed: a pass for the labels (and the classes), one for the BPE, one for the store.
    found = _streamed_rows(config, class_names)
    validation_file = Path(config.valid_files[0]) if config.valid_files else None
    if validation_file is not None:
        held = np.zeros(0, dtype=np.int64)
        validation_rows = labelled_examples(read_labelled_file(config, validation_file), found.class_names)
    else:
        held = _carved_positions(config, found.labels)
        validation_rows = []

    def learn(texts: Iterable[str]) -> SubwordTokenizer:
        return SubwordTokenizer.train(
            texts, vocab_size=config.vocab_size, lowercase=config.lowercase, min_frequency=config.min_frequency
        )

    report = {
        "train_file": str(found.path),
        "validation_file": None if validation_file is None else str(validation_file),
        "train_rows": len(found.labels) - len(held),
        "validation_rows": len(validation_rows) + len(held),
        "skipped_malformed": found.num_skipped,
    }
    write_prepared_labelled(
        folder,
        found.rows,
        held,
        validation_rows,
        learn if tokenizer is None else tokenizer,
        found.class_names,
        report,
        _input_files(config),
        description,
    )


def epoch_batches(
    data: ClassificationData, config: ClassificationDataConfig, epoch: int, num_shards: int = 1, shard_index: int = 0
) -> Sequence[ClassificationBatch]:
    """Length-bucketed token-budget batches of one epoch, shuffled by (seed, epoch), collated when read.

    Under DDP, the share of process ``shard_index``.
    """
    spans = token_budget_spans(
        data.train_store.lengths("tokens"),
        config.max_tokens,
        shuffle=True,
        seed=config.seed,
        epoch=epoch,
        num_shards=num_shards,
        shard_index=shard_index,
    )
    return ClassificationBatches(data.train_store, spans)


def prepare(data: ClassificationDataConfig, out_dir: Path, progress: bool) -> dict[str, Any]:
    """``transformer-lab prepare classification``: the data prepared into ``out_dir``; returns the report."""
    prepared = prepare_corpus(data, out_dir)
    return {**prepared.report, "seconds": prepared.manifest["seconds"]}
