"""German -> English translation on Multi30k (task 1): data, model, training, translation, BLEU.

Thin glue over ``data`` (reader, byte-level BPE, token-budget batches), ``models``
(Seq2SeqTransformer with one joint vocabulary and tied embeddings), ``training`` (Trainer)
and ``decoding`` (beam search). The tokenizer is trained on the training split only and
saved inside every checkpoint as ``tokenizer.json``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch

from transformer_lab.data import Seq2SeqBatch, SubwordTokenizer, TokenizerPair, load_multi30k
from transformer_lab.data._checks import ANY_COUNT, MAX_BATCH_TOKENS, SEED_RANGE, check_int_fields
from transformer_lab.data.pair_files import read_pair_files
from transformer_lab.data.pair_stream import PairFiles
from transformer_lab.data.prepared_pairs import (
    BpeSettings,
    PairCorpusSpec,
    PreparedPairs,
    cache_folder,
    carved_positions,
    corpus_identity,
    open_prepared_pairs,
    prepare_pairs,
    prepared_pairs,
)
from transformer_lab.data.tokenizer_pair import JOINT_TOKENIZER_FILE, SOURCE_TOKENIZER_FILE, TARGET_TOKENIZER_FILE
from transformer_lab.decoding import DecodeConfig
from transformer_lab.evaluation import BleuResult, bleu_tokenizer_for, corpus_bleu, corpus_chrf
from transformer_lab.models import ModelConfig, Seq2SeqTransformer
from transformer_lab.tasks import seq2seq
from transformer_lab.tasks.evaluation import EvaluationOptions, EvaluationReport
from transformer_lab.tasks.loading import read_tokenizer
from transformer_lab.tasks.seq2seq import (
    Candidate,
    Seq2SeqData,
    Seq2SeqTask,
    bucketed_epoch_batches,
    check_fits_positional_table,
    validation_loss,
)
from transformer_lab.tasks.task import Task
from transformer_lab.training import TrainConfig
from transformer_lab.training.run.once_per_machine import prepared_once_per_machine

logger = logging.getLogger(__name__)

TASK_NAME = "translation"
TOKENIZER_FILE = JOINT_TOKENIZER_FILE


@dataclass(frozen=True)
class TranslationDataConfig:
    """Where the data is and how it becomes batches."""

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
    # Where the user's train_files are prepared once and kept for reuse ("" = the folder
    # $TRANSFORMER_LAB_CACHE names, else ~/.cache/transformer_lab).
    cache_dir: str = ""
    max_tokens: int = 4096  # padded tokens per batch (the longer of source/target)
    num_train: int = 0  # use only the first N training pairs (0 = all): quick runs and tests
    num_validation: int = 0  # use only the first N validation pairs (0 = all)
    seed: int = 1234  # shuffling of the batches

    def __post_init__(self) -> None:
        check_int_fields(
            self,
            "data",
            {
                "max_tokens": (1, MAX_BATCH_TOKENS),
                "min_frequency": (1, ANY_COUNT[1]),
                "seed": SEED_RANGE,
                **dict.fromkeys(
                    ("num_carved_validation", "tokenizer_sample", "num_train", "num_validation"), ANY_COUNT
                ),
            },
        )


def _default_model() -> ModelConfig:
    return ModelConfig(
        d_model=256,
        nhead=4,
        num_encoder_layers=3,
        num_decoder_layers=3,
        dim_feedforward=1024,
        dropout=0.2,
        max_len=256,
        tie_embeddings="all",
    )


def _default_train() -> TrainConfig:
    return TrainConfig(
        **seq2seq.SEQ2SEQ_TRAIN_PRESET,
        # About 116 batches of 4,096 tokens per epoch: 34 epochs are ~3,900 steps, so the
        # 800-step warm-up is short. After 20 epochs validation BLEU was still rising; 34
        # epochs took 76 minutes on 2 threads of a Zen 4 EPYC in bf16. On an AVX2-only CPU
        # (Zen 3 EPYC, fp32) they take longer than two hours: README "Precision and threads"
        # and docs/results.md#translation-avx2 give the shorter schedule.
        epochs=34,
        # The last ~7 epochs decay the rate linearly: validation BLEU (greedy) after epochs
        # 28-31 went 41.1 41.6 41.6 41.8 with it, 41.2 41.4 40.9 40.7 without
        # (docs/experiments/2026-11-translation.md).
        cooldown_steps=800,
        keep_last=10,  # the last 10 epoch checkpoints, for checkpoint averaging
    )


def _default_decode() -> DecodeConfig:
    # Length penalty chosen on validation (beam 5, the cool-down run's best checkpoint):
    # alpha 0.3 / 0.6 / 1.0 / 1.2 / 1.4 / 1.6 / 1.8 gave 42.66 / 42.86 / 43.17 / 43.31 /
    # 43.43 / 43.21 / 42.37 cased BLEU.
    return DecodeConfig(
        strategy="beam", beam_size=5, max_len=200, max_len_a=1.5, max_len_b=10, length_penalty=1.4, precision="auto"
    )


@dataclass
class TranslationConfig:
    """Everything a translation run needs; written into every checkpoint."""

    data: TranslationDataConfig = field(default_factory=TranslationDataConfig)
    model: ModelConfig = field(default_factory=_default_model)
    train: TrainConfig = field(default_factory=_default_train)
    decode: DecodeConfig = field(default_factory=_default_decode)


def default_config() -> TranslationConfig:
    return TranslationConfig()


def base_config() -> TranslationConfig:
    """The paper's base model and recipe, for a large corpus (WMT14 en-de) on GPUs.

    d_model 512, 8 heads, 6 + 6 layers, feed-forward 2,048, dropout 0.1, one shared 37k
    BPE; Adam (0.9, 0.98, 1e-9) with the paper's schedule (factor 1, 4,000 warm-up steps)
    for 100k steps of about 25k target tokens: 4,096 per batch x 6 accumulated batches on
    one process (on N GPUs under torchrun, ``train.grad_accum_steps`` = 6 / N). Beam 4,
    length penalty 0.6, at most 50 tokens beyond the source, as in the paper.
    """
    return TranslationConfig(
        data=TranslationDataConfig(vocab_size=37_000, max_tokens=4096, num_carved_validation=3000),
        model=ModelConfig(
            d_model=512,
            nhead=8,
            num_encoder_layers=6,
            num_decoder_layers=6,
            dim_feedforward=2048,
            dropout=0.1,
            max_len=256,
            tie_embeddings="all",
        ),
        train=TrainConfig(
            lr_factor=1.0,
            warmup_steps=4000,
            label_smoothing=0.1,
            grad_accum_steps=6,
            epochs=0,
            max_steps=100_000,
            precision="auto",
            eval_every_steps=5000,
            keep_last=5,  # the last five checkpoints, for averaging (transformer-lab average)
            best_metric="val_bleu",
            best_mode="max",
            log_every_steps=100,
        ),
        decode=DecodeConfig(
            strategy="beam", beam_size=4, max_len=256, max_len_a=1.0, max_len_b=50, length_penalty=0.6, precision="auto"
        ),
    )


# The presets `train translation --preset NAME` starts from (then --set overrides them).
PRESETS = {"default": default_config, "base": base_config}


TranslationData = Seq2SeqData[TokenizerPair]


def _first(pairs: list[tuple[str, str]], count: int) -> list[tuple[str, str]]:
    return pairs if count == 0 else pairs[:count]


def read_pairs(config: TranslationDataConfig) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(training pairs, validation pairs): the user's files when ``train_files`` is set, else Multi30k's."""
    languages = (config.source_language, config.target_language)
    if not config.train_files:
        if config.valid_files:
            raise ValueError("data.valid_files: expected only with data.train_files (--train), got it without")
        source_language, target_language = languages
        return (
            load_multi30k("train", config.data_dir, source_language=source_language, target_language=target_language),
            load_multi30k("val", config.data_dir, source_language=source_language, target_language=target_language),
        )
    train_pairs = read_pair_files(config.train_files, *languages, config.file_format, name="--train").pairs
    if config.valid_files:
        return train_pairs, read_pair_files(config.valid_files, *languages, config.file_format, name="--valid").pairs
    return carve_validation(train_pairs, config.num_carved_validation, config.seed)


