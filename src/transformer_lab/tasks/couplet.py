"""Chinese couplets (对联): given the upper line, write the lower line.

Thin glue over ``data`` (the wb14123-format reader, a character vocabulary, token-budget
batches), ``models`` (Seq2SeqTransformer with one vocabulary and all embeddings tied),
``training`` (Trainer) and ``decoding`` (greedy or beam search with `CoupletConstraints`,
which fixes the length and punctuation and, as configured, repetition and the final tone).
The vocabulary is built from the training split only and saved in every checkpoint as
``vocabulary.txt``; characters it does not know read as ``<unk>``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch

from transformer_lab.data import BOS_ID, EOS_ID, NUM_SPECIAL_TOKENS, PAD_ID, UNK_ID, Seq2SeqBatch, Vocabulary
from transformer_lab.data._checks import ANY_COUNT, MAX_BATCH_TOKENS, SEED_RANGE, check_int_fields
from transformer_lab.data.chinese import is_punctuation, tone_class
from transformer_lab.data.couplet import (
    LOWER_FILE,
    UPPER_FILE,
    CoupletCorpus,
    load_couplets,
    read_couplet_source,
    resolve_couplet_split_dir,
    split_characters,
    split_validation,
    with_reversed_pairs,
    without_validation_uppers,
)
from transformer_lab.data.couplet_stream import CoupletFiles
from transformer_lab.data.prepared_cache import CorpusIdentity, cache_folder, cached_folder
from transformer_lab.data.prepared_couplets import (
    CoupletCorpusSpec,
    open_prepared_couplets,
    read_couplets_manifest,
    vocabulary_sha256,
    write_prepared_couplets,
)
from transformer_lab.decoding import DecodeConfig
from transformer_lab.decoding.couplet_constraints import CoupletConstraints
from transformer_lab.evaluation.bleu import corpus_bleu
from transformer_lab.evaluation.couplet_antithesis import part_of_speech_agreement, rhythm_agreement
from transformer_lab.evaluation.couplet_metrics import CoupletReport, couplet_report, level_tone_ending_rate
from transformer_lab.folders import write_folder
from transformer_lab.models import ModelConfig, Seq2SeqTransformer
from transformer_lab.models.embedding import MAX_POSITIONS
from transformer_lab.tasks import seq2seq
from transformer_lab.tasks.couplet_constraint_options import CONSTRAINT_OPTIONS
from transformer_lab.tasks.evaluation import EvaluationOptions, EvaluationReport
from transformer_lab.tasks.seq2seq import Candidate, Seq2SeqData, Seq2SeqTask, bucketed_epoch_batches
from transformer_lab.tasks.task import Task
from transformer_lab.training import TrainConfig
from transformer_lab.training.run.once_per_machine import prepared_once_per_machine

logger = logging.getLogger(__name__)

TASK_NAME = "couplet"
VOCABULARY_FILE = "vocabulary.txt"
# The data report a checkpoint records beside its config (what was read and skipped).
METADATA_KEYS = ("data_report",)
_LATIN_LETTERS = re.compile(r"[A-Za-zＡ-Ｚａ-ｚ]")


@dataclass(frozen=True)
class CoupletDataConfig:
    """Where the couplets are, how they are filtered, split and batched."""

    data_dir: str | None = None  # folder holding couplet/ (None: $TRANSFORMER_LAB_DATA, else the download folder)
    train_split: str = "train_couplet_machine"  # or "train" (wb14123's 770k pairs) where present
    # The user's own couplets instead of train_split: two line files (upper, lower), or one
    # .tsv (upper<TAB>lower) or .jsonl ({"upper": ..., "lower": ...}) file.
    train_files: tuple[str, ...] = ()
    # Validation couplets in the same forms; () = carve num_validation pairs from training.
    valid_files: tuple[str, ...] = ()
    file_format: str = ""  # "lines", "tsv" or "jsonl"; "" = from the number of files and the suffix
    test_split: str = "test"  # wb14123's 4,000 test pairs
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
    # Padded tokens per batch (the longer of source/target). 2,048 rather than 4,096: twice
    # the optimizer steps at the same tokens/s, validation greedy BLEU 2.88 -> 3.41 in the
    # same 30 epochs (docs/results.md#couplets).
    max_tokens: int = 2048
    seed: int = 1234  # validation split and batch shuffling
    # A folder written by `transformer-lab prepare couplet` to train from ("" = read and
    # prepare the corpus into the cache folder, or reuse it there).
    prepared_dir: str = ""
    cache_dir: str = ""  # where prepared corpora are kept ("" = $TRANSFORMER_LAB_CACHE, else ~/.cache)

    def __post_init__(self) -> None:
        check_int_fields(
            self,
            "data",
            {
                "max_tokens": (1, MAX_BATCH_TOKENS),
                "max_length": (1, MAX_POSITIONS - 1),
                "min_frequency": (1, ANY_COUNT[1]),
                "seed": SEED_RANGE,
                **dict.fromkeys(("num_validation", "num_train"), ANY_COUNT),
            },
        )


@dataclass(frozen=True)
class CoupletConstraintConfig:
    """The couplet rules decoding enforces (see decoding/couplet_constraints.py)."""

    punctuation_mode: str = "copy"  # "copy" the upper line's marks, or "any" punctuation there
    # Repeat where the upper line repeats and only there: all 4,000 test references do.
    mirror_repetition: bool = True
    # No character of the upper line in the lower line: none of the 4,000 test references has one.
    avoid_source_characters: bool = True
    # Nats taken from oblique-tone characters at the last position: 97.9 % of the test
    # references end on a level tone, 93.9 % of train_couplet_machine's lower lines.
    oblique_final_penalty: float = 4.0
    # Nats taken at each position from characters of the upper character's tone class
    # (tone opposition, 平仄相对); 0 = off. 0.25 because validation said so on the finished
    # preset run (the average of its last 5 epochs, 1,000 validation pairs): the smallest
    # setting tried that lifts tone opposition past the test references' 0.77 (0.748 ->
    # 0.773 at beam 10), at no BLEU cost beyond the noise (4.47 -> 4.56 at beam 10, 4.47 ->
    # 4.63 at beam 20, 4.33 -> 4.31 at beam 5, 2.98 -> 2.92 greedy); 0.5 cost 0.08 at
    # beam 10 (docs/results.md#couplet-antithesis). Models early in training paid more for it.
    tone_opposition_penalty: float = 0.25
    # Beam search only (greedy search has one candidate): its candidates are re-ranked by
    # their score plus these nats per unit of part-of-speech / rhythm agreement with the
    # upper line (jieba, as evaluation/couplet_antithesis.py scores them); 0 = off. See
    # rerank_by_antithesis. Rhythm 0.5 because validation said so: on an epoch-14 preset
    # model it raised rhythm agreement 0.536 -> 0.574 (beam 5) and 0.540 -> 0.597 (beam 20)
    # with BLEU 3.07 -> 3.13 and 3.20 -> 3.19, and on the finished run 0.539 -> 0.587 (beam
    # 10) for BLEU 4.55 -> 4.47, inside the noise. Parts of speech 0: it cost BLEU at 0.5
    # and 1 nats on the epoch-14 model (3.07 -> 3.00) and bought none on the finished run
    # (4.47 -> 4.48 at beam 10), for a rate already above the references' without it
    # (docs/results.md#couplet-antithesis).
    part_of_speech_rerank: float = 0.0
    rhythm_rerank: float = 0.5

    def __post_init__(self) -> None:
        for name in ("part_of_speech_rerank", "rhythm_rerank"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < math.inf:
                raise ValueError(f"{name}: expected a finite number of nats >= 0, given {value!r}")

    @property
    def reranks(self) -> bool:
        """Whether beam search's candidates are re-ranked by antithesis."""
        return self.part_of_speech_rerank > 0 or self.rhythm_rerank > 0


