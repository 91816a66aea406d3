"""Text classification: AG News by default, or any labelled CSV / TSV / JSON Lines file.

Data, model, training, prediction, evaluation.

Thin glue over ``data`` (the AG News reader, a seeded stratified validation split carved
from the training file, byte-level BPE, token-budget batches), ``models``
(TransformerClassifier, mean pooling over real tokens only), ``training`` (the Trainer,
label smoothing, the Noam schedule, bf16 autocast) and ``evaluation`` (accuracy,
per-class precision/recall/F1, the confusion matrix). The tokenizer is trained on the
training split only (never on the validation rows or the test set) and saved inside
every checkpoint as ``tokenizer.json``; ``best/`` is the checkpoint with the highest
validation accuracy. The test set is read only by :func:`evaluate_classifier` callers.

A text is the title and the description joined by a line break
(:func:`~transformer_lab.data.join_title_and_description`); a text given to
:func:`predict` is read as it is.

Your own data: ``data.train_files`` names one labelled file (read by
:func:`~transformer_lab.data.read_labelled_text`: ``data.text_fields`` joined by "\\n",
``data.label_field``, ``data.file_format`` or the suffix), ``data.valid_files`` optionally
one more; without it the validation rows are carved from the training file with the same
seeded stratified split. The classes are the training file's labels in the order of
:func:`~transformer_lab.data.sorted_class_names` (integer-looking labels numerically, then
the rest sorted), stored in the checkpoint as ``class_names``; a validation or test label
outside them is a ValueError naming the file, the line and the label.
"""

from __future__ import annotations

import array
import dataclasses
import itertools
import json
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab.data import (
    AG_NEWS_CLASSES,
    LABELLED_TEXT_FORMATS,
    PAD_ID,
    ClassificationBatch,
    LabelledTextFile,
    NewsArticle,
    SubwordTokenizer,
    ag_news_path,
    collate_classification,
    padding_fraction,
    read_ag_news_csv,
    read_class_names,
    read_labelled_text,
    resolve_ag_news_dir,
    sorted_class_names,
    stratified_split,
    token_budget_batches,
)
from transformer_lab.data._checks import ANY_COUNT, MAX_BATCH_TOKENS, SEED_RANGE, check_int_fields
from transformer_lab.data.ag_news import CLASSES_FILE, log_malformed, stream_ag_news_csv
from transformer_lab.data.batching import token_budget_spans
from transformer_lab.data.labelled_text import LabelIds, LabelledText, stream_labelled_text
from transformer_lab.data.lazy_batches import ClassificationBatches
from transformer_lab.data.prepared_cache import CorpusIdentity, cache_folder, cached_folder
from transformer_lab.data.prepared_labelled import (
    LabelledExample,
    open_prepared_labelled,
    read_labelled_manifest,
    tokenizer_sha256,
    write_prepared_labelled,
)
from transformer_lab.data.splits import stratified_held_out
from transformer_lab.data.token_store import TokenStore
from transformer_lab.evaluation import ClassificationReport, classification_report
from transformer_lab.folders import write_folder
from transformer_lab.hardware import autocast, resolve_precision
from transformer_lab.models import ClassifierConfig, TransformerClassifier
from transformer_lab.models.bfloat16 import as_bf16
from transformer_lab.tasks.evaluation import EvaluationOptions, EvaluationReport
from transformer_lab.tasks.loading import load_checkpoint_parts, read_tokenizer
from transformer_lab.tasks.run import RunPlan, RunResult, start_checkpoint, train_run
from transformer_lab.tasks.task import Task
from transformer_lab.training import (
    TrainConfig,
    data_shard,
    label_smoothed_cross_entropy,
    load_task_config,
)
from transformer_lab.training.run.once_per_machine import prepared_once_per_machine

logger = logging.getLogger(__name__)

TASK_NAME = "classification"
TOKENIZER_FILE = "tokenizer.json"
# Labels are never padding; the loss needs an ignore_index no label can take.
_NO_IGNORED_LABEL = -1


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
        check_int_fields(
            self,
            "data",
            {
                "max_tokens": (1, MAX_BATCH_TOKENS),
                "min_frequency": (1, ANY_COUNT[1]),
                "num_train": ANY_COUNT,
                "seed": SEED_RANGE,
                "split_seed": SEED_RANGE,
            },
        )
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


