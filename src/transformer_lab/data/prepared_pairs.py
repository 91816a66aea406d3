"""A corpus of sentence pairs prepared once into a memory-mapped `TokenStore`, and reused while its inputs hold.

Preparing reads the user's files in bounded chunks, never whole:

1. count the pairs on bytes (a misaligned pair of line files is refused here, at once);
2. draw the held-out validation pairs by seeded pair numbers (when no validation files
   are given), read in one pass that stops after the last, and, when the BPE is to be
   learned, a seeded sample of at most ``tokenizer_sample`` training sentences, likewise;
3. encode the training pairs chunk by chunk with the tokenizer's own threads and append
   their ids to the store, hashing the files as they are read; the held-out pairs are
   kept as text (they are decoded against, not trained on), and a training pair whose
   source sentence is a held-out pair's is left out (and counted), so that validation
   scores sentences the model has not learned.

Every line is checked as strictly as `pair_files.read_pair_files` checks it. The folder
holds the store, the tokenizer file(s), ``validation.jsonl`` and ``manifest.json`` (inputs
with size, mtime, inode, ctime and the sha256 of the bytes read, the tokenizer's sha256 and
how it was made, the counts, the format version). A file that changed while it was read is
an error, and nothing is kept. The folder is written under a temporary name and renamed: a
crash leaves no half a corpus. In a cache (`pairs_kind`) one folder is kept per inputs and
split and reused while the inputs (size, mtime, inode and ctime, else the sha256), the BPE
settings and the tokenizer are unchanged; anything else is rebuilt, never silently reused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import random
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from transformer_lab.data.carve_error import CarveError, nothing_left_to_train
from transformer_lab.data.manifest_checks import COUNT_OR_NONE, SHA256, report_holding
from transformer_lab.data.pair_files import read_pair_files
from transformer_lab.data.pair_stream import PairFiles, count_pairs, numbered_pairs, stream_pairs
from transformer_lab.data.prepared_cache import (
    INPUT_CHECKS,
    REPEATS_LEFT_OUT,
    VALIDATION_FILE,
    CorpusIdentity,
    CorpusKind,
    InputWatch,
    read_corpus_manifest,
    read_pairs_jsonl,
    write_corpus_manifest,
    write_pairs_jsonl,
)
from transformer_lab.data.subword import SubwordTokenizer, check_vocab_size, check_word_lengths
from transformer_lab.data.token_store import TokenStore, TokenStoreWriter, ids_dtype
from transformer_lab.data.tokenizer_pair import (
    JOINT_TOKENIZER_FILE,
    SOURCE_TOKENIZER_FILE,
    TARGET_TOKENIZER_FILE,
    TokenizerPair,
)
from transformer_lab.data.validation_overlap import ValidationOverlap
from transformer_lab.data.word_cache import WordCachedEncoder
from transformer_lab.shortened import shortened

logger = logging.getLogger(__name__)

PAIR_KEYS = ("source", "target")  # the keys of validation.jsonl
PAIRS_KIND = "pairs"
# 2: the manifest of every prepared corpus (description, inputs, tokenizer_sha256); 1 had its own.
PREPARED_FORMAT_VERSION = 2
# The description's record of a given tokenizer's sizes and case (a fact of the tokenizer, whose sha256 is compared).
GIVEN_TOKENIZER = CorpusIdentity("tokenizer").given_facts


@dataclass(frozen=True)
class BpeSettings:
    """How the byte-level BPE is learned when no tokenizer is given (see `SubwordTokenizer.train`)."""

    vocab_size: int = 8000
    target_vocab_size: int = 0  # the target side's size with separate vocabularies (0 = vocab_size)
    separate_vocabularies: bool = False
    lowercase: bool = False
    min_frequency: int = 2
    sample: int = 0  # learn from at most this many training sentences, drawn with the seed (0 = all)

    def __post_init__(self) -> None:
        # Checked before any file is read, not minutes in when the BPE trainer starts.
        check_vocab_size("data.vocab_size", self.vocab_size)
        if self.target_vocab_size:
            check_vocab_size("data.target_vocab_size", self.target_vocab_size)
            if not self.separate_vocabularies:
                # The joint BPE has one size: the target side's would be dropped without a word.
                raise ValueError(
                    "data.target_vocab_size: expected only with data.separate_vocabularies=true (one joint BPE "
                    f"has the one size data.vocab_size={self.vocab_size}), got {self.target_vocab_size} without it"
                )
        if self.sample < 0:
            raise ValueError(f"data.tokenizer_sample: expected an int >= 0 (0 = all), got {self.sample}")

    def learn(self, pairs: Sequence[tuple[str, str]]) -> TokenizerPair:
        """The tokenizer(s) learned from all of ``pairs``: one joint BPE, or one per side."""

        def side(sides: str, vocab_size: int) -> SubwordTokenizer:
            return SubwordTokenizer.train_from_pairs(
                pairs, vocab_size=vocab_size, lowercase=self.lowercase, min_frequency=self.min_frequency, sides=sides
            )

        if not self.separate_vocabularies:
            return TokenizerPair.joint(side("both", self.vocab_size))
        return TokenizerPair(side("source", self.vocab_size), side("target", self.target_vocab_size or self.vocab_size))


@dataclass(frozen=True)
class PairCorpusSpec:
    """What is read and how it is split: the training files, optional validation files, the carve, the cuts."""

    train: PairFiles
    valid: PairFiles | None = None
    num_carved_validation: int = 1000  # without validation files: at most a tenth of the pairs
    seed: int = 1234  # draws the held-out pairs and the tokenizer's sample
    num_train: int = 0  # keep only the first N training pairs (0 = all)
    num_validation: int = 0  # keep only the first N validation pairs (0 = all)

    def __post_init__(self) -> None:
        if self.valid is None:  # here, before any file is read
            check_carved_count(self.num_carved_validation)

    def describe(self) -> dict[str, Any]:
        """The spec as JSON-ready values, with absolute paths (the cache key and the manifest's record)."""

        def files(value: PairFiles | None) -> dict[str, Any] | None:
            if value is None:
                return None
            return {
                "paths": [str(path.resolve()) for path in value.paths],
                "form": value.form,
                "languages": [value.source_language, value.target_language],
            }

        return {
            "train": files(self.train),
            "valid": files(self.valid),
            "num_carved_validation": self.num_carved_validation,
            "seed": self.seed,
            "num_train": self.num_train,
            "num_validation": self.num_validation,
        }


@dataclass
class PreparedPairs:
    """A prepared corpus: the training ids (mapped), the tokenizers, the validation pairs and the manifest."""

    store: TokenStore
    tokenizers: TokenizerPair
    validation_pairs: list[tuple[str, str]]
    folder: Path
    manifest: dict[str, Any]

    @property
    def report(self) -> dict[str, int]:
        """The counts of the manifest (pairs read, training and validation pairs, tokens)."""
        return dict(self.manifest["counts"])


def tokenizer_sha256(tokenizers: TokenizerPair) -> str:
    """One sha256 over the tokenizer files' names and JSON texts (what identifies the ids a store holds)."""
    digest = hashlib.sha256()
    for name, text in sorted(tokenizers.files().items()):
        digest.update(name.encode("utf-8") + b"\0" + text.encode("utf-8") + b"\0")
    return digest.hexdigest()


def _description(spec: PairCorpusSpec, bpe: BpeSettings) -> dict[str, Any]:
    """The manifest's record of what was read, how it was split and how a BPE would be learned."""
    return {**spec.describe(), "bpe": dataclasses.asdict(bpe)}


def _given_tokenizer(tokenizers: TokenizerPair) -> dict[str, Any]:
    """A given tokenizer's sizes and case as data settings, recorded beside the description for a run to take."""
    return {
        "vocab_size": tokenizers.source.vocab_size,
        "target_vocab_size": 0 if tokenizers.is_joint else tokenizers.target.vocab_size,
        "lowercase": tokenizers.source.lowercase,
        "separate_vocabularies": not tokenizers.is_joint,
    }


def pair_settings(description: dict[str, Any]) -> dict[str, Any]:
    """The translation data settings a pairs corpus was made with, by field, from its manifest's description.

    Not the seed (it also shuffles the batches) nor num_validation (it still cuts the
    folder's validation pairs): a run from the folder uses those. Where the tokenizer was
    given (a checkpoint's, ``data.tokenizer_file``), not the settings of a BPE to learn (none
    was learned) but the given tokenizer's sizes and case, as the manifest records them
    (a folder prepared before it did records neither).
    """
    train, valid, bpe = description["train"], description["valid"], description["bpe"]
    given = description.get(GIVEN_TOKENIZER) or {}
    learned = {
        "vocab_size": bpe["vocab_size"],
        "target_vocab_size": bpe["target_vocab_size"],
        "lowercase": bpe["lowercase"],
        "min_frequency": bpe["min_frequency"],
        "tokenizer_sample": bpe["sample"],
    }
    return {
        **(given if description.get("tokenizer") == "given" else learned),
        "file_format": train["form"],
        "source_language": train["languages"][0],
        "target_language": train["languages"][1],
        "valid_files": [] if valid is None else valid["paths"],
        "num_carved_validation": description["num_carved_validation"],
        "num_train": description["num_train"],
        "separate_vocabularies": given.get("separate_vocabularies", bpe["separate_vocabularies"]),
    }


def pairs_kind(
    spec: PairCorpusSpec | None,
    tokenizers: TokenizerPair | None = None,
    bpe: BpeSettings = BpeSettings(),
    *,
    progress: bool = True,
    data_config: Any = None,
) -> CorpusKind[PreparedPairs]:
    """The prepared corpus of ``spec`` (None: only a folder prepared before, opened as it is); see the module docstring.

    ``tokenizers`` given: the ids are theirs; None: a BPE is learned by ``bpe`` from a
    seeded sample of the training pairs. The cache keeps one entry per files and split,
    whatever the BPE settings (other settings replace it). ``data_config``: the run's
    translation data config, whose settings a prepared folder fixes (see `pair_settings`).
    """

    def files() -> PairCorpusSpec:
        if spec is None:
            raise ValueError("data.train_files: expected the files to prepare (--train), got none")
        return spec

    # What fixes the ids besides the files: the given tokenizer(s), or a BPE learned from the data.
    identity = CorpusIdentity("tokenizer", None if tokenizers is None else tokenizer_sha256(tokenizers))
    return CorpusKind(
        PAIRS_KIND,
        identity,
        lambda: _description(files(), bpe),
        lambda folder, description: _write_prepared(files(), folder, tokenizers, bpe, description, progress),
        open_prepared_pairs,
        read_pairs_manifest,
        unkeyed=("bpe",),
        fixed_settings=pair_settings,
        data_config=data_config,
    )


# ---------------------------------------------------------------------------- preparing


def _carved_positions(count: int, spec: PairCorpusSpec) -> set[int]:
    """The pair numbers (0-based) held out for validation when no validation files are given."""
    return set() if spec.valid is not None else carved_positions(count, spec.num_carved_validation, spec.seed)


def carved_positions(count: int, num_carved: int, seed: int) -> set[int]:
    """Which of ``count`` training pairs (0-based) are held out for validation: ``min(num_carved, count // 10)``.

    Drawn with ``seed``, the same for a corpus read whole and one streamed; fewer than 10
    pairs leave nothing to carve, which is a `CarveError` naming the validation files.
    """
    check_carved_count(num_carved)
    held = _held_positions(count, num_carved, seed)
    if not held:
        raise CarveError(
            "{valid_files}: expected validation files, or at least 10 training pairs to carve validation from, "
            "got {count} training pair(s) and no {valid_files}",
            ("valid_files",),
            count=count,
        )
    logger.info(
        "no validation files given: %d of the %d training pairs are held out for validation (seed %d)",
        len(held),
        count,
        seed,
    )
    return held


def check_carved_count(num_carved: int) -> None:
    """Refuse a carve of no pairs (validation files are how to hold none out).

    Else the carve is refused once the files are read, as if the pairs were too few.
    """
    if num_carved == 0:
        raise CarveError(
            "{num_carved_validation}: expected at least 1 without {valid_files} (how many training pairs to hold "
            "out for validation), got 0; give validation files ({valid_files}) to hold none out",
            ("num_carved_validation", "valid_files"),
        )


def _held_positions(count: int, num_carved: int, seed: int) -> set[int]:
    return set(random.Random(seed).sample(range(count), min(num_carved, count // 10)))


def _held_pairs(files: PairFiles, held: set[int]) -> list[tuple[str, str]]:
    """The pairs at the positions ``held`` (0-based among all pairs), in file order; stops after the last."""
    if not held:
        return []  # validation files given: the training files are not read for it
    pairs: list[tuple[str, str]] = []
    last = max(held)
    index = 0
    for _, pair in numbered_pairs(files):
        if index > last:
            break
        if pair is None:
            continue
        if index in held:
            pairs.append(pair)
        index += 1
    return pairs


def _sample_pairs(
    spec: PairCorpusSpec, held: set[int], num_train: int, sample_pairs: int, carved_sources: set[str]
) -> tuple[list[tuple[str, str]], int]:
    """(the sampled training pairs in file order, how many were drawn) for learning the BPE."""
    if sample_pairs <= 0 or sample_pairs >= num_train:
        wanted = None
        last = num_train - 1
    else:
        wanted = set(random.Random(spec.seed).sample(range(num_train), sample_pairs))
        last = max(wanted)
    sample: list[tuple[str, str]] = []
    position = 0  # among the training pairs
    index = 0  # among all pairs
    for number, pair in numbered_pairs(spec.train):
        if pair is None:
            continue
        if index not in held:
            if (wanted is None or position in wanted) and pair[0] not in carved_sources:
                # Here, where the file and line are known: the trainer would name only the sentence's index.
                _check_pair_words(spec.train, number, pair)
                sample.append(pair)
            position += 1
        index += 1
        if position > last:
            return sample, len(sample)
    return sample, len(sample)


def _check_pair_words(files: PairFiles, number: int, pair: tuple[str, str]) -> None:
    """Refuse a pair with a word too long to learn BPE from, naming its file and line (`check_word_lengths`)."""
    for side, text in enumerate(pair):
        if files.form == "lines":
            where = f"{files.paths[side]}: line {number}"
        else:
            where = f"{files.paths[0]}: line {number} ({PAIR_KEYS[side]} sentence)"
        check_word_lengths(text, where)


def _learn_tokenizers(
    spec: PairCorpusSpec, held: set[int], num_train: int, bpe: BpeSettings, carved_sources: set[str]
) -> tuple[TokenizerPair, int]:
    """The BPE tokenizer(s) learned from a seeded sample of the training pairs, and the sample's pair count."""
    # A joint BPE reads both sentences of a pair; one per side reads one of each.
    sample_pairs = 0 if bpe.sample <= 0 else max(1, bpe.sample // (1 if bpe.separate_vocabularies else 2))
    started = time.perf_counter()
    sample, drawn = _sample_pairs(spec, held, num_train, sample_pairs, carved_sources)
    if not sample and carved_sources:
        raise nothing_left_to_train(num_train + len(held), len(held), "pairs", "source sentences", "validation files")
    logger.info(
        "learning the BPE from %d of the %d training pairs (data.tokenizer_sample=%d sentences)",
        drawn,
        num_train,
        bpe.sample,
    )
    pair = bpe.learn(sample)
    logger.info("BPE learned in %.1f s", time.perf_counter() - started)
    return pair, drawn


def _append_encoded(
    writer: TokenStoreWriter, bar: Any, future: Future[dict[str, list[list[int]]]], num_read: int
) -> None:
    encoded = future.result()
    if encoded["source"]:
        writer.append(encoded)
    bar.update(num_read)


def _validation_pairs(valid: PairFiles, num_validation: int) -> list[tuple[str, str]]:
    """The pairs of the validation files (the first ``num_validation``; 0: all), read and checked whole."""
    pairs = read_pair_files(valid.paths, valid.source_language, valid.target_language, valid.form, name="--valid").pairs
    return pairs[: num_validation or None]


def _write_prepared(
    spec: PairCorpusSpec,
    folder: Path,
    tokenizers: TokenizerPair | None,
    bpe: BpeSettings,
    description: dict[str, Any],
    progress: bool,
) -> None:
    started = time.perf_counter()
    if tokenizers is not None:
        description = {**description, GIVEN_TOKENIZER: _given_tokenizer(tokenizers)}
    valid_paths = [] if spec.valid is None else list(spec.valid.paths)
    # Before the first read: a file that changes from here to the manifest is refused, not kept.
    inputs = InputWatch([*spec.train.paths, *valid_paths])
    count = count_pairs(spec.train)
    # Before the BPE and the pass that encodes the corpus (minutes at millions of pairs): a bad
    # validation file is refused in the time a count takes, not once the training data is done.
    validation = None if spec.valid is None else _validation_pairs(spec.valid, spec.num_validation)
    seen_in_training = ValidationOverlap(validation or [])
    held = _carved_positions(count, spec)
    carved = _held_pairs(spec.train, held)
    carved_sources = {source for source, _ in carved}
    num_train = count - len(held) if spec.num_train == 0 else min(spec.num_train, count - len(held))
    sample_drawn = None
    if tokenizers is None:
        tokenizers, sample_drawn = _learn_tokenizers(spec, held, num_train, bpe, carved_sources)
    vocab_size = max(tokenizers.source.vocab_size, tokenizers.target.vocab_size)
    writer = TokenStoreWriter(folder, ("source", "target"), ids_dtype(vocab_size))
    digests = [inputs.digest(index) for index in range(len(spec.train.paths))]
    index = 0
    # None: only on a terminal, as training's and the download's bars; a log file gets no "\r" updates.
    bar = tqdm(
        total=count, desc="preparing", unit="pairs", unit_scale=True, disable=None if progress else True, leave=False
    )
    # One cache a side, even for a joint vocabulary: each holds one language's words.
    source_encoder = WordCachedEncoder(tokenizers.source)
    target_encoder = WordCachedEncoder(tokenizers.target)

    def encode(training: list[tuple[str, str]]) -> dict[str, list[list[int]]]:
        return {
            "source": source_encoder.encode_batch([source for source, _ in training]),
            "target": target_encoder.encode_batch([target for _, target in training]),
        }

    # A worker thread encodes a chunk while this thread reads and checks the next one (they
    # overlap where the tokenizer runs on its own threads, without the GIL); at most two
    # chunks wait, so memory stays bounded.
    pending: deque[tuple[Future[dict[str, list[list[int]]]], int]] = deque()
    kept = 0
    repeating_validation = 0  # training pairs left out: their source sentence is a carved validation pair's
    try:
        with ThreadPoolExecutor(max_workers=1) as executor:
            for chunk in stream_pairs(spec.train, digests=digests):
                training = []
                for pair in chunk:
                    if index not in held and kept < num_train:
                        if pair[0] in carved_sources:
                            repeating_validation += 1
                        else:
                            training.append(pair)
                            seen_in_training.see(pair)
                            kept += 1
                    index += 1
                pending.append((executor.submit(encode, training), len(chunk)))
                while len(pending) > 2 or (pending and pending[0][0].done()):
                    _append_encoded(writer, bar, *pending.popleft())
            while pending:
                _append_encoded(writer, bar, *pending.popleft())
        writer.finish()
    except BaseException:
        for future, _ in pending:
            future.cancel()
        writer.close()
        raise
    finally:
        bar.close()
    if index != count:
        raise ValueError(f"{spec.train.paths[0]}: expected {count} pairs (counted), read {index}; did the file change?")
    if kept == 0 and repeating_validation:
        raise nothing_left_to_train(count, len(held), "pairs", "source sentences", "validation files")
    if spec.valid is None or validation is None:
        validation = carved[: spec.num_validation or None]
    else:
        seen_in_training.warn(
            " ".join(map(str, spec.valid.paths)),
            " ".join(map(str, spec.train.paths)),
            "pairs",
            lambda index: " -> ".join(shortened(repr(side), 60) for side in validation[index]),
        )
    write_pairs_jsonl(folder / VALIDATION_FILE, validation, PAIR_KEYS)
    for name, text in tokenizers.files().items():
        (folder / name).write_text(text, encoding="utf-8")
    store = TokenStore.open(folder)
    seconds = time.perf_counter() - started
    write_corpus_manifest(
        folder,
        PAIRS_KIND,
        PREPARED_FORMAT_VERSION,
        description,
        # The training files were hashed as they were read; the validation files are small.
        inputs,
        started,
        tokenizer_sha256=tokenizer_sha256(tokenizers),
        tokenizer_sample_pairs=sample_drawn,
        counts={
            "pairs_read": count,
            "train_pairs": len(store),
            "validation_pairs": len(validation),
            "train_pairs_repeating_validation": repeating_validation,
            "source_tokens": store.num_tokens("source"),
            "target_tokens": store.num_tokens("target"),
        },
    )
    logger.info(
        "prepared %d training pairs (%d + %d tokens) and %d validation pairs in %.1f s (%.0f pairs/s)",
        len(store),
        store.num_tokens("source"),
        store.num_tokens("target"),
        len(validation),
        seconds,
        count / max(seconds, 1e-9),
    )
    if repeating_validation:
        logger.info(
            "left out %d training pairs whose source sentence is a held-out validation pair's, so that validation "
            "scores sentences the model has not learned",
            repeating_validation,
        )


# ---------------------------------------------------------------------------- opening


_MANIFEST_FIELDS = {
    "tokenizer_sha256": SHA256,
    "tokenizer_sample_pairs": COUNT_OR_NONE,
    "counts": report_holding("train_pairs", "validation_pairs"),
}


def read_pairs_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of a prepared pairs folder, every field checked; a ValueError naming the file if it is not one."""
    return read_corpus_manifest(folder, PAIRS_KIND, PREPARED_FORMAT_VERSION, _MANIFEST_FIELDS)


def read_prepared_tokenizers(folder: Path) -> TokenizerPair:
    """The tokenizer(s) a prepared folder holds: its tokenizer.json, or its source_ and target_tokenizer.json."""
    if (folder / SOURCE_TOKENIZER_FILE).is_file():
        return TokenizerPair(
            SubwordTokenizer.load(folder / SOURCE_TOKENIZER_FILE), SubwordTokenizer.load(folder / TARGET_TOKENIZER_FILE)
        )
    return TokenizerPair.joint(SubwordTokenizer.load(folder / JOINT_TOKENIZER_FILE))


def open_prepared_pairs(folder: str | os.PathLike[str]) -> PreparedPairs:
    """Open a folder prepared by `pairs_kind` (the ids mapped, nothing loaded but the validation pairs)."""
    folder = Path(folder)
    manifest = read_pairs_manifest(folder)
    tokenizers = read_prepared_tokenizers(folder)
    if tokenizer_sha256(tokenizers) != manifest.get("tokenizer_sha256"):
        raise ValueError(f"{folder}: the tokenizer files differ from those the ids were made with; prepare it again")
    store = TokenStore.open(folder)
    return PreparedPairs(store, tokenizers, read_pairs_jsonl(folder / VALIDATION_FILE, PAIR_KEYS), folder, manifest)


def training_pair_origin(folder: Path, row: int) -> str | None:
    """Where training pair ``row`` (0-based) of the prepared corpus in ``folder`` was read: file, line and text.

    The files are read again up to that pair (an error path only); None where the folder
    is no pairs corpus read from files, or the files no longer hold that pair.
    """
    recorded = _recorded_reading(folder, "train")
    if recorded is None:
        return None
    manifest, files, carved = recorded
    held = carved or set()
    kept = 0
    try:
        # A folder prepared before the carve's repeats were left out (fewer input checks recorded) kept them.
        passed = manifest.get("input_checks")
        leaves_out = type(passed) is int and passed > INPUT_CHECKS.index(REPEATS_LEFT_OUT)
        carved_sources = {source for source, _ in _held_pairs(files, held)} if leaves_out else set()
        pairs = ((number, pair) for number, pair in numbered_pairs(files) if pair is not None)
        for index, (number, (source, target)) in enumerate(pairs):
            if index in held or source in carved_sources:
                continue
            if kept == row:
                return _line_of(files, number, source, target)
            kept += 1
    except (OSError, ValueError):
        return None
    return None


def validation_pair_origin(folder: Path, row: int) -> str | None:
    """Where validation pair ``row`` (0-based) of the prepared corpus in ``folder`` was read: file, line and text.

    From the validation files, or where none were given, from the training files' held-out pairs;
    None as :func:`training_pair_origin` gives it.
    """
    recorded = _recorded_reading(folder, "valid")
    if recorded is None:
        return None
    _, files, carved = recorded
    try:
        pairs = ((number, pair) for number, pair in numbered_pairs(files) if pair is not None)
        validation = (item for index, item in enumerate(pairs) if carved is None or index in carved)
        for found, (number, (source, target)) in enumerate(validation):
            if found == row:
                return _line_of(files, number, source, target)
    except (OSError, ValueError):
        return None
    return None


def _recorded_reading(folder: Path, side: str) -> tuple[dict[str, Any], PairFiles, set[int] | None] | None:
    """The manifest of ``folder``, the files its ``side`` ("train", or "valid") was read from, and the pair
    numbers carved from the training files for validation (None: validation files were given).

    "valid" falls back to the training files where validation was carved from them. None where the
    folder is no pairs corpus read from files.
    """
    try:
        manifest = read_pairs_manifest(folder)
    except (OSError, ValueError):
        return None
    description = manifest["description"]
    given_validation = description.get("valid") is not None
    read = description.get("valid" if side == "valid" and given_validation else "train")
    if not isinstance(read, dict):
        return None
    files = PairFiles(tuple(Path(path) for path in read["paths"]), read["form"], *read["languages"])
    carved = (
        None
        if given_validation
        else _held_positions(
            manifest["counts"]["pairs_read"], description["num_carved_validation"], description["seed"]
        )
    )
    return manifest, files, carved


def _line_of(files: PairFiles, number: int, source: str, target: str) -> str:
    """A pair named by its line in ``files``, with the start of its text."""
    where = " and ".join(str(path) for path in files.paths)
    return f"line {number} of {where} ({source[:40]!r} -> {target[:40]!r})"