def _default_model() -> ModelConfig:
    # Chosen by validation BLEU in a side-by-side sweep (docs/results.md#recipe-sweep): the aligned
    # decoder input (the encoder's vector of the upper line's character t added to the
    # decoder's input at t) lifted validation BLEU at 2,178 steps from 0.61 to 1.60, and
    # 2+2 layers scored as 3+3 did (1.69 vs 1.60 at epoch 10) for 3/4 of the step time.
    return ModelConfig(
        d_model=256,
        nhead=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=1024,
        dropout=0.1,
        max_len=128,  # inputs up to 127 characters (+ eos); longer ones are refused, never cut
        tie_embeddings="all",
        aligned_decoder_input=True,
    )


def _default_train() -> TrainConfig:
    return TrainConfig(
        **seq2seq.SEQ2SEQ_TRAIN_PRESET,  # validation BLEU here is greedy and constrained
        # 393 batches of ~2,000 target tokens per epoch (89,410 training pairs of ~9
        # characters), 11,790 steps in 30 epochs: 80 minutes on two quiet threads of a Zen 4
        # EPYC in bf16, within the 90-minute CPU budget; on one Zen 3 thread in fp32 (no
        # bf16 instructions) about 31 steps a minute, so some six hours
        # (docs/results.md#precision). Validation BLEU kept rising into the cool-down
        # (docs/results.md#couplets); test beam-5 BLEU 2.06 (15 epochs) -> 2.61 (30) ->
        # 2.82 (30 epochs of 2,048-token batches).
        epochs=30,
        cooldown_steps=2400,  # the last ~6 epochs (a fifth of the steps) settle the weights
        keep_last=2,
    )