def _default_model() -> ClassifierConfig:
    # Small and strongly regularised: 12k rows cannot feed a large encoder.
    return ClassifierConfig(
        d_model=256,
        nhead=4,
        num_layers=2,
        dim_feedforward=512,
        dropout=0.3,
        norm_first=True,
        activation="gelu",
        max_len=512,  # the longest AG News article is ~300 subword tokens
        pooling="mean",
    )


def _default_train() -> TrainConfig:
    return TrainConfig(
        # ~310 batches of 2,048 tokens per epoch on the 10,800 training rows of the 12k
        # subset (~630k tokens); peak rate 0.5 * 256^-0.5 * 400^-0.5 = 1.6e-3 after a short
        # warm-up. 12 epochs (~3,700 steps) were estimated at ~10 minutes on 2 threads
        # (bf16 is 1.5x fp32 at d_model 256 on this AVX512-BF16 CPU, docs/results.md);
        # best/ keeps the epoch of the highest validation accuracy, so extra epochs cost
        # time, not accuracy.
        epochs=12,
        lr_factor=0.5,
        warmup_steps=400,
        label_smoothing=0.1,
        # bf16 autocast where the CPU (or GPU) runs it fast, else fp32 (transformer_lab.hardware).
        precision="auto",
        eval_every_steps=0,  # validation accuracy and a checkpoint at each epoch end
        keep_last=0,
        best_metric="val_accuracy",
        best_mode="max",
        log_every_steps=50,
    )


@dataclass
class ClassificationConfig:
    """Everything a classification run needs; written into every checkpoint."""

    data: ClassificationDataConfig = field(default_factory=ClassificationDataConfig)
    model: ClassifierConfig = field(default_factory=_default_model)
    train: TrainConfig = field(default_factory=_default_train)
    class_names: tuple[str, ...] = AG_NEWS_CLASSES  # set from classes.txt when training


def default_config() -> ClassificationConfig:
    return ClassificationConfig()


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


def _recorded_train_file(path: Path, folder: Path) -> str:
    """The train_file to write into the config: relative to ag_news/ where possible."""
    try:
        return str(path.resolve().relative_to(folder.resolve()))
    except ValueError:
        return str(path.resolve())


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


def _training_rows(
    config: ClassificationDataConfig, class_names: Sequence[str] | None = None
) -> tuple[Path, list[Example], tuple[str, ...], int]:
    """(training file, its rows (the first num_train), the class names, malformed lines skipped).

    ``class_names`` fixes the classes (a resumed or fine-tuned run keeps its checkpoint's
    order); None reads them from the data.
    """
    if config.num_train < 0:
        raise ValueError(f"data.num_train must be >= 0 (0 = all rows), got {config.num_train}")
    if not config.train_files:
        path = ag_news_path("train", config.data_dir, config.train_file)
        read = read_ag_news_csv(path, skip_malformed=config.skip_malformed)
        articles = read.articles if config.num_train == 0 else read.articles[: config.num_train]
        names = read_class_names(config.data_dir)
        if class_names is not None and tuple(class_names) != names:
            raise ValueError(
                f"{path}: expected the checkpoint's classes {list(class_names)!r}, "
                f"got the AG News classes {list(names)!r}"
            )
        return path, list(articles), names, read.num_skipped
    if config.skip_malformed:
        raise ValueError(
            "data.skip_malformed: expected False with data.train_files (a labelled file is read strictly, "
            "nothing is skipped), got True"
        )
    path = Path(config.train_files[0])
    labelled = read_labelled_file(config, path, max_records=config.num_train)
    if class_names is not None:
        return path, list(labelled_examples(labelled, class_names)), tuple(class_names), 0
    class_names = sorted_class_names(labelled.labels)
    if len(class_names) < 2:
        raise ValueError(
            f"{path}: field {config.label_field!r}: expected at least 2 distinct labels to classify, "
            f"got {list(class_names)!r}"
        )
    return path, list(labelled_examples(labelled, class_names)), class_names, 0


