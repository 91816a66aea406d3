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
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch

from transformer_lab.data import (
    PAD_ID,
    BOS_ID,
    EOS_ID,
    Seq2SeqBatch,
    SubwordTokenizer,
    collated_lengths,
    encode_pairs,
    load_multi30k,
    padding_fraction,
    token_budget_batches,
)
from transformer_lab.data.pair_files import read_pair_files
from transformer_lab.decoding import BeamOutput, DecodeConfig, decode, gnmt_length_penalty
from transformer_lab.evaluation import BleuResult, bleu_tokenizer_for, corpus_bleu, corpus_chrf
from transformer_lab.models import ModelConfig, Seq2SeqTransformer
from transformer_lab.tasks.finetune import load_initial_weights
from transformer_lab.tasks.seq2seq_glue import (
    bucketed_epoch_batches,
    check_fits_positional_table,
    seq2seq_loss_fn,
    strip_generated,
    validation_loss,
    within_positional_table,
)
from transformer_lab.training import (
    CONFIG_FILE,
    TrainConfig,
    Trainer,
    config_to_dict,
    data_shard,
    load_task_config,
    load_model_weights,
    read_extra_file,
)
from transformer_lab.training.checkpoint import resolve_checkpoint

logger = logging.getLogger(__name__)

TASK_NAME = "translation"
TOKENIZER_FILE = "tokenizer.json"


@dataclass(frozen=True)
class TranslationDataConfig:
    """Where the data is and how it becomes batches."""

    data_dir: str | None = None  # folder holding multi30k/ (None: $TRANSFORMER_LAB_DATA)
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
    # A tokenizer.json trained with Hugging Face tokenizers to use instead of training the
    # BPE (its first ids must be <pad> <unk> <bos> <eos>; see data.subword); "" = train one.
    tokenizer_file: str = ""
    lowercase: bool = False  # keep case: BLEU is reported cased
    min_frequency: int = 2  # fewest occurrences for a BPE merge
    max_tokens: int = 4096  # padded tokens per batch (the longer of source/target)
    num_train: int = 0  # use only the first N training pairs (0 = all): quick runs and tests
    num_validation: int = 0  # use only the first N validation pairs (0 = all)
    seed: int = 1234  # shuffling of the batches


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
        # About 116 batches of 4,096 tokens per epoch: 34 epochs are ~3,900 steps, so the
        # warm-up is short and the peak rate 0.5 * 256^-0.5 * 800^-0.5 = 1.1e-3. After 20
        # epochs validation BLEU was still rising; 34 epochs took 76 minutes on 2 threads of a
        # Zen 4 EPYC in bf16. On an AVX2-only CPU (Zen 3 EPYC, fp32) they take longer than two
        # hours: README "Precision and threads" and docs/results.md give the shorter schedule.
        epochs=34,
        lr_factor=0.5,
        warmup_steps=800,
        # The last ~7 epochs decay the rate linearly: validation BLEU (greedy) after epochs
        # 28-31 went 41.1 41.6 41.6 41.8 with it, 41.2 41.4 40.9 40.7 without (docs/results.md).
        cooldown_steps=800,
        label_smoothing=0.1,
        # bf16 autocast where the CPU (or GPU) runs it fast, else fp32 (transformer_lab.hardware).
        precision="auto",
        eval_every_steps=0,  # evaluate (validation BLEU) and checkpoint at each epoch end
        keep_last=10,  # the last 10 epoch checkpoints, for checkpoint averaging
        best_metric="val_bleu",
        best_mode="max",
        log_every_steps=20,
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


def with_vocabulary(config: TranslationConfig, tokenizer: SubwordTokenizer) -> TranslationConfig:
    """The model's vocabulary fields follow the tokenizer."""
    model = dataclasses.replace(
        config.model,
        src_vocab_size=tokenizer.vocab_size,
        tgt_vocab_size=tokenizer.vocab_size,
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
    )
    return dataclasses.replace(config, model=model)