def carve_validation(
    pairs: list[tuple[str, str]], count: int, seed: int
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(training, validation): ``min(count, len // 10)`` pairs drawn with ``seed``, both in file order."""
    chosen = carved_positions(len(pairs), count, seed)
    return (
        [pair for index, pair in enumerate(pairs) if index not in chosen],
        [pair for index, pair in enumerate(pairs) if index in chosen],
    )


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
    source = SubwordTokenizer.load(config.tokenizer_file)
    if not config.target_tokenizer_file:
        return TokenizerPair.joint(source)
    return TokenizerPair(source, SubwordTokenizer.load(config.target_tokenizer_file))


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


def prepare_corpus(
    config: TranslationDataConfig,
    out_dir: str | os.PathLike[str],
    tokenizers: SubwordTokenizer | TokenizerPair | None = None,
    progress: bool = True,
) -> PreparedPairs:
    """Prepare the user's files of ``config`` into the new folder ``out_dir`` (``transformer-lab prepare``)."""
    if not config.train_files:
        raise ValueError("data.train_files: expected the files to prepare (--train), got none")
    given = TokenizerPair.of(tokenizers) if tokenizers is not None else given_tokenizers(config)
    return prepare_pairs(pair_corpus_spec(config), out_dir, given, bpe_settings(config), progress=progress)


def _from_prepared(prepared: PreparedPairs, num_validation: int) -> TranslationData:
    """The run's data from a prepared corpus whose ids its identity check has accepted."""
    counts = prepared.report
    logger.info(
        "training on the prepared corpus %s: %d training pairs, %d validation pairs",
        prepared.folder,
        counts["train_pairs"],
        counts["validation_pairs"],
    )
    validation = _first(prepared.validation_pairs, num_validation)
    return TranslationData(prepared.tokenizers, prepared.store, validation)


def build_data(
    config: TranslationDataConfig, tokenizers: SubwordTokenizer | TokenizerPair | None = None
) -> TranslationData:
    """The run's data: a prepared folder, the user's files (prepared once into the cache), or Multi30k.

    ``tokenizers`` (a resumed or fine-tuned run's) fix the ids; else the data config's
    tokenizer file(s), else a BPE learned from the training pairs.
    """
    given = TokenizerPair.of(tokenizers) if tokenizers is not None else None
    if config.prepared_dir:
        if config.train_files:
            raise ValueError(
                "data.prepared_dir: expected either a prepared folder or data.train_files (--train), got both"
            )
        prepared = open_prepared_pairs(config.prepared_dir)
        corpus_identity(given).check_prepared(prepared.folder, prepared.manifest)
        return _from_prepared(prepared, config.num_validation)
    if config.train_files:
        given = given if given is not None else given_tokenizers(config)
        spec, cache_root = pair_corpus_spec(config), config.cache_dir or None
        folder = cache_folder(spec, cache_root)
        # Under torchrun one process of each machine prepares; the others map its files.
        prepared = prepared_once_per_machine(
            folder,
            lambda: prepared_pairs(spec, given, bpe_settings(config), cache_root, progress=False),
            open_prepared_pairs,
        )
        return _from_prepared(prepared, config.num_validation)
    train_pairs, validation_pairs = read_pairs(config)
    train_pairs = _first(train_pairs, config.num_train)
    validation_pairs = _first(validation_pairs, config.num_validation)
    pair = build_tokenizers(config, train_pairs) if given is None else given
    return TranslationData.in_memory(pair, train_pairs, validation_pairs, pair.encode_pairs(train_pairs))


def epoch_batches(
    data: TranslationData, config: TranslationDataConfig, epoch: int, num_shards: int = 1, shard_index: int = 0
) -> Sequence[Seq2SeqBatch]:
    """Length-bucketed token-budget batches of one epoch, shuffled by (seed, epoch), collated when read.

    With ``num_shards`` > 1, the share of process ``shard_index`` (see ``token_budget_batches``).
    """
    return bucketed_epoch_batches(data, config.max_tokens, config.seed, epoch, num_shards, shard_index)


def _encode_sources(tokenizer: SubwordTokenizer, sentences: Sequence[str], name: str) -> list[list[int]]:
    """The subword ids of each sentence ([] for a blank one); a failure names the sentence's index."""
    encoded = []
    for index, sentence in enumerate(sentences):
        try:
            encoded.append(tokenizer.encode(sentence) if sentence.strip() else [])
        except ValueError as error:
            raise ValueError(f"{name}[{index}]: {error}") from None
    return encoded


def translate_sentences(
    model: Seq2SeqTransformer,
    tokenizer: SubwordTokenizer | TokenizerPair,
    sentences: Sequence[str],
    decode_config: DecodeConfig,
    batch_size: int = 64,
) -> list[str]:
    """Translate ``sentences`` (batched by length); an empty or blank sentence gives ``""``.

    ``tokenizer`` is the checkpoint's pair, or one joint tokenizer. A sentence whose
    subword length exceeds the model's positional table raises ``ValueError`` naming its
    index and length; nothing is truncated.
    """
    tokenizers = TokenizerPair.of(tokenizer)
    encoded = _encode_sources(tokenizers.source, sentences, "sentences")
    seq2seq.check_source_lengths(model, encoded, "sentences", "subword tokens")
    found = seq2seq.decode_sources(model, encoded, decode_config, batch_size=batch_size)
    return [
        seq2seq.candidates_of(hypotheses[:1], tokenizers.target.decode)[0].text if hypotheses else ""
        for hypotheses in found
    ]


def translate_nbest(
    model: Seq2SeqTransformer,
    tokenizer: SubwordTokenizer | TokenizerPair,
    sentence: str,
    decode_config: DecodeConfig,
) -> list[Candidate]:
    """The n-best translations of one sentence, best first.

    Beam search returns ``decode_config.num_return`` candidates (at most ``beam_size``);
    greedy search returns one. A blank sentence or one longer than the positional table
    is a ``ValueError``.
    """
    if not sentence.strip():
        raise ValueError("sentence: expected a non-empty sentence to translate, got a blank one")
    tokenizers = TokenizerPair.of(tokenizer)
    source_ids = tokenizers.source.encode(sentence)
    seq2seq.check_source_length(model, source_ids, "sentence", "subword tokens")
    (hypotheses,) = seq2seq.decode_sources(model, [source_ids], decode_config)
    return seq2seq.candidates_of(hypotheses, tokenizers.target.decode)


@dataclass
class BleuReport:
    cased: BleuResult
    lowercased: BleuResult
    chrf: BleuResult  # chrF++
    hypotheses: list[str]


def evaluate_bleu(
    model: Seq2SeqTransformer,
    tokenizer: SubwordTokenizer | TokenizerPair,
    pairs: Sequence[tuple[str, str]],
    decode_config: DecodeConfig,
    bleu_tokenize: str = "13a",
) -> BleuReport:
    """Translate the sources of ``pairs`` and score them against the targets: BLEU (cased, lowercased), chrF++.

    ``bleu_tokenize`` is sacreBLEU's tokenizer; ``bleu_tokenizer_for(target_language)`` picks
    the one for the target language.
    """
    hypotheses = translate_sentences(model, tokenizer, [source for source, _ in pairs], decode_config)
    references = [target for _, target in pairs]
    return BleuReport(
        cased=corpus_bleu(hypotheses, references, tokenize=bleu_tokenize),
        lowercased=corpus_bleu(hypotheses, references, lowercase=True, tokenize=bleu_tokenize),
        chrf=corpus_chrf(hypotheses, references),
        hypotheses=hypotheses,
    )


def _read_tokenizers(folder: Path) -> TokenizerPair:
    """A checkpoint's tokenizers: its tokenizer.json (joint), or its source_ and target_tokenizer.json."""
    if (folder / SOURCE_TOKENIZER_FILE).is_file() or (folder / TARGET_TOKENIZER_FILE).is_file():
        return TokenizerPair(
            read_tokenizer(folder, SOURCE_TOKENIZER_FILE), read_tokenizer(folder, TARGET_TOKENIZER_FILE)
        )
    return TokenizerPair.joint(read_tokenizer(folder, JOINT_TOKENIZER_FILE))


SEQ2SEQ_TASK: Seq2SeqTask[TokenizerPair, TranslationConfig] = Seq2SeqTask(
    name=TASK_NAME,
    config_type=TranslationConfig,
    read_vocabulary=_read_tokenizers,
    vocabulary_files=TokenizerPair.files,
    vocabulary_sizes=lambda pair: (pair.source.vocab_size, pair.target.vocab_size),
    # The preset's Multi30k; its languages come from the config (data.source_language, ...).
    card={"hub_task": "translation", "dataset": "multi30k"},
)
TrainResult = seq2seq.TrainResult


def train(
    config: TranslationConfig,
    out_dir: str | os.PathLike[str],
    *,
    resume: bool = False,
    init_from: str | os.PathLike[str] | None = None,
) -> seq2seq.TrainResult[TokenizerPair, TranslationConfig]:
    """Train a translation model; validation BLEU (greedy) every epoch decides ``best/``.

    ``init_from`` fine-tunes: the checkpoint's tokenizer and weights are the start (its
    model config must already be ``config.model``, see ``tasks.finetune``).
    """
    data = build_data(config.data, seq2seq.starting_vocabulary(SEQ2SEQ_TASK, Path(out_dir), resume, init_from))
    tokenizers = data.vocabulary
    target_size = None if tokenizers.is_joint else tokenizers.target.vocab_size
    config = seq2seq.with_vocabulary(config, tokenizers.source.vocab_size, target_size)
    greedy = dataclasses.replace(config.decode, strategy="greedy")
    bleu_tokenize = bleu_tokenizer_for(config.data.target_language)
    validation_ids = tokenizers.encode_pairs(data.validation_pairs)
    check_fits_positional_table(validation_ids, data.validation_pairs, config.model.max_len, "validation data")

    def evaluate(evaluated_model: torch.nn.Module) -> dict[str, float]:
        # The trainer hands back the model it was given (unwrapped from DDP).
        assert isinstance(evaluated_model, Seq2SeqTransformer), type(evaluated_model)
        report = evaluate_bleu(evaluated_model, data.vocabulary, data.validation_pairs, greedy, bleu_tokenize)
        return {
            "val_bleu": report.cased.score,
            "val_bleu_lowercased": report.lowercased.score,
            "val_chrf": report.chrf.score,
            "val_loss": validation_loss(evaluated_model, validation_ids, config.data.max_tokens),
        }

    return seq2seq.train(SEQ2SEQ_TASK, config, data, out_dir, evaluate, resume=resume, init_from=init_from)


def load_translator(checkpoint: str | os.PathLike[str]) -> tuple[Seq2SeqTransformer, TokenizerPair, TranslationConfig]:
    """Rebuild the model, tokenizers and config of a translation checkpoint folder (or a run folder's best/)."""
    return seq2seq.load(SEQ2SEQ_TASK, checkpoint)


def _prepare(data: TranslationDataConfig, out_dir: Path, progress: bool) -> dict[str, Any]:
    prepared = prepare_corpus(data, out_dir, progress=progress)
    return {**prepared.report, "seconds": prepared.manifest["seconds"]}


def _evaluate(checkpoint: Path, split: str | None, options: EvaluationOptions) -> EvaluationReport:
    # Its own module, which builds on this one: imported when a checkpoint is scored.
    from transformer_lab.tasks import translation_evaluation

    return translation_evaluation.evaluate(checkpoint, split, options)


TASK = Task(
    name=TASK_NAME,
    presets=PRESETS,
    train=train,
    load=load_translator,
    prepare=_prepare,
    evaluate=_evaluate,
    evaluation_split="test_2016_flickr",
    evaluation_options=frozenset(
        {"--beam", "--length-penalty", "--beam-stop", "--source", "--reference", "--bleu-tokenize", "--bleu-flavour"}
    ),
    surfaces=frozenset({"onnx", "ctranslate2", "serve", "lab"}),
    dataset="multi30k",
)