def _carve_validation(config: ClassificationDataConfig, rows: list[Example]) -> tuple[list[Example], list[Example]]:
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
    if config.num_train < 0:
        raise ValueError(f"data.num_train must be >= 0 (0 = all rows), got {config.num_train}")
    cut = config.num_train or None
    if not config.train_files:
        path = ag_news_path("train", config.data_dir, config.train_file)
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
        if class_names is not None and tuple(class_names) != names:
            raise ValueError(
                f"{path}: expected the checkpoint's classes {list(class_names)!r}, "
                f"got the AG News classes {list(names)!r}"
            )

        def articles() -> Iterator[LabelledExample]:
            stream = stream_ag_news_csv(path, skip_malformed=config.skip_malformed)
            for article in itertools.islice(stream, cut):
                yield LabelledExample(article.text, article.label, article.line_number)

        return _StreamedRows(path, names, np.frombuffer(labels, dtype=np.int64), len(malformed), articles)
    if config.skip_malformed:
        raise ValueError(
            "data.skip_malformed: expected False with data.train_files (a labelled file is read strictly, "
            "nothing is skipped), got True"
        )
    path = Path(config.train_files[0])

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
        class_names = sorted_class_names(first_seen)
        if len(class_names) < 2:
            raise ValueError(
                f"{path}: field {config.label_field!r}: expected at least 2 distinct labels to classify, "
                f"got {list(class_names)!r}"
            )
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
        train_articles, validation_articles = _carve_validation(config, rows)
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
    identity = CorpusIdentity("tokenizer", None if tokenizer is None else tokenizer_sha256(tokenizer))
    if config.prepared_dir:
        prepared = open_prepared_labelled(config.prepared_dir)
        identity.check_prepared(prepared.folder, prepared.manifest)
        if class_names is not None and tuple(class_names) != prepared.class_names:
            raise ValueError(
                f"data.prepared_dir: expected the checkpoint's classes {list(class_names)!r}, got "
                f"{list(prepared.class_names)!r} in {prepared.folder}"
            )
    else:
        description = _corpus_description(config)
        folder = cache_folder("labelled", description, config.cache_dir or None)

        def stale_reason(cached: Path) -> str | None:
            manifest = read_labelled_manifest(cached)
            if class_names is not None and tuple(class_names) != tuple(manifest["class_names"]):
                return "the classes differ"
            return identity.stale_reason(manifest, description)

        def prepare(partial: Path) -> None:
            _write_corpus(config, partial, tokenizer, class_names)

        # Under torchrun one process of each machine prepares; the others map its files.
        prepared = prepared_once_per_machine(
            folder, lambda: open_prepared_labelled(cached_folder(folder, stale_reason, prepare)), open_prepared_labelled
        )
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


def _corpus_description(config: ClassificationDataConfig) -> dict[str, Any]:
    """What a prepared corpus depends on: the reading, split and tokenizer settings and the files read."""
    unused = ("data_dir", "max_tokens", "seed", "prepared_dir", "cache_dir")
    settings = {key: value for key, value in dataclasses.asdict(config).items() if key not in unused}
    description = {**settings, "inputs": [str(path.resolve()) for path in _input_files(config)]}
    return json.loads(json.dumps(description))  # as the manifest reads back: tuples become lists


def _input_files(config: ClassificationDataConfig) -> list[Path]:
    """Every file the data of ``config`` reads: the training file, AG News's class names, the validation file."""
    if config.train_files:
        return [Path(path) for path in (*config.train_files, *config.valid_files)]
    classes = resolve_ag_news_dir(config.data_dir) / CLASSES_FILE
    return [ag_news_path("train", config.data_dir, config.train_file), *([classes] if classes.is_file() else [])]


def prepare_corpus(
    config: ClassificationDataConfig,
    out_dir: str | os.PathLike[str],
    tokenizer: SubwordTokenizer | None = None,
    class_names: Sequence[str] | None = None,
) -> Path:
    """Prepare ``config``'s data, streamed, into the new folder ``out_dir`` (the ids of `read_corpus`)."""
    return write_folder(out_dir, lambda folder: _write_corpus(config, folder, tokenizer, class_names))