def _default_decode() -> DecodeConfig:
    # The constraints fix the length, so the length penalty has nothing to rank.
    return DecodeConfig(
        strategy="beam", beam_size=5, max_len=128, max_len_a=1.0, max_len_b=1, length_penalty=0.0, precision="auto"
    )


@dataclass
class CoupletConfig:
    """Everything a couplet run needs; written into every checkpoint."""

    data: CoupletDataConfig = field(default_factory=CoupletDataConfig)
    model: ModelConfig = field(default_factory=_default_model)
    train: TrainConfig = field(default_factory=_default_train)
    decode: DecodeConfig = field(default_factory=_default_decode)
    constraints: CoupletConstraintConfig = field(default_factory=CoupletConstraintConfig)


def default_config() -> CoupletConfig:
    return CoupletConfig()


# ---------------------------------------------------------------------------- data


CoupletData = Seq2SeqData[Vocabulary]


def build_data(config: CoupletDataConfig, vocabulary: Vocabulary | None = None) -> CoupletData:
    """The run's data: a prepared folder, or the corpus prepared once into the cache folder (and reused there).

    ``vocabulary`` (a resumed or fine-tuned run's) fixes the ids; None builds it from the
    training pairs. The training ids are memory-mapped; the validation couplets are text.
    """
    identity = CorpusIdentity("vocabulary", None if vocabulary is None else vocabulary_sha256(vocabulary))
    if config.prepared_dir:
        prepared = open_prepared_couplets(config.prepared_dir)
        identity.check_prepared(prepared.folder, prepared.manifest)
    else:
        description = _corpus_description(config)
        folder = cache_folder("couplets", description, config.cache_dir or None)

        def stale_reason(cached: Path) -> str | None:
            return identity.stale_reason(read_couplets_manifest(cached), description)

        def prepare(partial: Path) -> None:
            _write_corpus(config, partial, vocabulary)

        # Under torchrun one process of each machine prepares; the others map its files.
        prepared = prepared_once_per_machine(
            folder, lambda: open_prepared_couplets(cached_folder(folder, stale_reason, prepare)), open_prepared_couplets
        )
    logger.info(
        "couplet data from %s: %s",
        prepared.folder,
        ", ".join(f"{key} {value}" for key, value in prepared.report.items()),
    )
    return CoupletData(prepared.vocabulary, prepared.store, prepared.validation_pairs, prepared.report)


def _corpus_description(config: CoupletDataConfig) -> dict[str, Any]:
    """What a prepared corpus depends on: the reading, split and vocabulary settings and the files read."""
    unused = ("data_dir", "max_tokens", "test_split", "prepared_dir", "cache_dir")
    settings = {key: value for key, value in dataclasses.asdict(config).items() if key not in unused}
    description = {**settings, "inputs": [str(path.resolve()) for path in _input_files(config)]}
    return json.loads(json.dumps(description))  # as the manifest reads back: tuples become lists


