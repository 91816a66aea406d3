"""The one sequence-to-sequence task machinery: translation and couplets differ only in what they plug in.

A :class:`Seq2SeqTask` names its config type and how its vocabulary lives in a checkpoint;
the run, its batches and the checkpoint loading are here, once.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generic, Mapping, Sequence, TypeVar

import torch

from transformer_lab.data import BOS_ID, EOS_ID, PAD_ID
from transformer_lab.data.batching import check_budget_holds_each_example, token_budget_spans
from transformer_lab.data.bpe_dropout import PairSplit
from transformer_lab.data.lazy_batches import PairBatches, epoch_pair_batches, pair_length_table
from transformer_lab.data.positional_fit import check_fits_positional_table
from transformer_lab.data.token_store import TokenStore
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.tasks.task import VocabularyFunctions
from transformer_lab.training import data_shard
from transformer_lab.training.batch_losses import seq2seq_loss_fn
from transformer_lab.training.checkpoint_loading import check_special_ids, load_checkpoint_parts
from transformer_lab.training.config import TaskConfig
from transformer_lab.training.run.plan import RunPlan, RunResult, start_checkpoint, train_run

logger = logging.getLogger(__name__)

VocabularyType = TypeVar("VocabularyType")
ConfigType = TypeVar("ConfigType", bound=TaskConfig)
Pair = tuple[str, str]
EncodedPair = tuple[list[int], list[int]]


# What the translation and couplet presets share: the paper's smoothing, a peak rate of
# 0.5 / sqrt(256 * 800) = 1.1e-3 after 800 warm-up steps, validation BLEU (greedy) at every
# epoch end deciding best/, and bf16 autocast only where the device runs it fast
# (transformer_lab.hardware). Each preset adds its length, cool-down and rotation.
SEQ2SEQ_TRAIN_PRESET: dict[str, Any] = {
    "lr_factor": 0.5,
    "warmup_steps": 800,
    "label_smoothing": 0.1,
    "precision": "auto",
    "eval_every_steps": 0,
    "best_metric": "val_bleu",
    "best_mode": "max",
    "log_every_steps": 20,
    # Own data too small for 800 + the cool-down gets the schedule scaled to its length.
    "fit_schedule_to_run": True,
}


@dataclass(frozen=True)
class Seq2SeqTask(Generic[VocabularyType, ConfigType]):
    """What a sequence-to-sequence task plugs into the machinery.

    ``vocabulary_sizes``: the ids of each side, source then target; ``metadata_keys``: its
    entries of ``config.json`` beside the config; ``card``: ``training.model_card.CARD_HINTS_KEY``'s;
    ``metric_names``: the validation scores its ``evaluate`` returns, as a run logs them; ``token_unit``: what
    its tokens are, in errors.
    """

    name: str
    config_type: type[ConfigType]
    vocabulary: VocabularyFunctions[VocabularyType]
    vocabulary_sizes: Callable[[VocabularyType], tuple[int, int]]
    metadata_keys: tuple[str, ...] = ()
    card: Mapping[str, Any] = field(default_factory=dict)
    metric_names: tuple[str, ...] = ()
    token_unit: str = "subword tokens"


@dataclass
class Seq2SeqData(Generic[VocabularyType]):
    """A run's data: the vocabulary, the encoded training pairs, the validation pairs and what was read.

    ``train_store`` holds the training ids (in memory for a built-in corpus, memory-mapped
    for a prepared one); ``train_pairs`` their text where it is held (None for a prepared
    corpus, whose text stays in its files).
    """

    vocabulary: VocabularyType
    train_store: TokenStore
    validation_pairs: list[Pair]
    report: dict[str, int] = field(default_factory=dict)  # counts a task's reader records; {} = none
    train_pairs: list[Pair] | None = None
    # A corpus read whole: its files' records (path, state, sha256), for a resume to compare; None: none kept.
    inputs: list[dict[str, Any]] | None = None

    @classmethod
    def in_memory(
        cls,
        vocabulary: VocabularyType,
        train_pairs: list[Pair],
        validation_pairs: list[Pair],
        train_ids: Sequence[EncodedPair],
        report: dict[str, int] | None = None,
    ) -> Seq2SeqData[VocabularyType]:
        """The data of a corpus read whole: its encoded pairs in an in-memory store, its text kept."""
        store = TokenStore.from_sequences(
            {"source": [source for source, _ in train_ids], "target": [target for _, target in train_ids]}
        )
        return cls(vocabulary, store, validation_pairs, report or {}, train_pairs)


# A sequence-to-sequence run's result: its model, vocabulary, config and data.
TrainResult = RunResult[Seq2SeqTransformer, VocabularyType, ConfigType, Seq2SeqData[VocabularyType]]


def starting_vocabulary(
    task: Seq2SeqTask[VocabularyType, Any],
    out_dir: Path,
    resume: bool,
    init_from: str | os.PathLike[str] | None,
) -> VocabularyType | None:
    """The vocabulary a run must keep: its own ``last/``'s on resume, the checkpoint's on a fine-tune, else None."""
    start = start_checkpoint(out_dir, resume=resume, init_from=init_from)
    return None if start is None else task.vocabulary.read(start)


def with_vocabulary(
    config: ConfigType,
    source_size: int,
    target_size: int | None = None,
    specials_from: str = "every vocabulary of this package",
) -> ConfigType:
    """``config`` whose model's vocabulary sizes and special ids follow the vocabulary.

    ``target_size`` None: one vocabulary for both sides; ``specials_from`` names whose fixed
    special ids a config's other ids are refused against. With one vocabulary per side the
    source and target ids mean different tokens, so ``tie_embeddings="all"`` (one matrix
    for both) becomes ``"decoder"`` (target embedding and generator still shared); the
    change is logged and recorded in the checkpoint's config.
    """
    model = config.model
    # Every vocabulary of ours keeps the specials at fixed ids: another id would be overwritten here.
    check_special_ids(model, None, "model config", specials_from)
    tie_embeddings = model.tie_embeddings
    if target_size is not None and tie_embeddings == "all":
        logger.info("one vocabulary per side: model.tie_embeddings 'all' -> 'decoder' (source and target share no ids)")
        tie_embeddings = "decoder"
    model = dataclasses.replace(
        model,
        src_vocab_size=source_size,
        tgt_vocab_size=source_size if target_size is None else target_size,
        tie_embeddings=tie_embeddings,
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
    )
    return dataclasses.replace(config, model=model)


def train(
    task: Seq2SeqTask[VocabularyType, ConfigType],
    config: ConfigType,
    data: Seq2SeqData[VocabularyType],
    out_dir: str | os.PathLike[str],
    evaluate: Callable[[Seq2SeqTransformer], dict[str, float]] | None,
    *,
    resume: bool = False,
    init_from: str | os.PathLike[str] | None = None,
) -> TrainResult[VocabularyType, ConfigType]:
    """Train ``config.model`` on ``data`` with the Trainer; ``evaluate`` (None: no validation) decides ``best/``.

    ``config`` must already follow the vocabulary (:func:`with_vocabulary`); ``init_from``
    loads a checkpoint's weights first (a fine-tune, see ``training.finetune``). A pair longer
    than the positional table is refused before the first step.
    """
    model_config, data_config, train_config = config.model, config.data, config.train
    decode_precision = getattr(getattr(config, "decode", None), "precision", None)
    if evaluate is not None and decode_precision == "int8" and torch.device(train_config.device).type != "cpu":
        # Validation decodes where training runs, and int8 decoding has only CPU kernels: say so before the first step.
        raise ValueError(
            f"decode.precision: expected fp32, bf16 or auto for the validation on train.device "
            f"{train_config.device!r} (int8 decodes on the CPU only), got 'int8'"
        )
    lengths = pair_length_table(data.train_store)  # [N, 2], once per run
    pairs = data.train_pairs if data.train_pairs is not None else data.train_store.folder
    fixed = resume or init_from is not None
    check_fits_positional_table(lengths, pairs, model_config.max_len, "training data", fixed, unit=task.token_unit)
    check_budget_holds_each_example(lengths, data_config.max_tokens, "data.max_tokens")
    num_shards, shard_index = data_shard()
    # The tasks without the setting (couplets) have no BPE dropout; a side of max_len - 1 ids fits the table.
    dropout = getattr(data_config, "bpe_dropout", 0.0)
    longest = min(model_config.max_len, data_config.max_tokens) - 1
    split = PairSplit.of(data.vocabulary, dropout, data_config.seed, longest) if dropout else None

    # The Trainer asks for epoch 0 twice (to count the run's steps, then to train); a plan
    # of millions of pairs takes seconds, so the last one is kept.
    @functools.lru_cache(maxsize=1)
    def epoch_batches(epoch: int) -> PairBatches:
        return epoch_pair_batches(
            data.train_store, lengths, data_config.max_tokens, data_config.seed, epoch, num_shards, shard_index, split
        )

    first_epoch = (
        epoch_batches(0).spans
        if num_shards == 1
        else token_budget_spans(lengths, data_config.max_tokens, shuffle=True, seed=data_config.seed, epoch=0)
    )
    source_size, target_size = task.vocabulary_sizes(data.vocabulary)
    logger.info(
        "%d training pairs, vocabulary %s, %d batches per epoch, padding %.1f%%",
        len(data.train_store),
        source_size if source_size == target_size else f"{source_size} source / {target_size} target",
        len(first_epoch),
        100 * first_epoch.padding_fraction(lengths),
    )
    plan = RunPlan(
        task_name=task.name,
        config=config,
        build_model=lambda: Seq2SeqTransformer.from_config(model_config),
        loss_fn=seq2seq_loss_fn(train_config.label_smoothing, PAD_ID, train_config.rdrop_alpha),
        # Under torchrun each rank trains on its own shard of the epoch.
        train_batches=epoch_batches,
        evaluate_fn=evaluate,
        count_tokens=lambda batch: batch.num_target_tokens,
        metric_names=task.metric_names,
        data_counts={"training pairs": len(data.train_store), "validation pairs": len(data.validation_pairs)},
        metadata={"data_report": data.report} if data.report else {},
        extra_files=task.vocabulary.files(data.vocabulary),
        card=task.card,
        corpus_folder=data.train_store.folder,
        corpus_inputs=data.inputs,
    )
    model, summary = train_run(plan, out_dir, resume=resume, init_from=init_from)
    if data.report:
        summary = {**summary, "data": data.report}
    return TrainResult(model=model, vocabulary=data.vocabulary, config=config, data=data, summary=summary)


def load(
    task: Seq2SeqTask[VocabularyType, ConfigType], checkpoint: str | os.PathLike[str]
) -> tuple[Seq2SeqTransformer, VocabularyType, ConfigType]:
    """The model (in eval mode), vocabulary and config of a checkpoint folder, or of a run folder's ``best/``.

    A bad config value, a vocabulary whose size is not the model's, or weights that do
    not fit are errors that name the file (``training.checkpoint_loading``).
    """
    return load_checkpoint_parts(
        checkpoint,
        task.name,
        task.config_type,
        lambda config: Seq2SeqTransformer.from_config(config.model),
        task.vocabulary.read,
        lambda vocabulary: _sizes_and_files(task, vocabulary),
        task.metadata_keys,
    )


def _sizes_and_files(task: Seq2SeqTask[VocabularyType, Any], vocabulary: VocabularyType) -> dict[str, tuple[int, str]]:
    """The model fields a vocabulary sizes, each with its size and the file that holds that side."""
    files = list(task.vocabulary.files(vocabulary))
    source_size, target_size = task.vocabulary_sizes(vocabulary)
    return {"src_vocab_size": (source_size, files[0]), "tgt_vocab_size": (target_size, files[-1])}
