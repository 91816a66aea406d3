"""Translation data: Multi30k or the user's pair files, their tokenizers, the prepared corpus, the epoch batches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

from transformer_lab.data import Seq2SeqBatch, SubwordTokenizer, TokenizerPair, read_multi30k
from transformer_lab.data._checks import ANY_COUNT, CORPUS_FIELD_BOUNDS, check_int_fields
from transformer_lab.data.bpe_dropout import check_dropout
from transformer_lab.data.lazy_batches import epoch_pair_batches, pair_length_table
from transformer_lab.data.pair_files import check_language_code, check_pair_format
from transformer_lab.data.pair_stream import PairFiles
from transformer_lab.data.prepared_cache import RUN_ONLY_DATA_SETTINGS, CorpusKind, InputWatch
from transformer_lab.data.prepared_pairs import BpeSettings, PairCorpusSpec, PreparedPairs, pairs_kind
from transformer_lab.tasks.seq2seq import Seq2SeqData
from transformer_lab.training.run.once_per_machine import prepared_corpus


@dataclass(frozen=True)
class TranslationDataConfig:
    """Where the data is and how it becomes batches."""

    # The settings the user's files leave unused, each with what it is for (check_settings_used).
    UNUSED_WITH_TRAIN_FILES: ClassVar[dict[str, str]] = {"data_dir": "the folder of Multi30k"}
    UNUSED_WITH_VALID_FILES: ClassVar[dict[str, str]] = {
        "num_carved_validation": "how many training pairs to hold out for validation"
    }
    UNUSED_WITHOUT_TRAIN_FILES: ClassVar[dict[str, str]] = {
        "file_format": "the format of the training files",
        "num_carved_validation": "how many pairs of the training files to hold out for validation",
    }
    UNUSED_WITH_TOKENIZER_FILE: ClassVar[dict[str, str]] = {
        "vocab_size": "the size of the BPE to learn",
        "target_vocab_size": "the size of the target side's BPE to learn",
        "lowercase": "whether the BPE to learn lowercases",
        "min_frequency": "the fewest occurrences of a merge of the BPE to learn",
        "tokenizer_sample": "how many sentences the BPE is learned from",
    }
    # `prepare` refuses these by name (prepared_cache.RUN_ONLY_DATA_SETTINGS, and the task's own).
    UNUSED_BY_PREPARE: ClassVar[dict[str, str]] = {
        **RUN_ONLY_DATA_SETTINGS,
        "bpe_dropout": "the BPE dropout of the training pairs, drawn anew each epoch",
    }

    data_dir: str | None = None  # folder holding multi30k/ (None: $TRANSFORMER_LAB_DATA, else the download folder)
    # The user's own corpus instead of Multi30k: two aligned line files (SOURCE TARGET), or
    # one .tsv or .jsonl file (transformer_lab.data.pair_files); () = Multi30k from data_dir.
    train_files: tuple[str, ...] = ()
    # Validation pairs in the same forms; () with train_files = carve num_carved_validation
    # pairs (seeded) out of the training pairs.
    valid_files: tuple[str, ...] = ()
    file_format: str = ""  # "lines", "tsv" or "jsonl"; "" = from the number of files and the suffix
    num_carved_validation: int = 1000  # at most a tenth of the training pairs
    # The pair's languages: Multi30k's file suffixes, the user's JSON keys and TSV header,
    # and what the BLEU tokenizer follows (zh, ja: their own; else 13a).
    source_language: str = "de"
    target_language: str = "en"
    vocab_size: int = 8000  # joint byte-level BPE over both languages, specials included
    # One byte-level BPE per side instead of the joint one: for scripts that share nothing
    # (zh-en, ru-ja), where a joint vocabulary spends half its entries on the other side.
    # The source and target embeddings can then not be one matrix: tie_embeddings "all"
    # becomes "decoder". vocab_size is then the source side's size.
    separate_vocabularies: bool = False
    target_vocab_size: int = 0  # the target side's BPE size with separate_vocabularies (0 = vocab_size)
    # A tokenizer.json trained with Hugging Face tokenizers to use instead of training the
    # BPE (its first ids must be <pad> <unk> <bos> <eos>; see data.subword); "" = train one.
    # With target_tokenizer_file too, the two are the source and target sides' tokenizers.
    tokenizer_file: str = ""
    target_tokenizer_file: str = ""
    lowercase: bool = False  # keep case: BLEU is reported cased
    min_frequency: int = 2  # fewest occurrences for a BPE merge
    # The BPE of the user's files learns from at most this many training sentences, drawn
    # with the seed (0 = all): ~7 s on 2 cores, where all of a 10 M-pair corpus would take hours.
    tokenizer_sample: int = 300_000
    # A folder written by `transformer-lab prepare translation` to train from ("" = the
    # train_files, or Multi30k): its ids, tokenizer and validation pairs are used as they are.
    prepared_dir: str = ""
    # The folder the user's train_files are prepared once into and kept for reuse, itself
    # ("" = $TRANSFORMER_LAB_CACHE/prepared, else ~/.cache/transformer_lab/prepared).
    cache_dir: str = ""
    max_tokens: int = 4096  # padded tokens per batch (the longer of source/target)
    num_train: int = 0  # use only the first N training pairs (0 = all): quick runs and tests
    num_validation: int = 0  # use only the first N validation pairs (0 = all)
    seed: int = 1234  # shuffling of the batches
    # BPE dropout of the training pairs: each merged token split with this probability into the
    # two its merge joined, anew each epoch (data.bpe_dropout); 0 = every pair as encoded.
    bpe_dropout: float = 0.0

    def __post_init__(self) -> None:
        counts = dict.fromkeys(("num_carved_validation", "tokenizer_sample", "num_train", "num_validation"), ANY_COUNT)
        check_int_fields(self, "data", {**CORPUS_FIELD_BOUNDS, **counts})
        check_dropout("data.bpe_dropout", self.bpe_dropout)
        check_pair_format(self.file_format)
        for name in ("source_language", "target_language"):
            check_language_code(f"data.{name}", getattr(self, name))
        for name, files in (("train_files", self.train_files), ("valid_files", self.valid_files)):
            if files:  # checked here, where an error names the option or key that gave the files
                PairFiles.of(files, self.source_language, self.target_language, self.file_format, f"data.{name}")


TranslationData = Seq2SeqData[TokenizerPair]


def _first(pairs: list[tuple[str, str]], count: int) -> list[tuple[str, str]]:
    return pairs if count == 0 else pairs[:count]


def read_pairs(
    config: TranslationDataConfig,
) -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[dict[str, Any]]]:
    """(training pairs, validation pairs, the files' records) of Multi30k in ``data_dir``, in file order.

    The records (path, state, sha256 of each file) let a resume refuse files changed since.
    The user's files (``train_files``) are prepared instead, streamed: see `build_data`.
    """
    if config.valid_files:
        raise ValueError("data.valid_files: expected only with data.train_files (--train), got it without")
    languages = (config.source_language, config.target_language)
    # No setting skips an empty line here: its error advises fixing the file alone.
    train = read_multi30k("train", config.data_dir, *languages, skip_option=None)
    validation = read_multi30k("val", config.data_dir, *languages, skip_option=None)
    paths = [train.source_path, train.target_path, validation.source_path, validation.target_path]
    return train.pairs, validation.pairs, InputWatch(paths).records()


def build_tokenizers(config: TranslationDataConfig, train_pairs: Sequence[tuple[str, str]]) -> TokenizerPair:
    """The data config's tokenizers: the given tokenizer file(s), else BPE trained on the training pairs.

    One joint BPE over both sides by default; one per side with ``separate_vocabularies``
    (or two given files).
    """
    given = given_tokenizers(config)
    return given if given is not None else bpe_settings(config).learn(train_pairs)


def given_tokenizers(config: TranslationDataConfig) -> TokenizerPair | None:
    """The tokenizer file(s) the data config names, or None when the BPE is to be learned."""
    if config.target_tokenizer_file and not config.tokenizer_file:
        raise ValueError(
            "data.target_tokenizer_file: expected with data.tokenizer_file (the source side's), "
            f"got it alone ({config.target_tokenizer_file!r})"
        )
    if not config.tokenizer_file:
        return None
    source = _given_tokenizer("tokenizer_file", config.tokenizer_file)
    if not config.target_tokenizer_file:
        return TokenizerPair.joint(source)
    return TokenizerPair(source, _given_tokenizer("target_tokenizer_file", config.target_tokenizer_file))


def _given_tokenizer(field: str, path: str) -> SubwordTokenizer:
    """The tokenizer file ``data.<field>`` names; an error names the setting (the loader knows only a path)."""
    try:
        return SubwordTokenizer.load(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"data.{field}: expected an existing tokenizer JSON file, got {path!r}") from None
    except ValueError as error:
        raise ValueError(f"data.{field}: {error}") from None


def pair_corpus_spec(config: TranslationDataConfig) -> PairCorpusSpec:
    """What `prepare` reads for the user's files of ``config``: the files, their form, the split."""
    languages = (config.source_language, config.target_language)
    return PairCorpusSpec(
        train=PairFiles.of(config.train_files, *languages, config.file_format, name="--train"),
        valid=PairFiles.of(config.valid_files, *languages, config.file_format, name="--valid")
        if config.valid_files
        else None,
        num_carved_validation=config.num_carved_validation,
        seed=config.seed,
        num_train=config.num_train,
        num_validation=config.num_validation,
    )


def bpe_settings(config: TranslationDataConfig) -> BpeSettings:
    """How the BPE of the user's files is learned (see ``build_tokenizers``)."""
    return BpeSettings(
        vocab_size=config.vocab_size,
        target_vocab_size=config.target_vocab_size,
        separate_vocabularies=config.separate_vocabularies,
        lowercase=config.lowercase,
        min_frequency=config.min_frequency,
        sample=config.tokenizer_sample,
    )


def corpus_kind(
    config: TranslationDataConfig, tokenizers: TokenizerPair | None = None, progress: bool = True
) -> CorpusKind[PreparedPairs]:
    """The prepared corpus of the user's files of ``config`` (none: a folder prepared before, opened as it is).

    ``tokenizers`` (a resumed or fine-tuned run's) fix the ids; else the data config's
    tokenizer file(s), else a BPE learned from the training pairs.
    """
    if not config.train_files:
        return pairs_kind(None, tokenizers, data_config=config)
    given = tokenizers if tokenizers is not None else given_tokenizers(config)
    return pairs_kind(pair_corpus_spec(config), given, bpe_settings(config), progress=progress)


def build_data(
    config: TranslationDataConfig, tokenizers: SubwordTokenizer | TokenizerPair | None = None
) -> TranslationData:
    """The run's data: a prepared folder, the user's files (prepared once into the cache), or Multi30k.

    ``tokenizers``: as in `corpus_kind`.
    """
    given = TokenizerPair.of(tokenizers) if tokenizers is not None else None
    if config.prepared_dir and config.train_files:
        raise ValueError("data.prepared_dir: expected either a prepared folder or data.train_files (--train), got both")
    if config.prepared_dir or config.train_files:
        prepared = prepared_corpus(corpus_kind(config, given, progress=False), config.prepared_dir, config.cache_dir)
        validation = _first(prepared.validation_pairs, config.num_validation)
        return TranslationData(prepared.tokenizers, prepared.store, validation)
    train_pairs, validation_pairs, inputs = read_pairs(config)
    train_pairs = _first(train_pairs, config.num_train)
    validation_pairs = _first(validation_pairs, config.num_validation)
    pair = build_tokenizers(config, train_pairs) if given is None else given
    data = TranslationData.in_memory(pair, train_pairs, validation_pairs, pair.encode_pairs(train_pairs))
    data.inputs = inputs
    return data


def epoch_batches(data: TranslationData, config: TranslationDataConfig, epoch: int) -> Sequence[Seq2SeqBatch]:
    """Length-bucketed token-budget batches of one epoch, shuffled by (seed, epoch), collated when read."""
    lengths = pair_length_table(data.train_store)
    return epoch_pair_batches(data.train_store, lengths, config.max_tokens, config.seed, epoch)
