"""The classification preset and config, the training run, and loading the checkpoints it writes."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from transformer_lab.data import (
    AG_NEWS_CLASSES,
    PAD_ID,
    SubwordTokenizer,
    padding_fraction,
    resolve_ag_news_dir,
    token_budget_batches,
)
from transformer_lab.data.batching import check_budget_holds_each_example, longer_than
from transformer_lab.data.lazy_batches import epoch_classification_batches
from transformer_lab.data.positional_fit import max_len_advice
from transformer_lab.models import ClassifierConfig, TransformerClassifier
from transformer_lab.tasks.classification.data import ClassificationData, ClassificationDataConfig, build_data
from transformer_lab.tasks.classification.predict import predict_probabilities
from transformer_lab.tasks.task import VocabularyFunctions
from transformer_lab.training import CONFIG_FILE, TrainConfig, data_shard, load_task_config
from transformer_lab.training.batch_losses import classification_loss_fn
from transformer_lab.training.checkpoint import resolve_checkpoint
from transformer_lab.training.checkpoint_loading import load_checkpoint_parts, read_tokenizer
from transformer_lab.training.config_io import shown
from transformer_lab.training.run.plan import RunPlan, RunResult, start_checkpoint, train_run

logger = logging.getLogger(__name__)

TASK_NAME = "classification"
TOKENIZER_FILE = "tokenizer.json"
# One tokenizer, stored in every checkpoint as tokenizer.json; its strings are the one side.
VOCABULARY: VocabularyFunctions[SubwordTokenizer] = VocabularyFunctions(
    read=lambda folder: read_tokenizer(folder, TOKENIZER_FILE),
    files=lambda tokenizer: {TOKENIZER_FILE: tokenizer.to_json()},
    tokens=lambda tokenizer: (tokenizer.tokens, tokenizer.tokens),
    settings=("vocab_size", "lowercase", "min_frequency"),  # the BPE's, as data.corpus_spec hands them on
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
        # A short warm-up to a peak of 0.5 * 256^-0.5 * 400^-0.5 = 1.6e-3. best/ keeps the epoch of
        # the highest validation accuracy, so extra epochs cost time, not accuracy (docs/results.md#ag-news).
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
        fit_schedule_to_run=True,  # own data of a few steps an epoch: the warm-up scaled to the run
    )


@dataclass
class ClassificationConfig:
    """Everything a classification run needs; written into every checkpoint."""

    data: ClassificationDataConfig = field(default_factory=ClassificationDataConfig)
    model: ClassifierConfig = field(default_factory=_default_model)
    train: TrainConfig = field(default_factory=_default_train)
    # Set when training: from classes.txt (AG News), the labels of the user's file, or the checkpoint's.
    class_names: tuple[str, ...] = field(
        default=AG_NEWS_CLASSES, metadata={"derived": "the task reads them from the labels, or the checkpoint's"}
    )


default_config = ClassificationConfig


# A classification run's result: its model, tokenizer (``vocabulary``), config and data.
TrainResult = RunResult[TransformerClassifier, SubwordTokenizer, "ClassificationConfig", ClassificationData]


def _check_lengths(
    path: Path,
    line_numbers: np.ndarray | Sequence[int],
    lengths: np.ndarray | Sequence[int],
    max_len: int,
    architecture_fixed: bool,
) -> None:
    """Refuse the first row of ``path`` longer than ``max_len`` tokens, naming its line (``line_numbers``).

    Validation rows too, before training: else the run trains an epoch and then stops at the
    first validation on the model's positional-table error, which names neither.
    """
    too_long = longer_than(lengths, max_len)
    if too_long.size:
        first = int(too_long[0])
        raise ValueError(
            f"{path}: line {int(line_numbers[first])}: expected at most {max_len} subword tokens "
            f"(model.max_len), got {int(lengths[first])}; {max_len_advice(architecture_fixed)}"
        )


def _recorded_data_config(config: ClassificationDataConfig, data: ClassificationData) -> ClassificationDataConfig:
    """The data config to write into checkpoints: the files used, findable from any folder."""
    if config.prepared_dir:
        return dataclasses.replace(config, prepared_dir=str(Path(config.prepared_dir).resolve()))
    if not config.train_files:
        # Relative to ag_news/ where possible, so that the run reads the same file on another machine.
        path, folder = data.train_file.resolve(), resolve_ag_news_dir(config.data_dir).resolve()
        return dataclasses.replace(
            config, train_file=str(path.relative_to(folder) if path.is_relative_to(folder) else path)
        )
    return dataclasses.replace(
        config,
        train_files=(str(data.train_file.resolve()),),
        valid_files=() if data.validation_file is None else (str(data.validation_file.resolve()),),
    )


def checkpoint_vocabulary(
    checkpoint: str | os.PathLike[str] | None,
) -> tuple[SubwordTokenizer | None, tuple[str, ...] | None]:
    """The tokenizer and class names a run or corpus keeps from ``checkpoint`` (None: both built from the data).

    Both, so that the ids and the class indices mean what they meant to the checkpoint's model.
    """
    if checkpoint is None:
        return None, None
    return VOCABULARY.read(Path(checkpoint)), load_task_config(checkpoint, TASK_NAME, ClassificationConfig).class_names


def train(
    config: ClassificationConfig,
    out_dir: str | os.PathLike[str],
    *,
    resume: bool = False,
    init_from: str | os.PathLike[str] | None = None,
) -> TrainResult:
    """Train a classifier; validation accuracy at every epoch end decides ``best/``.

    ``resume`` continues ``out_dir/last``; ``init_from`` fine-tunes a checkpoint (its model
    config must already be ``config.model``, see ``training.finetune``). Both keep the
    checkpoint's tokenizer and class names, so the class indices mean what they meant.
    """
    tokenizer, class_names = checkpoint_vocabulary(start_checkpoint(out_dir, resume=resume, init_from=init_from))
    data = build_data(config.data, tokenizer, class_names)
    lengths = data.train_store.lengths("tokens")
    fixed = resume or init_from is not None
    _check_lengths(data.train_file, data.train_line_numbers, lengths, config.model.max_len, fixed)
    config = dataclasses.replace(
        config,
        data=_recorded_data_config(config.data, data),
        model=dataclasses.replace(
            config.model, vocab_size=data.tokenizer.vocab_size, num_classes=len(data.class_names), pad_id=PAD_ID
        ),
        class_names=tuple(data.class_names),
    )
    check_budget_holds_each_example(lengths, config.data.max_tokens, "data.max_tokens")
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
    _check_lengths(
        data.validation_file or data.train_file,
        [article.line_number for article in data.validation_articles],
        [len(ids) for ids in validation_ids],
        config.model.max_len,
        fixed,
    )
    validation_labels = torch.tensor([article.label for article in data.validation_articles])

    def evaluate(evaluated_model: TransformerClassifier) -> dict[str, float]:
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
        build_model=lambda: TransformerClassifier.from_config(model_config),
        loss_fn=classification_loss_fn(config.train.label_smoothing, config.train.rdrop_alpha),
        # Under torchrun each rank trains on its own shard of the epoch.
        train_batches=lambda epoch: epoch_classification_batches(
            data.train_store, data_config.max_tokens, data_config.seed, epoch, *data_shard()
        ),
        evaluate_fn=evaluate,
        metric_names=("val_accuracy", "val_loss"),
        count_tokens=lambda batch: int((batch.token_ids != PAD_ID).sum()),
        data_counts={
            "training articles": len(data.train_store),
            "validation articles": len(data.validation_articles),
        },
        extra_files=VOCABULARY.files(data.tokenizer),
        # The preset's AG News is English news; the user's files name no language.
        card={"hub_task": "text-classification", "dataset": "ag_news", "languages": ["en"]},
        corpus_folder=data.train_store.folder,
    )
    model, summary = train_run(plan, out_dir, resume=resume, init_from=init_from)
    return TrainResult(model=model, vocabulary=data.tokenizer, config=config, data=data, summary=summary)


def load_classifier(
    checkpoint: str | os.PathLike[str],
) -> tuple[TransformerClassifier, SubwordTokenizer, ClassificationConfig]:
    """Rebuild the model (in eval mode), tokenizer and config of a checkpoint folder (or a run folder's best/)."""
    model, tokenizer, config = load_checkpoint_parts(
        checkpoint,
        TASK_NAME,
        ClassificationConfig,
        lambda config: TransformerClassifier.from_config(config.model),
        VOCABULARY.read,
        lambda tokenizer: {"vocab_size": (tokenizer.vocab_size, TOKENIZER_FILE)},
    )
    names = list(config.class_names)
    # The first name met a second time, in one pass: a checkpoint may hold thousands of classes.
    seen: set[str] = set()
    repeated = None
    for name in names:
        if name in seen:
            repeated = name
            break
        seen.add(name)
    if len(names) != config.model.num_classes or repeated is not None:
        # Training writes one name per output of the head, each once; a list edited since would
        # name the wrong classes, and a name given twice would merge two classes' probabilities.
        given = f"{repeated!r} twice" if repeated is not None else str(len(names))
        raise ValueError(
            f"{resolve_checkpoint(checkpoint) / CONFIG_FILE}: class_names: expected the {config.model.num_classes} "
            f"distinct names of the model's classes (model.num_classes), got {given}: {shown(names)}"
        )
    return model, tokenizer, config