def _input_files(config: CoupletDataConfig) -> list[Path]:
    """Every file the corpus of ``config`` reads: training split or files, validation files, extra splits."""
    if config.train_files:
        files = [Path(path) for path in config.train_files]
    else:
        folder = resolve_couplet_split_dir(config.train_split, config.data_dir)
        files = [folder / UPPER_FILE, folder / LOWER_FILE]
    files += [Path(path) for path in config.valid_files]
    for split in config.extra_train_splits:
        folder = resolve_couplet_split_dir(split, config.data_dir)
        files += [folder / UPPER_FILE, folder / LOWER_FILE]
    return files


def prepare_corpus(
    config: CoupletDataConfig, out_dir: str | os.PathLike[str], vocabulary: Vocabulary | None = None
) -> Path:
    """Prepare ``config``'s corpus, streamed, into the new folder ``out_dir`` (the ids of `read_corpus`)."""
    return write_folder(out_dir, lambda folder: _write_corpus(config, folder, vocabulary))


def _write_corpus(config: CoupletDataConfig, folder: Path, vocabulary: Vocabulary | None) -> None:
    def split(name: str) -> CoupletFiles:
        folder = resolve_couplet_split_dir(name, config.data_dir)
        return CoupletFiles.of_split(folder, skip_invalid=config.skip_invalid, max_length=config.max_length)

    spec = CoupletCorpusSpec(
        train=_training_source(config, config.data_dir),
        valid=_validation_source(config),
        num_validation=config.num_validation,
        seed=config.seed,
        num_train=config.num_train,
        extra=tuple(split(name) for name in config.extra_train_splits),
        add_reversed_pairs=config.add_reversed_pairs,
        min_frequency=config.min_frequency,
    )
    write_prepared_couplets(
        folder,
        spec,
        vocabulary,
        _input_files(config),
        CorpusIdentity("vocabulary", None if vocabulary is None else vocabulary_sha256(vocabulary)).described(
            _corpus_description(config)
        ),
    )


def read_corpus(config: CoupletDataConfig, vocabulary: Vocabulary | None = None) -> CoupletData:
    """The corpus read whole: the training split, validation carved, the vocabulary built (unless given), encoded.

    `build_data` prepares this once into a store and reuses it; this keeps the text.
    """
    corpus, (train_pairs, validation_pairs, dropped) = _read_and_split(config, config.data_dir)
    if config.num_train:
        train_pairs = train_pairs[: config.num_train]
    extra_pairs, extra_dropped = _extra_training_pairs(config, validation_pairs)
    train_pairs = train_pairs + extra_pairs
    reversed_dropped = 0
    if config.add_reversed_pairs:
        train_pairs, reversed_dropped = with_reversed_pairs(train_pairs, validation_pairs)
    if vocabulary is None:
        vocabulary = Vocabulary.build(
            (list(line) for pair in train_pairs for line in pair), min_frequency=config.min_frequency
        )
    train_ids = [(vocabulary.encode(list(upper)), vocabulary.encode(list(lower))) for upper, lower in train_pairs]
    report = {
        **corpus.summary(),
        "validation_pairs": len(validation_pairs),
        "train_dropped_as_validation_duplicates": dropped,
        **(
            {"extra_train_pairs": len(extra_pairs), "extra_dropped_as_validation_duplicates": extra_dropped}
            if config.extra_train_splits
            else {}
        ),
        **({"reversed_dropped_as_validation_duplicates": reversed_dropped} if config.add_reversed_pairs else {}),
        "train_pairs": len(train_pairs),
    }
    logger.info("couplet data: %s", ", ".join(f"{key} {value}" for key, value in report.items()))
    return CoupletData.in_memory(vocabulary, train_pairs, validation_pairs, train_ids, report)


