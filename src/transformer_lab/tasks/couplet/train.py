"""The couplet preset and config, the training run, and loading the checkpoints it writes."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from transformer_lab.data import Vocabulary, chinese
from transformer_lab.data.couplet import check_upper_line
from transformer_lab.decoding import DecodeConfig
from transformer_lab.decoding.couplet_constraints import CoupletConstraintConfig
from transformer_lab.evaluation.bleu import corpus_bleu
from transformer_lab.evaluation.couplet_metrics import level_tone_ending_rate
from transformer_lab.models import ModelConfig, Seq2SeqTransformer
from transformer_lab.tasks import seq2seq
from transformer_lab.tasks.couplet.data import CoupletDataConfig, build_data
from transformer_lab.tasks.couplet.predict import answer_pairs
from transformer_lab.tasks.seq2seq import Seq2SeqTask
from transformer_lab.tasks.task import VocabularyFunctions
from transformer_lab.training import TrainConfig

TASK_NAME = "couplet"
VOCABULARY_FILE = "vocabulary.txt"


def _default_model() -> ModelConfig:
    # Chosen on validation (docs/results.md#recipe-sweep): the aligned decoder input reads the
    # upper line from the first epochs, and 2+2 layers score as 3+3 do for less time a step.
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
        # The epochs that fit in 90 minutes of two bf16 CPU threads; validation BLEU still rose
        # into the cool-down (docs/results.md#couplets, and #precision for slower CPUs).
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


default_config = CoupletConfig


SEQ2SEQ_TASK: Seq2SeqTask[Vocabulary, CoupletConfig] = Seq2SeqTask(
    name=TASK_NAME,
    config_type=CoupletConfig,
    vocabulary=VocabularyFunctions(
        read=lambda folder: Vocabulary.load(folder / VOCABULARY_FILE),
        # The file Vocabulary.save writes: one token per line in id order.
        files=lambda vocabulary: {VOCABULARY_FILE: "".join(token + "\n" for token in vocabulary.tokens)},
        tokens=lambda vocabulary: (vocabulary.tokens, vocabulary.tokens),
        settings=("min_frequency",),  # which training characters it holds
    ),
    vocabulary_sizes=lambda vocabulary: (len(vocabulary), len(vocabulary)),
    metadata_keys=("data_report",),  # what was read and skipped, recorded beside the config
    card={"hub_task": "text2text-generation", "dataset": "couplet", "languages": ["zh"]},
    metric_names=("val_bleu", "val_level_tone_ending"),
    token_unit="characters",
)


def train(
    config: CoupletConfig,
    out_dir: str | os.PathLike[str],
    *,
    resume: bool = False,
    init_from: str | os.PathLike[str] | None = None,
) -> seq2seq.TrainResult[Vocabulary, CoupletConfig]:
    """Train a couplet model; validation character BLEU (greedy, constrained) each epoch decides ``best/``.

    ``init_from`` fine-tunes: the checkpoint's vocabulary and weights are the start (its
    model config must already be ``config.model``, see ``training.finetune``).
    """
    chinese.require_couplet_packages()  # validation reads tones: a missing package is said before the corpus
    data = build_data(config.data, seq2seq.starting_vocabulary(SEQ2SEQ_TASK, Path(out_dir), resume, init_from))
    config = seq2seq.with_vocabulary(config, len(data.vocabulary))
    _check_validation_answerable(data.validation_pairs, data.vocabulary, config)
    greedy = dataclasses.replace(config.decode, strategy="greedy", num_return=1)

    def evaluate(evaluated_model: Seq2SeqTransformer) -> dict[str, float]:
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


def _check_validation_answerable(pairs: list[tuple[str, str]], vocabulary: Vocabulary, config: CoupletConfig) -> None:
    """Refuse, before the first step, a validation upper line that the search refuses (Latin letters, only
    punctuation, longer than the model reads): the first validation would stop the run on it."""
    for number, (upper, _) in enumerate(pairs, start=1):
        error, _ = check_upper_line(upper, vocabulary, config.model.max_len)
        if error is None:
            continue
        if config.data.valid_files:
            where, remedy = f"kept from {', '.join(config.data.valid_files)}", "remove it from that file"
        else:
            where = "held out of the training pairs (data.num_validation)"
            remedy = "remove it from the training data, or give validation files (--valid)"
        quoted = "" if upper in error else f" {upper[:40]!r}"  # most errors quote the line themselves
        raise ValueError(
            f"validation couplet {number}{quoted} {where}: {error}; validation answers every upper line, so {remedy}"
        )


def load(checkpoint: str | os.PathLike[str]) -> tuple[Seq2SeqTransformer, Vocabulary, CoupletConfig]:
    """Rebuild the model, vocabulary and config of a couplet checkpoint folder (or a run folder's best/)."""
    return seq2seq.load(SEQ2SEQ_TASK, checkpoint)
