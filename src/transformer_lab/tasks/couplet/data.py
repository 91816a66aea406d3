"""Couplet data: the training split or the user's files, validation carved or given, the prepared corpus."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from transformer_lab.data import Vocabulary
from transformer_lab.data._checks import ANY_COUNT, CORPUS_FIELD_BOUNDS, check_int_fields
from transformer_lab.data.couplet import (
    CARVED_SETTING,
    LOWER_FILE,
    UPPER_FILE,
    CoupletCorpus,
    check_split_name,
    read_couplet_source,
    resolve_couplet_split_dir,
    split_validation,
)
from transformer_lab.data.couplet_stream import CoupletFiles
from transformer_lab.data.pair_files import check_pair_format
from transformer_lab.data.prepared_cache import (
    RUN_ONLY_DATA_SETTINGS,
    CorpusIdentity,
    CorpusKind,
    corpus_description,
    prepared_files,
)
from transformer_lab.data.prepared_couplets import (
    COUPLETS_KIND,
    CoupletCorpusSpec,
    PreparedCouplets,
    couplet_settings,
    open_prepared_couplets,
    read_couplets_manifest,
    vocabulary_sha256,
    write_prepared_couplets,
)
from transformer_lab.models.embedding import MAX_POSITIONS
from transformer_lab.tasks.seq2seq import Seq2SeqData
from transformer_lab.training.run.once_per_machine import prepared_corpus

logger = logging.getLogger(__name__)
# What a bad pair's error advises: the setting that skips such pairs, as the command line sets it.
SKIP_INVALID_OPTION = "--set data.skip_invalid"


@dataclass(frozen=True)
class CoupletDataConfig:
    """Where the couplets are, how they are filtered, split and batched."""

    # The settings the user's files leave unused, each with what it is for (check_settings_used).
    UNUSED_WITH_TRAIN_FILES: ClassVar[dict[str, str]] = {"train_split": "the split of the data folder trained on"}
    UNUSED_WITHOUT_TRAIN_FILES: ClassVar[dict[str, str]] = {"file_format": "the format of the training files"}
    UNUSED_WITH_VALID_FILES: ClassVar[dict[str, str]] = {
        "num_validation": "how many training couplets to hold out for validation"
    }
    # `prepare` refuses these by name (prepared_cache.RUN_ONLY_DATA_SETTINGS, and the task's own).
    UNUSED_BY_PREPARE: ClassVar[dict[str, str]] = {
        **RUN_ONLY_DATA_SETTINGS,
        "test_split": "the split evaluate scores without --split",
    }

    data_dir: str | None = None  # folder holding couplet/ (None: $TRANSFORMER_LAB_DATA, else the download folder)
    train_split: str = "train_couplet_machine"  # or "train" (wb14123's 770k pairs) where present
    # The user's own couplets instead of train_split: two line files (upper, lower), or one
    # .tsv (upper<TAB>lower) or .jsonl ({"upper": ..., "lower": ...}) file.
    train_files: tuple[str, ...] = ()
    # Validation couplets in the same forms; () = carve num_validation pairs from training.
    valid_files: tuple[str, ...] = ()
    file_format: str = ""  # "lines", "tsv" or "jsonl"; "" = from the number of files and the suffix
    test_split: str = "test"  # what `evaluate couplet` scores without --split (wb14123's 4,000 test pairs)
    # Training pairs whose upper line is longer are skipped and counted (58 of the 90,889
    # train_couplet_machine pairs, up to 533 characters); the test lines are at most 31.
    max_length: int = 64
    # Skip (and count) training pairs with an empty side or lines of unequal length
    # instead of stopping: train_couplet_machine has one (line 6564, an ideographic space).
    skip_invalid: bool = True
    num_validation: int = 1000  # carved at random (seeded) from the training split
    num_train: int = 0  # use only the first N training pairs after the split (0 = all)
    # Also train on every pair read backwards (lower -> upper), left out where its upper
    # line is a validation upper line; doubles the steps of an epoch. Off: at equal steps
    # it scored 0.4 validation BLEU below the forward pairs alone
    # (docs/experiments/2026-11-couplets.md).
    add_reversed_pairs: bool = False
    # More splits of the data folder to train on, added after validation is carved from
    # the training split (so validation stays the same pairs), e.g. ("regulated_verse",),
    # which benchmarks/regulated_verse_couplets.py builds; a pair whose upper line is a
    # validation upper line is left out and counted. Same length and validity filters.
    extra_train_splits: tuple[str, ...] = ()
    min_frequency: int = 1  # characters seen fewer times in training read as <unk>
    # Padded tokens per batch (the longer of source/target). 2,048 rather than 4,096: twice the
    # optimizer steps at the same tokens/s scored higher in the same epochs (docs/results.md#couplets).
    max_tokens: int = 2048
    seed: int = 1234  # validation split and batch shuffling
    # A folder written by `transformer-lab prepare couplet` to train from ("" = read and
    # prepare the corpus into the cache folder, or reuse it there).
    prepared_dir: str = ""
    cache_dir: str = ""  # the folder of prepared corpora itself ("" = $TRANSFORMER_LAB_CACHE/prepared, else ~/.cache's)

    def __post_init__(self) -> None:
        counts = dict.fromkeys(("num_validation", "num_train"), ANY_COUNT)
        check_int_fields(self, "data", {**CORPUS_FIELD_BOUNDS, "max_length": (1, MAX_POSITIONS - 1), **counts})
        check_pair_format(self.file_format)
        check_split_name(self.test_split, "data.test_split")
        for name, files in (("train_files", self.train_files), ("valid_files", self.valid_files)):
            if files:  # checked here, where an error names the option or key that gave the files
                _user_files(self, files, f"data.{name}")


CoupletData = Seq2SeqData[Vocabulary]

# What a prepared corpus does not depend on: where the data is, and a run's own settings (the test split among them).
_UNDESCRIBED = ("data_dir", *CoupletDataConfig.UNUSED_BY_PREPARE)


def build_data(config: CoupletDataConfig, vocabulary: Vocabulary | None = None) -> CoupletData:
    """The run's data: a prepared folder, or the corpus prepared once into the cache folder (and reused there).

    ``vocabulary`` (a resumed or fine-tuned run's) fixes the ids; None builds it from the
    training pairs. The training ids are memory-mapped; the validation couplets are text.
    """
    prepared = prepared_corpus(corpus_kind(config, vocabulary), config.prepared_dir, config.cache_dir)
    return CoupletData(prepared.vocabulary, prepared.store, prepared.validation_pairs, prepared.report)


def corpus_kind(config: CoupletDataConfig, vocabulary: Vocabulary | None = None) -> CorpusKind[PreparedCouplets]:
    """``config``'s prepared corpus, streamed: the ids of the corpus read whole, with ``vocabulary``'s when given."""
    if config.train_files:  # the lists of the user's files are checked before any corpus is looked for
        _training_source(config, config.data_dir)
        _validation_source(config)

    def write(folder: Path, description: dict[str, Any]) -> None:
        spec = CoupletCorpusSpec(
            train=_training_source(config, config.data_dir),
            valid=_validation_source(config),
            num_validation=config.num_validation,
            seed=config.seed,
            num_train=config.num_train,
            extra=tuple(_split_files(config, name, config.data_dir) for name in config.extra_train_splits),
            add_reversed_pairs=config.add_reversed_pairs,
            min_frequency=config.min_frequency,
        )
        write_prepared_couplets(folder, spec, vocabulary, _input_files(config), description)

    return CorpusKind(
        COUPLETS_KIND,
        CorpusIdentity("vocabulary", None if vocabulary is None else vocabulary_sha256(vocabulary)),
        lambda: corpus_description(config, _UNDESCRIBED, _input_files(config)),
        write,
        open_prepared_couplets,
        read_couplets_manifest,
        fixed_settings=couplet_settings,
        data_config=config,
    )


def _input_files(config: CoupletDataConfig) -> list[Path]:
    """Every file the corpus of ``config`` reads: training split or files, validation files, extra splits."""
    return [*training_files(config), *(Path(path) for path in config.valid_files)]


def training_files(config: CoupletDataConfig) -> list[Path]:
    """The files the run of ``config`` trains on: its training split or files, and its extra splits."""
    if config.train_files:
        files = [Path(path) for path in config.train_files]
    else:
        folder = resolve_couplet_split_dir(config.train_split, config.data_dir)
        files = [folder / UPPER_FILE, folder / LOWER_FILE]
    for split in config.extra_train_splits:
        folder = resolve_couplet_split_dir(split, config.data_dir)
        files += [folder / UPPER_FILE, folder / LOWER_FILE]
    return files


def load_validation_pairs(config: CoupletDataConfig, data_dir: str | None = None) -> list[tuple[str, str]]:
    """The validation pairs a run with this data config held out (the same seeded split it carved).

    ``data_dir`` replaces ``config.data_dir`` when given; a prepared folder's are those it holds.
    """
    if config.prepared_dir:
        return open_prepared_couplets(config.prepared_dir).validation_pairs
    _, (_, validation_pairs, _) = _read_and_split(config, data_dir if data_dir is not None else config.data_dir)
    return validation_pairs


def validation_files(config: CoupletDataConfig, data_dir: str | None = None) -> list[Path]:
    """The files :func:`load_validation_pairs` reads: an evaluation's output must be none of them."""
    if config.prepared_dir:
        return prepared_files(config.prepared_dir)
    data_dir = data_dir if data_dir is not None else config.data_dir
    sources = (_training_source(config, data_dir), _validation_source(config))
    return [path for source in sources if source is not None for path in source.files.paths]


def _training_source(config: CoupletDataConfig, data_dir: str | None) -> CoupletFiles:
    """Where the training couplets are read from: the user's ``train_files``, else the ``train_split`` folder."""
    if config.train_files:
        return _user_files(config, config.train_files, "--train")
    if config.valid_files:
        raise ValueError("data.valid_files: expected only with data.train_files (--train), got it without")
    return _split_files(config, config.train_split, data_dir)


def _split_files(config: CoupletDataConfig, split: str, data_dir: str | None) -> CoupletFiles:
    """The couplets of the data folder's ``split``, read with the config's filters."""
    return CoupletFiles.of_split(resolve_couplet_split_dir(split, data_dir), **_filters(config))


def _validation_source(config: CoupletDataConfig) -> CoupletFiles | None:
    """The user's validation couplets (None: validation is carved from training)."""
    return _user_files(config, config.valid_files, "--valid") if config.valid_files else None


def _user_files(config: CoupletDataConfig, files: tuple[str, ...], name: str) -> CoupletFiles:
    """The user's couplet ``files`` (named ``name`` in errors), read in the config's format with its filters."""
    return CoupletFiles.of_files(files, config.file_format, name=name, **_filters(config))


def _filters(config: CoupletDataConfig) -> dict[str, Any]:
    """The config's filters of couplet files, whose errors advise the setting as the command line sets it."""
    return {"skip_invalid": config.skip_invalid, "max_length": config.max_length, "skip_option": SKIP_INVALID_OPTION}


def _read_and_split(
    config: CoupletDataConfig, data_dir: str | None
) -> tuple[CoupletCorpus, tuple[list[tuple[str, str]], list[tuple[str, str]], int]]:
    """The training couplets as read, and their (train pairs, validation pairs, dropped count) split.

    Validation is the user's ``valid_files`` when given (nothing dropped), else a seeded
    carve of ``num_validation`` pairs.
    """
    corpus = read_couplet_source(_training_source(config, data_dir))
    valid = _validation_source(config)
    if valid is not None:
        return corpus, (corpus.pairs, read_couplet_source(valid).pairs, 0)
    return corpus, split_validation(corpus.pairs, config.num_validation, config.seed, name=CARVED_SETTING)