def _extra_training_pairs(
    config: CoupletDataConfig, validation_pairs: list[tuple[str, str]]
) -> tuple[list[tuple[str, str]], int]:
    """The pairs of ``config.extra_train_splits`` in order, less those repeating a validation upper line.

    Returns the kept pairs and the number left out (``without_validation_uppers``'s rule).
    """
    pairs: list[tuple[str, str]] = []
    for split in config.extra_train_splits:
        corpus = load_couplets(split, config.data_dir, skip_invalid=config.skip_invalid, max_length=config.max_length)
        pairs += corpus.pairs
    return without_validation_uppers(pairs, validation_pairs)


def load_validation_pairs(config: CoupletDataConfig, data_dir: str | None = None) -> list[tuple[str, str]]:
    """The validation pairs a run with this data config held out (the same seeded split it carved).

    ``data_dir`` replaces ``config.data_dir`` when given; a prepared folder's are those it holds.
    """
    if config.prepared_dir:
        return open_prepared_couplets(config.prepared_dir).validation_pairs
    _, (_, validation_pairs, _) = _read_and_split(config, data_dir if data_dir is not None else config.data_dir)
    return validation_pairs


def _training_source(config: CoupletDataConfig, data_dir: str | None) -> CoupletFiles:
    """Where the training couplets are read from: the user's ``train_files``, else the ``train_split`` folder."""
    skip_invalid, max_length = config.skip_invalid, config.max_length
    if config.train_files:
        return CoupletFiles.of_files(
            config.train_files, config.file_format, skip_invalid=skip_invalid, max_length=max_length
        )
    if config.valid_files:
        raise ValueError("data.valid_files: expected only with data.train_files (--train), got it without")
    folder = resolve_couplet_split_dir(config.train_split, data_dir)
    return CoupletFiles.of_split(folder, skip_invalid=skip_invalid, max_length=max_length)


def _validation_source(config: CoupletDataConfig) -> CoupletFiles | None:
    """The user's validation couplets (None: validation is carved from training)."""
    if not config.valid_files:
        return None
    return CoupletFiles.of_files(
        config.valid_files, config.file_format, skip_invalid=config.skip_invalid, max_length=config.max_length
    )


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
    return corpus, split_validation(corpus.pairs, config.num_validation, config.seed)


def epoch_batches(
    data: CoupletData, config: CoupletDataConfig, epoch: int, num_shards: int = 1, shard_index: int = 0
) -> Sequence[Seq2SeqBatch]:
    """Length-bucketed token-budget batches of one epoch, shuffled by (seed, epoch); a process's share under DDP."""
    return bucketed_epoch_batches(data, config.max_tokens, config.seed, epoch, num_shards, shard_index)


# ---------------------------------------------------------------------------- generation


def build_constraints(vocabulary: Vocabulary, config: CoupletConstraintConfig) -> CoupletConstraints:
    """The decoding constraints over this vocabulary's punctuation and level-tone characters."""
    tokens = vocabulary.tokens
    special = set(range(NUM_SPECIAL_TOKENS))
    punctuation = torch.tensor([index not in special and is_punctuation(token) for index, token in enumerate(tokens)])
    tone_classes = [None if index in special else tone_class(token) for index, token in enumerate(tokens)]
    level = torch.tensor([tone == "level" for tone in tone_classes])  # [V]
    oblique = torch.tensor([tone == "oblique" for tone in tone_classes])  # [V]
    return CoupletConstraints(
        punctuation,
        eos_id=EOS_ID,
        pad_id=PAD_ID,
        forbidden_ids=(PAD_ID, BOS_ID, UNK_ID),
        punctuation_mode=config.punctuation_mode,
        mirror_repetition=config.mirror_repetition,
        avoid_source_characters=config.avoid_source_characters,
        level_tone_mask=level,
        oblique_final_penalty=config.oblique_final_penalty,
        oblique_tone_mask=oblique,
        tone_opposition_penalty=config.tone_opposition_penalty,
    )


@dataclass(frozen=True)
class CoupletResult:
    """The answer to one upper line: candidates best first, or `error` saying why there are none.

    `note` names characters the vocabulary does not know (they were read as <unk>).
    """

    upper: str
    candidates: list[Candidate]
    error: str | None = None
    note: str | None = None


