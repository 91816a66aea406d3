"""Couplets prepared once into a memory-mapped `TokenStore` with their character vocabulary.

A couplet corpus is read, checked and split by the couplet task's rules (skipped pairs
counted, validation carved with the seed, duplicates of validation upper lines left out,
extra splits and backwards pairs added); what training needs of it is kept here: the
training pairs' character ids in a store (``source`` the upper lines, ``target`` the lower
lines), ``vocabulary.txt``, the validation couplets as text in ``validation.jsonl`` and a
``manifest.json`` with the input files (size, mtime, sha256), the vocabulary's sha256, the
data report and the format version. The folder is written under a temporary name and
renamed (`folders.write_folder`).

Preparing streams the files in bounded chunks, never holding the corpus:

1. count the training split's couplets (checking every line, logging what is skipped);
2. draw the validation positions with the seed, as `couplet.split_validation` does, and
   read those couplets in a pass that stops after the last (or read the validation files);
3. when no vocabulary is given, count the characters of the training pairs in one pass;
4. encode the training pairs chunk by chunk into the store: the split's pairs (less the
   held-out ones and those repeating a validation upper line, cut at ``num_train``), the
   extra splits', then, where asked, every one of them read backwards.

The training pairs come out in the order, and the report with the counts, of the corpus
read whole (the oracle the tests hold it to).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformer_lab.data.couplet import (
    CARVED_SETTING,
    punctuation_free,
    read_couplet_source,
    validation_positions,
    validation_upper_lines,
)
from transformer_lab.data.couplet_stream import CoupletCount, CoupletFiles, count_couplets, stream_couplets
from transformer_lab.data.manifest_checks import SHA256, report_holding
from transformer_lab.data.pair_stream import count_pairs
from transformer_lab.data.prepared_cache import (
    VALIDATION_FILE,
    InputWatch,
    described_settings,
    read_corpus_manifest,
    read_pairs_jsonl,
    write_corpus_manifest,
    write_pairs_jsonl,
)
from transformer_lab.data.token_store import TokenStore, TokenStoreWriter, ids_dtype
from transformer_lab.data.validation_overlap import ValidationOverlap
from transformer_lab.data.vocabulary import UNK_ID, Vocabulary

logger = logging.getLogger(__name__)

COUPLETS_KIND = "couplets"
COUPLETS_FORMAT_VERSION = 1
VOCABULARY_FILE = "vocabulary.txt"
COUPLET_KEYS = ("upper", "lower")  # the keys of validation.jsonl


@dataclass
class PreparedCouplets:
    """A prepared couplet corpus: the training ids (mapped), the vocabulary, the validation couplets, the report."""

    store: TokenStore
    vocabulary: Vocabulary
    validation_pairs: list[tuple[str, str]]
    report: dict[str, int]
    folder: Path
    manifest: dict[str, Any]


def vocabulary_sha256(vocabulary: Vocabulary) -> str:
    """The sha256 of the vocabulary's tokens in id order (what identifies the ids a store holds)."""
    return hashlib.sha256("".join(token + "\n" for token in vocabulary.tokens).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CoupletCorpusSpec:
    """What a couplet corpus is read from and how it is split into training and validation pairs."""

    train: CoupletFiles  # the training split or the user's training files
    valid: CoupletFiles | None = None  # the user's validation couplets (None: carve num_validation)
    num_validation: int = 1000
    seed: int = 1234  # draws the carved validation pairs
    num_train: int = 0  # keep only the first N training pairs of the split (0 = all)
    extra: tuple[CoupletFiles, ...] = ()  # more training splits, added after the split's pairs
    add_reversed_pairs: bool = False  # every training pair also read backwards, after the forward ones
    min_frequency: int = 1  # characters seen fewer times in training are left out of a built vocabulary


_COUNTS = ("dropped", "extra_pairs", "extra_dropped", "reversed_dropped", "train_pairs")


class _TrainingCouplets:
    """The training pairs of a spec, streamed as often as asked, in the order of the corpus read whole.

    ``counts`` holds what the last whole pass left out and added, for the data report.
    """

    def __init__(self, spec: CoupletCorpusSpec, held: set[int], validation: Sequence[tuple[str, str]]) -> None:
        self.spec = spec
        self.held = held
        self.held_out_uppers = validation_upper_lines(validation)
        self.counts: dict[str, int] = {}
        # The user's validation couplets whose upper line the split's couplets, all kept, repeat.
        self.overlap = ValidationOverlap([punctuation_free(upper) for upper, _ in validation])

    def _repeats_validation(self, pair: tuple[str, str]) -> bool:
        return punctuation_free(pair[0]) in self.held_out_uppers

    def chunks(self) -> Iterator[list[tuple[str, str]]]:
        """The training pairs in bounded lists: forward (the split's, then the extra splits'), then backwards."""
        first_pass = not self.counts
        counts = dict.fromkeys(_COUNTS, 0)
        for chunk in self._forward(counts, first_pass):
            counts["train_pairs"] += len(chunk)
            yield chunk
        if self.spec.add_reversed_pairs:
            for chunk in self._forward(dict.fromkeys(_COUNTS, 0), False):
                backward = [(lower, upper) for upper, lower in chunk]
                kept = [pair for pair in backward if not self._repeats_validation(pair)]
                counts["reversed_dropped"] += len(backward) - len(kept)
                counts["train_pairs"] += len(kept)
                yield kept
        self.counts = counts

    def _forward(self, counts: dict[str, int], first_pass: bool) -> Iterator[list[tuple[str, str]]]:
        # With the user's validation files the split's own pairs are all kept, as a whole read keeps them.
        carved = self.spec.valid is None
        position = kept = 0
        for chunk in stream_couplets(self.spec.train):
            training = []
            for pair in chunk:
                position += 1
                if position - 1 in self.held:
                    continue
                if carved and self._repeats_validation(pair):
                    counts["dropped"] += 1
                elif not self.spec.num_train or kept < self.spec.num_train:
                    kept += 1
                    training.append(pair)
                    if first_pass:
                        self.overlap.see(punctuation_free(pair[0]))
            yield training
        for extra in self.spec.extra:
            if first_pass:
                count_pairs(extra.files)  # misaligned files are refused before any line is read
            extra_count = CoupletCount()
            for chunk in stream_couplets(extra, extra_count):
                training = [pair for pair in chunk if not self._repeats_validation(pair)]
                counts["extra_dropped"] += len(chunk) - len(training)
                counts["extra_pairs"] += len(training)
                yield training
            if first_pass:
                extra_count.log(extra)


def _held_out_pairs(source: CoupletFiles, held: set[int]) -> list[tuple[str, str]]:
    """The couplets at the positions ``held`` (0-based among those kept), in file order; stops after the last."""
    validation: list[tuple[str, str]] = []
    if not held:
        return validation
    last = max(held)
    position = 0
    for chunk in stream_couplets(source):
        for pair in chunk:
            if position in held:
                validation.append(pair)
            position += 1
            if position > last:
                return validation
    raise ValueError(f"{source.upper_path}: expected {last + 1} couplets or more, read {position}; did it change?")


class _UnknownCharacters:
    """The characters of couplets that a given vocabulary (a fine-tuned or resumed run's) lacks: read as <unk>."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.vocabulary = vocabulary
        self.unknown = 0
        self.total = 0
        self.examples: dict[str, None] = {}  # the first few, in order of appearance

    def count(self, pairs: Sequence[tuple[str, str]], encoded: Sequence[list[int]]) -> None:
        """Count the <unk> ids of ``encoded`` (the pairs' lines as ids); name the first few characters behind them."""
        found = sum(ids.count(UNK_ID) for ids in encoded)
        self.total += sum(map(len, encoded))
        self.unknown += found
        if found and len(self.examples) < 8:
            for character in "".join(upper + lower for upper, lower in pairs):
                if character not in self.vocabulary and len(self.examples) < 8:
                    self.examples.setdefault(character)

    def warn(self, validation: Sequence[tuple[str, str]]) -> None:
        """Warn of the training (then validation) characters the vocabulary lacks: silently <unk> otherwise."""
        for name, unknown, total, examples in (
            ("training", self.unknown, self.total, self.examples),
            ("validation", *self._counted(validation)),
        ):
            if unknown:
                logger.warning(
                    "%s of the %s characters of the %s couplets (%.1f%%) are not in the checkpoint's vocabulary "
                    "and are read as <unk> (%s): the model can neither read nor write them; fine-tuning keeps the "
                    "checkpoint's vocabulary, so train from scratch for text of other characters",
                    f"{unknown:,}",
                    f"{total:,}",
                    name,
                    100 * unknown / total,
                    " ".join(examples),
                )

    def _counted(self, pairs: Sequence[tuple[str, str]]) -> tuple[int, int, dict[str, None]]:
        other = _UnknownCharacters(self.vocabulary)
        other.count(pairs, [self.vocabulary.encode(list(line)) for pair in pairs for line in pair])
        return other.unknown, other.total, other.examples


def write_prepared_couplets(
    folder: Path,
    spec: CoupletCorpusSpec,
    vocabulary: Vocabulary | None,
    inputs: Sequence[Path],
    description: dict[str, Any],
) -> None:
    """Prepare ``spec``'s corpus into the (new, temporary) ``folder``, streaming; see the module docstring.

    ``vocabulary`` (a resumed or fine-tuned run's) fixes the ids; None builds it from the
    training pairs. ``description`` is what the corpus was made from (the settings and
    files), recorded so that a cache can tell whether it still holds.
    """
    started = time.perf_counter()
    # Before the first read: a file that changes from here to the manifest is refused, not kept.
    watch = InputWatch(inputs)
    count = count_couplets(spec.train)
    if spec.valid is not None:
        held: set[int] = set()
        read = read_couplet_source(spec.valid)
        validation = read.pairs
        if not validation:
            # Else the run would train without validation, best/ never written, without a word.
            skipped = len(read.skipped_empty) + len(read.skipped_unequal) + len(read.skipped_too_long)
            files = read.upper_path if read.upper_path == read.lower_path else f"{read.upper_path}, {read.lower_path}"
            raise ValueError(
                f"{files}: expected at least one validation couplet, got none: all {skipped} pair(s) were skipped "
                "(their kinds and first lines are logged above)"
            )
    else:
        held = validation_positions(count.pairs, spec.num_validation, spec.seed, name=CARVED_SETTING)
        validation = _held_out_pairs(spec.train, held)
    training = _TrainingCouplets(spec, held, validation)
    unknown = None if vocabulary is None else _UnknownCharacters(vocabulary)
    if vocabulary is None:
        vocabulary = Vocabulary.build(
            (list(line) for chunk in training.chunks() for pair in chunk for line in pair),
            min_frequency=spec.min_frequency,
        )
    writer = TokenStoreWriter(folder, ("source", "target"), ids_dtype(len(vocabulary)))
    try:
        for chunk in training.chunks():
            if not chunk:
                continue
            encoded = {
                "source": [vocabulary.encode(list(upper)) for upper, _ in chunk],
                "target": [vocabulary.encode(list(lower)) for _, lower in chunk],
            }
            if unknown is not None:
                unknown.count(chunk, encoded["source"] + encoded["target"])
            writer.append(encoded)
        writer.finish()
    except BaseException:
        writer.close()
        raise
    report = {
        **count.summary(),
        "validation_pairs": len(validation),
        "train_dropped_as_validation_duplicates": training.counts["dropped"],
        **(
            {
                "extra_train_pairs": training.counts["extra_pairs"],
                "extra_dropped_as_validation_duplicates": training.counts["extra_dropped"],
            }
            if spec.extra
            else {}
        ),
        **(
            {"reversed_dropped_as_validation_duplicates": training.counts["reversed_dropped"]}
            if spec.add_reversed_pairs
            else {}
        ),
        "train_pairs": training.counts["train_pairs"],
        **({} if unknown is None else {"train_unknown_characters": unknown.unknown}),
    }
    if not training.counts["train_pairs"]:
        # Else the batcher's "lengths must be non-empty" comes later, naming nothing the user gave.
        raise ValueError(
            "training couplets: expected some left once the validation couplets are held out, got none: "
            f"{training.counts['dropped']:,} of the {count.pairs:,} read repeat a validation upper line and are left "
            "out (so that validation scores unseen lines); give more couplets, or other validation couplets"
        )
    if unknown is not None:
        unknown.warn(validation)
    if spec.valid is not None:
        training.overlap.warn(
            " ".join(map(str, spec.valid.files.paths)),
            " ".join(map(str, spec.train.files.paths)),
            "couplets",
            lambda index: f"upper line {validation[index][0]!r}",
        )
    # Debug only: `train` says the report once it opens the folder, `prepare` prints it.
    logger.debug("couplet data: %s", ", ".join(f"{key} {value}" for key, value in report.items()))
    vocabulary.save(folder / VOCABULARY_FILE)
    write_pairs_jsonl(folder / VALIDATION_FILE, validation, COUPLET_KEYS)
    write_corpus_manifest(
        folder,
        COUPLETS_KIND,
        COUPLETS_FORMAT_VERSION,
        description,
        watch,
        started,
        vocabulary_sha256=vocabulary_sha256(vocabulary),
        report=report,
    )


def couplet_settings(description: dict[str, Any]) -> dict[str, Any]:
    """The couplet data settings a corpus was made with, by field; not the seed, which also shuffles the batches."""
    return described_settings(description, unfixed=("seed",))


def read_couplets_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of a prepared couplet folder; a ValueError naming the file if it is not one."""
    fields = {"vocabulary_sha256": SHA256, "report": report_holding("train_pairs")}
    return read_corpus_manifest(folder, COUPLETS_KIND, COUPLETS_FORMAT_VERSION, fields)


def open_prepared_couplets(folder: str | os.PathLike[str]) -> PreparedCouplets:
    """Open a folder written by `write_prepared_couplets` (the ids mapped)."""
    folder = Path(folder)
    manifest = read_couplets_manifest(folder)
    vocabulary = Vocabulary.load(folder / VOCABULARY_FILE)
    if vocabulary_sha256(vocabulary) != manifest.get("vocabulary_sha256"):
        raise ValueError(f"{folder}: {VOCABULARY_FILE} differs from the one the ids were made with; prepare it again")
    store = TokenStore.open(folder)
    validation = read_pairs_jsonl(folder / VALIDATION_FILE, COUPLET_KEYS)
    return PreparedCouplets(store, vocabulary, validation, dict(manifest["report"]), folder, manifest)