@dataclass
class TranslationData:
    tokenizer: SubwordTokenizer
    train_pairs: list[tuple[str, str]]
    validation_pairs: list[tuple[str, str]]
    train_ids: list[tuple[list[int], list[int]]]


def _first(pairs: list[tuple[str, str]], count: int) -> list[tuple[str, str]]:
    return pairs if count == 0 else pairs[:count]


def read_pairs(config: TranslationDataConfig) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(training pairs, validation pairs): the user's files when ``train_files`` is set, else Multi30k's."""
    languages = (config.source_language, config.target_language)
    if not config.train_files:
        if config.valid_files:
            raise ValueError("data.valid_files: expected only with data.train_files (--train), got it without")
        keywords = dict(source_language=languages[0], target_language=languages[1])
        return load_multi30k("train", config.data_dir, **keywords), load_multi30k("val", config.data_dir, **keywords)
    train_pairs = read_pair_files(config.train_files, *languages, config.file_format, name="--train").pairs
    if config.valid_files:
        return train_pairs, read_pair_files(config.valid_files, *languages, config.file_format, name="--valid").pairs
    return carve_validation(train_pairs, config.num_carved_validation, config.seed)


def carve_validation(
    pairs: list[tuple[str, str]], count: int, seed: int
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(training, validation): ``min(count, len // 10)`` pairs drawn with ``seed``, both in file order."""
    held = min(count, len(pairs) // 10)
    if held < 1:
        raise ValueError(
            f"--valid: expected validation files, or at least 10 training pairs to carve validation from, "
            f"got {len(pairs)} training pair(s) and no --valid"
        )
    chosen = set(random.Random(seed).sample(range(len(pairs)), held))
    logger.info("no --valid given: %d of the %d training pairs are held out for validation (seed %d)", held, len(pairs), seed)
    return (
        [pair for index, pair in enumerate(pairs) if index not in chosen],
        [pair for index, pair in enumerate(pairs) if index in chosen],
    )


def build_data(config: TranslationDataConfig, tokenizer: SubwordTokenizer | None = None) -> TranslationData:
    """Read train/val, train the BPE on the training split (unless given), encode the training pairs."""
    train_pairs, validation_pairs = read_pairs(config)
    train_pairs = _first(train_pairs, config.num_train)
    validation_pairs = _first(validation_pairs, config.num_validation)
    if tokenizer is None and config.tokenizer_file:
        tokenizer = SubwordTokenizer.load(config.tokenizer_file)
    if tokenizer is None:
        tokenizer = SubwordTokenizer.train_from_pairs(
            train_pairs, vocab_size=config.vocab_size, lowercase=config.lowercase, min_frequency=config.min_frequency
        )
    return TranslationData(tokenizer, train_pairs, validation_pairs, encode_pairs(train_pairs, tokenizer))


def epoch_batches(
    data: TranslationData, config: TranslationDataConfig, epoch: int, num_shards: int = 1, shard_index: int = 0
) -> list[Seq2SeqBatch]:
    """Length-bucketed token-budget batches of one epoch, shuffled by (seed, epoch).

    With ``num_shards`` > 1, the share of process ``shard_index`` (see ``token_budget_batches``).
    """
    return bucketed_epoch_batches(data.train_ids, config.max_tokens, config.seed, epoch, num_shards, shard_index)


def _check_source_length(model: Seq2SeqTransformer, name: str, ids: Sequence[int]) -> None:
    """Refuse a source longer than the positional table (nothing is truncated)."""
    max_source = model.positional_encoding.max_len
    if len(ids) > max_source:
        raise ValueError(f"{name} must be at most {max_source} subword tokens (the model's max_len), got {len(ids)}")


def translate_sentences(
    model: Seq2SeqTransformer,
    tokenizer: SubwordTokenizer,
    sentences: Sequence[str],
    decode_config: DecodeConfig,
    batch_size: int = 64,
) -> list[str]:
    """Translate ``sentences`` (batched by length); an empty or blank sentence gives ``""``.

    A sentence whose subword length exceeds the model's positional table raises
    ``ValueError`` naming its index and length; nothing is truncated.
    """
    model.eval()
    device = next(model.parameters()).device
    encoded = []
    for index, sentence in enumerate(sentences):
        try:
            encoded.append(tokenizer.encode(sentence) if sentence.strip() else [])
        except ValueError as error:
            raise ValueError(f"sentences[{index}]: {error}") from None
    for index, ids in enumerate(encoded):
        _check_source_length(model, f"sentences[{index}]", ids)
    translations = [""] * len(sentences)
    order = sorted((index for index, ids in enumerate(encoded) if ids), key=lambda index: len(encoded[index]))
    bounded_config = within_positional_table(model, decode_config)
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            longest = max(len(encoded[index]) for index in chunk)
            src_ids = torch.full((len(chunk), longest), PAD_ID, dtype=torch.long)
            for row, index in enumerate(chunk):
                src_ids[row, : len(encoded[index])] = torch.tensor(encoded[index])
            result = decode(model, src_ids.to(device), bounded_config)
            rows = result.ids if decode_config.strategy == "greedy" else result.best_ids
            for row, index in zip(rows, chunk):
                translations[index] = tokenizer.decode(strip_generated(row, EOS_ID, PAD_ID))
    return translations


@dataclass(frozen=True)
class Candidate:
    """One translation of an n-best list.

    ``ids`` are the generated subword ids without ``<bos>``/``<eos>``; ``log_prob`` is the
    sum of the token log-probabilities (``<eos>`` included) and ``score`` that sum divided
    by the GNMT length penalty, the number beam search ranks by (greedy reports it too).
    """

    text: str
    ids: list[int]
    score: float
    log_prob: float


def translate_nbest(
    model: Seq2SeqTransformer,
    tokenizer: SubwordTokenizer,
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
    model.eval()
    device = next(model.parameters()).device
    source_ids = tokenizer.encode(sentence)
    _check_source_length(model, "sentence", source_ids)
    src_ids = torch.tensor([source_ids], dtype=torch.long, device=device)  # [1, S]
    config = within_positional_table(model, decode_config)
    with torch.no_grad():
        result = decode(model, src_ids, config)
    if isinstance(result, BeamOutput):
        found = [(hypothesis.ids, hypothesis.score, hypothesis.log_prob) for hypothesis in result.hypotheses[0]]
    else:
        generated = int(result.lengths[0])
        log_prob = float(result.scores[0])
        found = [(result.ids[0, :generated].tolist(), log_prob / gnmt_length_penalty(generated, config.length_penalty), log_prob)]
    candidates = []
    for ids, score, log_prob in found:
        kept = strip_generated(ids, EOS_ID, PAD_ID)
        candidates.append(Candidate(text=tokenizer.decode(kept), ids=kept, score=score, log_prob=log_prob))
    return candidates


@dataclass
class BleuReport:
    cased: BleuResult
    lowercased: BleuResult
    chrf: BleuResult  # chrF++
    hypotheses: list[str]


def evaluate_bleu(
    model: Seq2SeqTransformer,
    tokenizer: SubwordTokenizer,
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


@dataclass
class TrainResult:
    model: Seq2SeqTransformer
    tokenizer: SubwordTokenizer
    config: TranslationConfig
    summary: dict[str, Any]


def train(
    config: TranslationConfig,
    out_dir: str | os.PathLike[str],
    *,
    resume: bool = False,
    init_from: str | os.PathLike[str] | None = None,
) -> TrainResult:
    """Train a translation model; validation BLEU (greedy) every epoch decides ``best/``.

    ``init_from`` fine-tunes: the checkpoint's tokenizer and weights are the start (its
    model config must already be ``config.model``, see ``tasks.finetune``).
    """
    out_dir = Path(out_dir)
    tokenizer = None
    if resume:
        tokenizer = SubwordTokenizer.from_json(read_extra_file(out_dir / "last", TOKENIZER_FILE).decode("utf-8"))
    elif init_from is not None:
        tokenizer = _load_tokenizer(init_from)
    data = build_data(config.data, tokenizer)
    config = with_vocabulary(config, data.tokenizer)
    check_fits_positional_table(data.train_ids, data.train_pairs, config.model.max_len, "training data")
    lengths = collated_lengths(data.train_ids)
    first_epoch = token_budget_batches(lengths, config.data.max_tokens, shuffle=True, seed=config.data.seed, epoch=0)
    logger.info(
        "%d training pairs, vocabulary %d, %d batches per epoch, padding %.1f%%",
        len(data.train_pairs), data.tokenizer.vocab_size, len(first_epoch), 100 * padding_fraction(first_epoch, lengths),
    )
    torch.manual_seed(config.train.seed)
    model = Seq2SeqTransformer.from_config(config.model)
    metadata = load_initial_weights(model, init_from, resume)
    greedy = dataclasses.replace(config.decode, strategy="greedy")
    bleu_tokenize = bleu_tokenizer_for(config.data.target_language)
    validation_ids = encode_pairs(data.validation_pairs, data.tokenizer)
    check_fits_positional_table(validation_ids, data.validation_pairs, config.model.max_len, "validation data")

    def evaluate(evaluated_model: torch.nn.Module) -> dict[str, float]:
        report = evaluate_bleu(evaluated_model, data.tokenizer, data.validation_pairs, greedy, bleu_tokenize)
        return {
            "val_bleu": report.cased.score,
            "val_bleu_lowercased": report.lowercased.score,
            "val_chrf": report.chrf.score,
            "val_loss": validation_loss(evaluated_model, validation_ids, config.data.max_tokens),
        }

    trainer = Trainer(
        model,
        config.train,
        out_dir,
        loss_fn=seq2seq_loss_fn(config.train.label_smoothing, PAD_ID),
        # Under torchrun each rank trains on its own shard of the epoch.
        train_batches=lambda epoch: epoch_batches(data, config.data, epoch, *data_shard()),
        d_model=config.model.d_model,
        evaluate_fn=evaluate,
        count_tokens=lambda batch: batch.num_target_tokens,
        checkpoint_config={"task": TASK_NAME, **metadata, **config_to_dict(config)},
        extra_files={TOKENIZER_FILE: data.tokenizer.to_json()},
        resume=resume,
    )
    summary = trainer.fit()
    return TrainResult(model=model, tokenizer=data.tokenizer, config=config, summary=summary)


def _load_tokenizer(checkpoint: str | os.PathLike[str]) -> SubwordTokenizer:
    """The tokenizer stored in a checkpoint; a damaged file is an error naming it."""
    tokenizer_path = Path(checkpoint) / TOKENIZER_FILE
    try:
        return SubwordTokenizer.from_json(read_extra_file(checkpoint, TOKENIZER_FILE).decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ValueError(f"{tokenizer_path}: expected UTF-8 JSON, got invalid bytes at byte {error.start}") from None
    except ValueError as error:
        raise ValueError(f"{tokenizer_path}: {error}") from None


def load_translator(checkpoint: str | os.PathLike[str]) -> tuple[Seq2SeqTransformer, SubwordTokenizer, TranslationConfig]:
    """Rebuild the model, tokenizer and config of a translation checkpoint folder (or a run folder's best/)."""
    checkpoint = resolve_checkpoint(checkpoint)
    config = load_task_config(checkpoint, TASK_NAME, TranslationConfig)
    config_path = Path(checkpoint) / CONFIG_FILE
    try:
        model = Seq2SeqTransformer.from_config(config.model)
    except ValueError as error:
        # The messages name the key (model.nhead); the user also needs to know which file.
        raise ValueError(f"{config_path}: {error}") from None
    tokenizer_path = Path(checkpoint) / TOKENIZER_FILE
    tokenizer = _load_tokenizer(checkpoint)
    if tokenizer.vocab_size != config.model.src_vocab_size:
        raise ValueError(
            f"{config_path}: model.src_vocab_size must equal the {tokenizer.vocab_size} entries of "
            f"{tokenizer_path}, got {config.model.src_vocab_size}"
        )
    load_model_weights(checkpoint, model)
    return model.eval(), tokenizer, config