def _printable(characters: Sequence[str]) -> str:
    """The characters as text a terminal shows as they are: control, format and zero-width ones escaped (\\u200b)."""
    return "".join(character if character.isprintable() else f"\\u{ord(character):04x}" for character in characters)


def check_upper_line(upper: str, vocabulary: Vocabulary, max_len: int) -> tuple[str | None, str | None]:
    """(error, note) for one upper line (already without spaces); both None when it is fine."""
    if not upper:
        return "empty upper line: expected Chinese characters, got nothing", None
    surrogate = next((index for index, character in enumerate(upper) if "\ud800" <= character <= "\udfff"), None)
    if surrogate is not None:
        # Undecodable input bytes smuggled in by surrogateescape: no character to answer, and
        # no UTF-8 form to print.
        return (
            f"upper line has the lone surrogate U+{ord(upper[surrogate]):04X} at character {surrogate}: "
            "expected valid Unicode text (undecodable input bytes?)",
            None,
        )
    latin = sorted(set(_LATIN_LETTERS.findall(upper)))
    if latin:
        return (
            f"upper line {upper!r} contains Latin letters {''.join(latin)!r}: expected a line of Chinese characters",
            None,
        )
    if len(upper) >= max_len:
        return f"upper line of {len(upper)} characters: expected at most {max_len - 1} (the model's max_len - 1)", None
    if all(is_punctuation(character) for character in upper):
        return f"upper line {upper!r} is only punctuation: expected Chinese characters", None
    unseen = sorted({character for character in upper if character not in vocabulary})
    if unseen:
        return None, f"characters never seen in training, read as <unk>: {_printable(unseen)}"
    return None, None


def _punctuation_stand_in(vocabulary: Vocabulary) -> int | None:
    """The id that an unseen punctuation mark of an upper line is read as: '，' if known, else any known mark.

    Read as <unk> the mark would count as a character position, and the lower line would
    get a character under it.
    """
    if "，" in vocabulary:
        return vocabulary.token_to_id("，")
    marks = [
        index for index, token in enumerate(vocabulary.tokens) if index >= NUM_SPECIAL_TOKENS and is_punctuation(token)
    ]
    return marks[0] if marks else None


def _encode_upper(upper: str, vocabulary: Vocabulary, punctuation_stand_in: int | None) -> list[int]:
    ids = vocabulary.encode(list(upper))
    if punctuation_stand_in is None:
        return ids
    return [
        punctuation_stand_in if token_id == UNK_ID and is_punctuation(character) else token_id
        for character, token_id in zip(upper, ids)
    ]


def _restore_marks(upper: str, lower: list[str], config: CoupletConstraintConfig) -> str:
    """In "copy" mode, the upper line's own marks under its marks (an unseen mark was decoded as a stand-in)."""
    if config.punctuation_mode != "copy" or len(lower) != len(upper):
        return "".join(lower)
    return "".join(mark if is_punctuation(mark) else character for mark, character in zip(upper, lower))