def _write_corpus(
    config: ClassificationDataConfig,
    folder: Path,
    tokenizer: SubwordTokenizer | None,
    class_names: Sequence[str] | None,
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
        CorpusIdentity("tokenizer", None if tokenizer is None else tokenizer_sha256(tokenizer)).described(
            _corpus_description(config)
        ),
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


def classification_loss_fn(smoothing: float) -> Callable[[nn.Module, ClassificationBatch], Tensor]:
    """The Trainer's ``loss_fn``: label-smoothed cross-entropy over the batch's articles."""

    def loss_fn(model: nn.Module, batch: ClassificationBatch) -> Tensor:
        batch = batch.to(next(model.parameters()).device)
        logits = model(batch.token_ids)  # [B, C]
        return label_smoothed_cross_entropy(logits, batch.labels, smoothing=smoothing, ignore_index=_NO_IGNORED_LABEL)

    return loss_fn


# -- prediction ---------------------------------------------------------------------------


def text_problem(text: str, token_count: int, max_len: int) -> str | None:
    """Why ``text`` (of ``token_count`` subword tokens) cannot be classified, or None."""
    if not text.strip():
        return "the text is empty or only whitespace, so there is nothing to classify"
    if token_count > max_len:
        return (
            f"the text is {token_count} subword tokens, more than the model reads ({max_len}, its max_len); "
            "shorten it, or truncate it explicitly (--truncate)"
        )
    return None


def predict_probabilities(
    model: TransformerClassifier, token_ids: Sequence[Sequence[int]], max_tokens: int = 8192, precision: str = "fp32"
) -> Tensor:
    """Class probabilities of already encoded texts, batched by length, in input order.

    ``precision`` is "fp32", "bf16" or "auto" (bf16 where the device runs it fast). bf16
    runs a bf16 copy of the model (``models.bfloat16``), made once per call, rather than
    autocast: on one AMX Xeon thread the AG News test set (7,600 articles) took 4.70 s
    against 5.41 under autocast (fp32 11.14), accuracy 0.8682 in both (fp32 0.8683), and
    one text 2.4 against 3.3 ms (fp32 3.0). A model that is already bf16 runs as it is; an
    autocast the caller opened is kept.

    Shape:
        returns ``[N, C]`` float32, each row summing to 1.
    """
    device = next(model.parameters()).device
    lengths = [len(ids) for ids in token_ids]
    budget = max(max_tokens, max(lengths))
    probabilities = torch.empty(len(token_ids), model.num_classes)
    resolved = resolve_precision(precision, device, log_level=logging.DEBUG)
    if resolved == "bf16" and not torch.is_autocast_enabled(device.type):
        model = as_bf16(model)
        resolved = "fp32"  # the copy's own dtype is the precision: no autocast on top
    with autocast(resolved, device):
        for batch in token_budget_batches(lengths, budget, shuffle=False):
            collated = collate_classification([(token_ids[index], 0) for index in batch], PAD_ID)
            logits = model(collated.token_ids.to(device))  # [B, C]
            probabilities[batch] = logits.float().softmax(dim=-1).cpu()
    return probabilities


@dataclass(frozen=True)
class Prediction:
    """The predicted class of one text and the probability of every class.

    ``num_tokens`` is the text's subword length; ``truncated`` says whether only its
    first ``max_len`` tokens were read (only ever with ``truncate=True``).
    """

    label: int
    label_name: str
    probabilities: dict[str, float]
    num_tokens: int
    truncated: bool = False


def predict_each(
    model: TransformerClassifier,
    tokenizer: SubwordTokenizer,
    class_names: Sequence[str],
    texts: Sequence[str],
    truncate: bool = False,
    precision: str = "fp32",
) -> list[Prediction | str]:
    """Classify each text; a text that cannot be classified gets the reason (a str) instead.

    Refused: an empty or whitespace-only text, and one longer than the model's
    ``max_len`` subword tokens unless ``truncate`` (then its first ``max_len`` tokens are
    read and the prediction says ``truncated``). Nothing is cut silently. ``precision``:
    see :func:`predict_probabilities`.
    """
    if isinstance(texts, str):
        raise ValueError(f"texts must be a sequence of str, got a single str {texts[:40]!r}")
    if len(class_names) != model.num_classes:
        raise ValueError(f"class_names must name the model's {model.num_classes} classes, got {list(class_names)!r}")
    model.eval()
    max_len = model.positional_encoding.max_len
    encoded = tokenizer.encode_batch(list(texts))
    results: list[Prediction | str] = []
    usable = []
    for index, (text, ids) in enumerate(zip(texts, encoded)):
        problem = text_problem(text, 0 if truncate else len(ids), max_len)
        results.append(problem if problem is not None else "")
        if problem is None:
            usable.append(index)
    if usable:
        with torch.no_grad():
            probabilities = predict_probabilities(
                model, [encoded[index][:max_len] for index in usable], precision=precision
            )
        for index, row in zip(usable, probabilities.tolist()):
            label = max(range(len(row)), key=row.__getitem__)
            results[index] = Prediction(
                label,
                class_names[label],
                dict(zip(class_names, row)),
                len(encoded[index]),
                len(encoded[index]) > max_len,
            )
    return results


def predict(
    model: TransformerClassifier,
    tokenizer: SubwordTokenizer,
    class_names: Sequence[str],
    texts: Sequence[str],
    truncate: bool = False,
) -> list[Prediction]:
    """Classify ``texts``; a text :func:`predict_each` refuses is a ValueError naming its index."""
    results = predict_each(model, tokenizer, class_names, texts, truncate=truncate)
    for index, result in enumerate(results):
        if isinstance(result, str):
            raise ValueError(f"texts[{index}]: {result}")
    return results  # type: ignore[return-value]


def evaluate_classifier(
    model: TransformerClassifier,
    tokenizer: SubwordTokenizer,
    articles: Sequence[Example],
    class_names: Sequence[str],
    precision: str = "fp32",
    source: str | os.PathLike[str] | None = None,
) -> tuple[ClassificationReport, list[Prediction]]:
    """Accuracy, per-class precision/recall/F1 and the confusion matrix on ``articles``.

    An article the model cannot read whole is a ValueError naming its line (and
    ``source``, the file it came from, when given). Returns the report and the prediction
    of every article.
    """
    results = predict_each(model, tokenizer, class_names, [article.text for article in articles], precision=precision)
    for article, result in zip(articles, results):
        if isinstance(result, str):
            where = (
                f"{source}: line {article.line_number}"
                if source is not None
                else f"article of line {article.line_number}"
            )
            raise ValueError(f"{where}: {result}")
    predictions: list[Prediction] = results  # type: ignore[assignment]
    report = classification_report(
        [prediction.label for prediction in predictions], [article.label for article in articles], class_names
    )
    return report, predictions


# -- training and loading -----------------------------------------------------------------


# A classification run's result: its model, tokenizer (``vocabulary``), config and data.
TrainResult = RunResult[TransformerClassifier, SubwordTokenizer, "ClassificationConfig", ClassificationData]


def _check_lengths(data: ClassificationData, max_len: int) -> None:
    lengths = data.train_store.lengths("tokens")
    too_long = np.nonzero(lengths > max_len)[0]
    if too_long.size:
        line = int(data.train_line_numbers[too_long[0]])
        raise ValueError(
            f"{data.train_file}: line {line}: expected at most {max_len} subword tokens "
            f"(model.max_len), got {int(lengths[too_long[0]])}; raise model.max_len"
        )


def _recorded_data_config(config: ClassificationDataConfig, data: ClassificationData) -> ClassificationDataConfig:
    """The data config to write into checkpoints: the files used, findable from any folder."""
    if config.prepared_dir:
        return dataclasses.replace(config, prepared_dir=str(Path(config.prepared_dir).resolve()))
    if not config.train_files:
        return dataclasses.replace(
            config, train_file=_recorded_train_file(data.train_file, resolve_ag_news_dir(config.data_dir))
        )
    return dataclasses.replace(
        config,
        train_files=(str(data.train_file.resolve()),),
        valid_files=() if data.validation_file is None else (str(data.validation_file.resolve()),),
    )


def train(
    config: ClassificationConfig,
    out_dir: str | os.PathLike[str],
    *,
    resume: bool = False,
    init_from: str | os.PathLike[str] | None = None,
) -> TrainResult:
    """Train a classifier; validation accuracy at every epoch end decides ``best/``.

    ``resume`` continues ``out_dir/last``; ``init_from`` fine-tunes a checkpoint (its model
    config must already be ``config.model``, see ``tasks.finetune``). Both keep the
    checkpoint's tokenizer and class names, so the class indices mean what they meant.
    """
    tokenizer, class_names = None, None
    start = start_checkpoint(out_dir, resume=resume, init_from=init_from)
    if start is not None:
        tokenizer = read_tokenizer(start, TOKENIZER_FILE)
        class_names = load_task_config(start, TASK_NAME, ClassificationConfig).class_names
    data = build_data(config.data, tokenizer, class_names)
    _check_lengths(data, config.model.max_len)
    config = dataclasses.replace(
        config,
        data=_recorded_data_config(config.data, data),
        model=dataclasses.replace(
            config.model, vocab_size=data.tokenizer.vocab_size, num_classes=len(data.class_names), pad_id=PAD_ID
        ),
        class_names=tuple(data.class_names),
    )
    lengths = data.train_store.lengths("tokens")
    first_epoch = token_budget_batches(lengths, config.data.max_tokens, shuffle=True, seed=config.data.seed, epoch=0)
    logger.info(
        "%s: %d training and %d validation articles (%d malformed lines skipped), vocabulary %d, "
        "%d batches per epoch, padding %.1f%%",
        data.train_file,
        len(data.train_store),
        len(data.validation_articles),
        data.num_skipped,
        data.tokenizer.vocab_size,
        len(first_epoch),
        100 * padding_fraction(first_epoch, lengths),
    )
    validation_ids = data.tokenizer.encode_batch([article.text for article in data.validation_articles])
    validation_labels = torch.tensor([article.label for article in data.validation_articles])

    def evaluate(evaluated_model: nn.Module) -> dict[str, float]:
        # The trainer hands back the model it was given (unwrapped from DDP).
        assert isinstance(evaluated_model, TransformerClassifier), type(evaluated_model)
        probabilities = predict_probabilities(evaluated_model, validation_ids)  # [N, C]
        log_probabilities = probabilities.clamp_min(1e-12).log()
        return {
            "val_accuracy": float((probabilities.argmax(dim=-1) == validation_labels).float().mean()),
            "val_loss": float(F.nll_loss(log_probabilities, validation_labels)),
        }

    model_config, data_config = config.model, config.data
    plan = RunPlan(
        task_name=TASK_NAME,
        config=config,
        train_config=config.train,
        d_model=model_config.d_model,
        build_model=lambda: TransformerClassifier.from_config(model_config),
        loss_fn=classification_loss_fn(config.train.label_smoothing),
        # Under torchrun each rank trains on its own shard of the epoch.
        train_batches=lambda epoch: epoch_batches(data, data_config, epoch, *data_shard()),
        evaluate_fn=evaluate,
        count_tokens=lambda batch: int((batch.token_ids != PAD_ID).sum()),
        data_counts={
            "training articles": len(data.train_store),
            "validation articles": len(data.validation_articles),
        },
        extra_files={TOKENIZER_FILE: data.tokenizer.to_json()},
        # The preset's AG News is English news; the user's files name no language.
        card={"hub_task": "text-classification", "dataset": "ag_news", "languages": ["en"]},
    )
    model, summary = train_run(plan, out_dir, resume=resume, init_from=init_from)
    return TrainResult(model=model, vocabulary=data.tokenizer, config=config, data=data, summary=summary)


def load_classifier(
    checkpoint: str | os.PathLike[str],
) -> tuple[TransformerClassifier, SubwordTokenizer, ClassificationConfig]:
    """Rebuild the model (in eval mode), tokenizer and config of a classification checkpoint.

    ``checkpoint`` is a checkpoint folder or a run folder (its ``best/`` is used).
    """
    return load_checkpoint_parts(
        checkpoint,
        TASK_NAME,
        ClassificationConfig,
        lambda config: TransformerClassifier.from_config(config.model),
        lambda folder: read_tokenizer(folder, TOKENIZER_FILE),
        lambda tokenizer: {"vocab_size": (tokenizer.vocab_size, TOKENIZER_FILE)},
    )


def load_labelled_split(config: ClassificationConfig, split: str) -> list[Example]:
    """The validation rows of a checkpoint trained on ``data.train_files``: its valid file, or carved again.

    There is no named test split of a user's data: score a file with :func:`load_labelled_test`.
    """
    data = config.data
    if split == "validation":
        if data.valid_files:
            return list(labelled_examples(read_labelled_file(data, data.valid_files[0]), config.class_names))
        read = read_labelled_file(data, data.train_files[0], max_records=data.num_train)
        return _carve_validation(data, list(labelled_examples(read, config.class_names)))[1]
    if split == "test":
        raise ValueError(
            f"split 'test': expected a checkpoint trained on AG News, got one trained on {data.train_files[0]}, "
            "which has no named test split; score a labelled file instead (evaluate --test FILE)"
        )
    raise ValueError(f"split must be 'test' or 'validation', got {split!r}")


def load_labelled_test(
    config: ClassificationConfig,
    path: str | os.PathLike[str],
    *,
    text_fields: Sequence[str] | None = None,
    label_field: str | None = None,
    file_format: str | None = None,
) -> list[LabelledExample]:
    """The rows of any labelled file, read with the checkpoint's fields and format unless overridden.

    A label outside the checkpoint's ``class_names`` is a ValueError naming the file, the
    line and the label.
    """
    read = read_labelled_file(
        config.data, path, text_fields=text_fields, label_field=label_field, file_format=file_format
    )
    return labelled_examples(read, config.class_names)


def load_split(
    config: ClassificationConfig, split: str, data_dir: str | None = None, skip_malformed: bool = False
) -> list[Example]:
    """The articles of ``split`` ("test", or "validation": the rows held out at training)."""
    if config.data.prepared_dir and split == "validation":
        return list(open_prepared_labelled(config.data.prepared_dir).validation_rows)
    if config.data.train_files:
        return load_labelled_split(config, split)
    data_dir = data_dir if data_dir is not None else config.data.data_dir
    if split == "test":
        return list(read_ag_news_csv(ag_news_path("test", data_dir), skip_malformed=skip_malformed).articles)
    if split == "validation":
        path = ag_news_path("train", data_dir, config.data.train_file)
        articles = read_ag_news_csv(path, skip_malformed=config.data.skip_malformed).articles
        if config.data.num_train:
            articles = articles[: config.data.num_train]
        _, validation_indices = stratified_split(
            [article.label for article in articles], config.data.validation_fraction, config.data.split_seed
        )
        return [articles[index] for index in validation_indices]
    raise ValueError(f"split must be 'test' or 'validation', got {split!r}")


def _prepare(data: ClassificationDataConfig, out_dir: Path, progress: bool) -> dict[str, Any]:
    prepared = open_prepared_labelled(prepare_corpus(data, out_dir))
    return {**prepared.report, "seconds": prepared.manifest["seconds"]}


def _evaluate(checkpoint: Path, split: str | None, options: EvaluationOptions) -> EvaluationReport:
    # Its own module, which builds on this one: imported when a checkpoint is scored.
    from transformer_lab.tasks import classification_evaluation

    return classification_evaluation.evaluate(checkpoint, split, options)


TASK = Task(
    name=TASK_NAME,
    presets={"default": default_config},
    train=train,
    load=load_classifier,
    prepare=_prepare,
    evaluate=_evaluate,
    evaluation_split="test",
    evaluation_options=frozenset(
        {"--test", "--text-field", "--label-field", "--file-format", "--skip-malformed", "--confusion-png"}
    ),
    surfaces=frozenset({"onnx", "serve"}),
    dataset="ag-news",
)
