"""Classification data: the task's settings, the labelled corpus (AG News or the user's file) they name, the batches."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from transformer_lab.data import (
    LABELLED_TEXT_FORMATS,
    LabelledTextFile,
    SubwordTokenizer,
    ag_news_path,
    read_labelled_text,
    resolve_ag_news_dir,
)
from transformer_lab.data._checks import ANY_COUNT, CORPUS_FIELD_BOUNDS, SEED_RANGE, check_int_fields
from transformer_lab.data.ag_news import CLASSES_FILE
from transformer_lab.data.labelled_text import SETTING_NAMES, FieldNames, check_field_names, check_label_apart
from transformer_lab.data.prepared_cache import RUN_ONLY_DATA_SETTINGS, CorpusIdentity, CorpusKind, corpus_description
from transformer_lab.data.prepared_labelled import (
    LABELLED_KIND,
    LabelledCorpusSpec,
    LabelledRow,
    PreparedLabelled,
    labelled_report,
    labelled_settings,
    open_prepared_labelled,
    read_labelled_manifest,
    tokenizer_sha256,
    write_prepared_labelled,
)
from transformer_lab.data.splits import check_fraction
from transformer_lab.data.subword import check_vocab_size
from transformer_lab.data.token_store import TokenStore
from transformer_lab.training.run.once_per_machine import prepared_corpus


@dataclass(frozen=True)
class ClassificationDataConfig:
    """Where the data is, how the validation split is carved, how text becomes batches."""

    # The settings the user's files leave unused, each with what it is for (check_settings_used).
    UNUSED_WITH_TRAIN_FILES: ClassVar[dict[str, str]] = {
        "data_dir": "the folder of AG News",
        "train_file": "which of AG News's files to train on",
    }
    UNUSED_WITHOUT_TRAIN_FILES: ClassVar[dict[str, str]] = {
        "file_format": "the format of the training file",
        "text_fields": "the training file's text columns or keys",
        "label_field": "the training file's label column or key",
    }
    UNUSED_WITH_VALID_FILES: ClassVar[dict[str, str]] = {
        "validation_fraction": "the share of the training rows to hold out for validation",
        "split_seed": "which training rows to hold out for validation",
    }
    # `prepare` refuses these by name (prepared_cache.RUN_ONLY_DATA_SETTINGS, and the task's own).
    UNUSED_BY_PREPARE: ClassVar[dict[str, str]] = {
        **RUN_ONLY_DATA_SETTINGS,
        "seed": "the shuffling of the training batches",
    }

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
    cache_dir: str = ""  # the folder of prepared corpora itself ("" = $TRANSFORMER_LAB_CACHE/prepared, else ~/.cache's)

    def __post_init__(self) -> None:
        check_int_fields(self, "data", {**CORPUS_FIELD_BOUNDS, "num_train": ANY_COUNT, "split_seed": SEED_RANGE})
        # Now, not once the corpus is read and its BPE learned, and named as the setting.
        check_fraction(self.validation_fraction, "data.validation_fraction")
        check_vocab_size("data.vocab_size", self.vocab_size)
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
        # Checked here, before any corpus is read or prepared, in the settings' own names.
        check_field_names(self.text_fields, self.label_field, "data.text_fields", "data.label_field")
        check_label_apart(self.text_fields, self.label_field, "data.label_field")
        if self.prepared_dir and self.train_files:
            raise ValueError(
                "data.prepared_dir: expected either a prepared folder or data.train_files (--train), got both"
            )


# What a prepared corpus does not depend on: where the data is, and a run's own settings.
_UNDESCRIBED = ("data_dir", *ClassificationDataConfig.UNUSED_BY_PREPARE)


@dataclass
class ClassificationData:
    """The training rows encoded (ids, labels, lines), the validation rows, and the tokenizer trained on them."""

    tokenizer: SubwordTokenizer
    class_names: tuple[str, ...]
    train_file: Path
    validation_articles: list[LabelledRow]
    train_store: TokenStore  # the training ids (column "tokens") and labels, one row per article
    train_line_numbers: np.ndarray  # [N] the training rows' 1-based lines in train_file
    num_skipped: int
    validation_file: Path | None = None  # a separate validation file (None: carved from train_file)

    @property
    def report(self) -> dict[str, Any]:
        """What was read, as recorded in a prepared corpus's manifest."""
        return labelled_report(
            self.train_file,
            self.validation_file,
            len(self.train_store),
            len(self.validation_articles),
            self.num_skipped,
        )


def corpus_spec(config: ClassificationDataConfig) -> LabelledCorpusSpec:
    """What ``config`` reads: AG News's training file and classes, or the user's file, read strictly."""
    if config.train_files and config.skip_malformed:
        raise ValueError(
            "data.skip_malformed: expected False with data.train_files (a labelled file is read strictly, "
            "nothing is skipped), got True"
        )
    return LabelledCorpusSpec(
        Path(config.train_files[0])
        if config.train_files
        else ag_news_path("train", config.data_dir, config.train_file),
        classes_file=None if config.train_files else resolve_ag_news_dir(config.data_dir) / CLASSES_FILE,
        skip_malformed=config.skip_malformed,
        text_fields=config.text_fields,
        label_field=config.label_field,
        file_format=config.file_format,
        valid_file=Path(config.valid_files[0]) if config.valid_files else None,
        validation_fraction=config.validation_fraction,
        split_seed=config.split_seed,
        num_train=config.num_train,
        vocab_size=config.vocab_size,
        lowercase=config.lowercase,
        min_frequency=config.min_frequency,
    )


def read_labelled_file(
    config: ClassificationDataConfig,
    path: str | os.PathLike[str],
    *,
    max_records: int = 0,
    text_fields: Sequence[str] | None = None,
    label_field: str | None = None,
    file_format: str | None = None,
    format_name: str = "data.file_format",
    field_names: FieldNames = SETTING_NAMES,
) -> LabelledTextFile:
    """Read a labelled file with the config's fields and format (each overridable; None keeps the config's).

    ``format_name`` is what an unknown suffix's error advises: the config's setting, or the option given instead.
    """
    return read_labelled_text(
        path,
        config.text_fields if text_fields is None else tuple(text_fields),
        config.label_field if label_field is None else label_field,
        config.file_format if file_format is None else file_format,
        max_records=max_records,
        format_name=format_name,
        field_names=field_names,
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


def corpus_kind(
    config: ClassificationDataConfig,
    tokenizer: SubwordTokenizer | None = None,
    class_names: Sequence[str] | None = None,
) -> CorpusKind[PreparedLabelled]:
    """``config``'s prepared data, streamed: training rows encoded, validation held out; a given vocabulary kept."""

    def refusal(manifest: dict[str, Any]) -> str | None:
        if class_names is None or tuple(class_names) == tuple(manifest["class_names"]):
            return None
        return f"expected the checkpoint's classes {list(class_names)!r}, got {list(manifest['class_names'])!r}"

    # The spec is made only to describe or write: a prepared folder opens without the files it came from.
    return CorpusKind(
        LABELLED_KIND,
        CorpusIdentity("tokenizer", None if tokenizer is None else tokenizer_sha256(tokenizer)),
        lambda: corpus_description(config, _UNDESCRIBED, corpus_spec(config).input_files()),
        lambda folder, description: write_prepared_labelled(
            folder, corpus_spec(config), tokenizer, class_names, description
        ),
        open_prepared_labelled,
        read_labelled_manifest,
        refusal,
        fixed_settings=labelled_settings,
        data_config=config,
    )