def generate(
    model: Seq2SeqTransformer,
    vocabulary: Vocabulary,
    uppers: Sequence[str],
    decode_config: DecodeConfig,
    constraint_config: CoupletConstraintConfig,
    *,
    num_candidates: int = 1,
    batch_size: int = 64,
) -> list[CoupletResult]:
    """Write lower lines for `uppers` (batched by length); spaces in the input are ignored.

    A line that cannot be answered (empty, Latin letters, a lone surrogate, longer than
    the model's positional table) gets a result with `error` set and no candidates; the others are
    decoded. `num_candidates` > 1 needs beam search with at least that many beams.
    """
    if num_candidates < 1:
        raise ValueError(f"num_candidates must be >= 1, got {num_candidates}")
    if num_candidates > 1:
        if decode_config.strategy != "beam" or decode_config.beam_size < num_candidates:
            raise ValueError(
                f"num_candidates={num_candidates} needs beam search with at least as many beams, got "
                f"strategy {decode_config.strategy!r} with beam_size {decode_config.beam_size}"
            )
    # Re-ranking looks at every beam's hypothesis, then keeps num_candidates of them; greedy
    # search has one candidate, which no re-ranking can change.
    reranks = constraint_config.reranks and decode_config.strategy == "beam"
    returned = decode_config.beam_size if reranks else num_candidates
    decode_config = dataclasses.replace(decode_config, num_return=returned if decode_config.strategy == "beam" else 1)
    lines = [split_characters(upper) for upper in uppers]
    checks = [check_upper_line(line, vocabulary, model.max_len) for line in lines]
    results: list[CoupletResult | None] = [
        CoupletResult(line, [], error=error) if error else None for line, (error, _) in zip(lines, checks)
    ]
    punctuation_stand_in = _punctuation_stand_in(vocabulary)
    encoded = [
        _encode_upper(line, vocabulary, punctuation_stand_in) if result is None else []
        for line, result in zip(lines, results)
    ]
    found = seq2seq.decode_sources(
        model,
        encoded,
        decode_config,
        logits_processor=build_constraints(vocabulary, constraint_config),
        batch_size=batch_size,
    )
    for index, hypotheses in enumerate(found):
        if results[index] is None:

            def to_text(ids: list[int], upper: str = lines[index]) -> str:
                return _restore_marks(upper, vocabulary.decode(ids), constraint_config)

            candidates = seq2seq.candidates_of(hypotheses, to_text)
            if reranks:
                candidates = rerank_by_antithesis(lines[index], candidates, constraint_config)[:num_candidates]
            results[index] = CoupletResult(lines[index], candidates, note=checks[index][1])
    return [result for result in results if result is not None]


def rerank_by_antithesis(
    upper: str, candidates: Sequence[Candidate], config: CoupletConstraintConfig
) -> list[Candidate]:
    """``candidates`` best first by score + the config's nats x part-of-speech and rhythm agreement with ``upper``.

    The agreements are the per-pair rules of ``evaluation/couplet_antithesis.py`` (jieba),
    which decoding cannot see character by character (a word's tag and length are known
    only once the line is complete), so they choose among finished lines. A candidate keeps
    its own ``score``; ties keep the search's order.
    """

    def ranked(candidate: Candidate) -> float:
        bonus = 0.0
        if config.part_of_speech_rerank > 0:
            bonus += config.part_of_speech_rerank * part_of_speech_agreement(upper, candidate.text)
        if config.rhythm_rerank > 0:
            bonus += config.rhythm_rerank * rhythm_agreement(upper, candidate.text)
        return candidate.score + bonus

    return sorted(candidates, key=ranked, reverse=True)


# ---------------------------------------------------------------------------- evaluation


@dataclass
class CoupletEvaluation:
    report: CoupletReport
    uppers: list[str]
    hypotheses: list[str]
    references: list[str]


def evaluate_pairs(
    model: Seq2SeqTransformer,
    vocabulary: Vocabulary,
    pairs: Sequence[tuple[str, str]],
    decode_config: DecodeConfig,
    constraint_config: CoupletConstraintConfig,
) -> CoupletEvaluation:
    """Answer the upper lines of `pairs` and score against their lower lines (BLEU, form and antithesis)."""
    uppers = [upper for upper, _ in pairs]
    references = [lower for _, lower in pairs]
    hypotheses = answer_pairs(model, vocabulary, pairs, decode_config, constraint_config)
    return CoupletEvaluation(couplet_report(uppers, hypotheses, references), uppers, hypotheses, references)


def answer_pairs(
    model: Seq2SeqTransformer,
    vocabulary: Vocabulary,
    pairs: Sequence[tuple[str, str]],
    decode_config: DecodeConfig,
    constraint_config: CoupletConstraintConfig,
) -> list[str]:
    """The best lower line for each upper line of `pairs`; a refused upper line is an error naming it."""
    results = generate(model, vocabulary, [upper for upper, _ in pairs], decode_config, constraint_config)
    refused = [(index, result.error) for index, result in enumerate(results) if result.error]
    if refused:
        index, error = refused[0]
        raise ValueError(f"pairs[{index}]: {error} ({len(refused)} upper line(s) refused)")
    return [result.candidates[0].text for result in results]


# ---------------------------------------------------------------------------- training


def _read_vocabulary(folder: Path) -> Vocabulary:
    return Vocabulary.load(folder / VOCABULARY_FILE)


SEQ2SEQ_TASK: Seq2SeqTask[Vocabulary, CoupletConfig] = Seq2SeqTask(
    name=TASK_NAME,
    config_type=CoupletConfig,
    read_vocabulary=_read_vocabulary,
    # The file Vocabulary.save writes: one token per line in id order.
    vocabulary_files=lambda vocabulary: {VOCABULARY_FILE: "".join(token + "\n" for token in vocabulary.tokens)},
    vocabulary_sizes=lambda vocabulary: (len(vocabulary), len(vocabulary)),
    metadata_keys=METADATA_KEYS,
    card={"hub_task": "text2text-generation", "dataset": "couplet", "languages": ["zh"]},
)
TrainResult = seq2seq.TrainResult


def train(
    config: CoupletConfig,
    out_dir: str | os.PathLike[str],
    *,
    resume: bool = False,
    init_from: str | os.PathLike[str] | None = None,
) -> seq2seq.TrainResult[Vocabulary, CoupletConfig]:
    """Train a couplet model; validation character BLEU (greedy, constrained) each epoch decides ``best/``.

    ``init_from`` fine-tunes: the checkpoint's vocabulary and weights are the start (its
    model config must already be ``config.model``, see ``tasks.finetune``).
    """
    data = build_data(config.data, seq2seq.starting_vocabulary(SEQ2SEQ_TASK, Path(out_dir), resume, init_from))
    config = seq2seq.with_vocabulary(config, len(data.vocabulary))
    greedy = dataclasses.replace(config.decode, strategy="greedy", num_return=1)

    def evaluate(evaluated_model: torch.nn.Module) -> dict[str, float]:
        # The trainer hands back the model it was given (unwrapped from DDP).
        assert isinstance(evaluated_model, Seq2SeqTransformer), type(evaluated_model)
        # Only what is logged: the full report's antithesis rules (jieba over every line)
        # would cost seconds an epoch for figures nobody reads here.
        hypotheses = answer_pairs(evaluated_model, data.vocabulary, data.validation_pairs, greedy, config.constraints)
        references = [lower for _, lower in data.validation_pairs]
        return {
            "val_bleu": corpus_bleu(hypotheses, references, tokenize="zh").score,
            "val_level_tone_ending": level_tone_ending_rate(hypotheses).value,
        }

    evaluate_fn = evaluate if data.validation_pairs else None
    return seq2seq.train(SEQ2SEQ_TASK, config, data, out_dir, evaluate_fn, resume=resume, init_from=init_from)


def load(checkpoint: str | os.PathLike[str]) -> tuple[Seq2SeqTransformer, Vocabulary, CoupletConfig]:
    """Rebuild the model, vocabulary and config of a couplet checkpoint folder (or a run folder's best/)."""
    return seq2seq.load(SEQ2SEQ_TASK, checkpoint)


def _prepare(data: CoupletDataConfig, out_dir: Path, progress: bool) -> dict[str, Any]:
    prepared = open_prepared_couplets(prepare_corpus(data, out_dir))
    return {**prepared.report, "seconds": prepared.manifest["seconds"]}


def _evaluate(checkpoint: Path, split: str | None, options: EvaluationOptions) -> EvaluationReport:
    # Its own module, which builds on this one: imported when a checkpoint is scored.
    from transformer_lab.tasks import couplet_evaluation

    return couplet_evaluation.evaluate(checkpoint, split, options)


TASK = Task(
    name=TASK_NAME,
    presets={"default": default_config},
    train=train,
    load=load,
    prepare=_prepare,
    evaluate=_evaluate,
    evaluation_split="test",
    evaluation_options=frozenset({"--beam", "--length-penalty", "--beam-stop", *CONSTRAINT_OPTIONS}),
    surfaces=frozenset({"onnx", "ctranslate2", "serve", "lab"}),
    dataset="couplets",
)
