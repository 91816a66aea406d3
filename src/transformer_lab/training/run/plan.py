"""Starting a training run, the same way for every task: where it starts, its model, its first weights, the Trainer.

A task reads its data and says what its run is made of (:class:`RunPlan`: how to build
the model, the loss, the epoch batches, the validation, what its checkpoints record);
:func:`train_run` does the rest for a fresh run, a resumed one (``--resume``: the run's
own ``last/``) and a fine-tune (``--init-from``: another checkpoint's weights), and
:func:`start_checkpoint` names the checkpoint whose vocabulary a run must keep.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

import torch
from torch import Tensor, nn

from transformer_lab.allocator import release_free_memory
from transformer_lab.data.prepared_cache import prepared_corpus_record
from transformer_lab.training import Trainer, config_to_dict
from transformer_lab.training.checkpoint import PREPARED_CORPUS_KEY, resolve_checkpoint
from transformer_lab.training.config import TaskConfig
from transformer_lab.training.finetune import INITIALIZED_FROM_KEY, load_initial_weights, recorded_initialization
from transformer_lab.training.model_card import CARD_HINTS_KEY, DATA_COUNTS_KEY
from transformer_lab.training.rdrop import check_dropout_for_rdrop
from transformer_lab.training.run.same_run import with_absolute_paths
from transformer_lab.training.trainer import LAST_FOLDER

ModelType = TypeVar("ModelType", bound=nn.Module)
VocabularyType = TypeVar("VocabularyType")
ConfigType = TypeVar("ConfigType")
DataType = TypeVar("DataType")


def start_checkpoint(
    out_dir: str | os.PathLike[str], *, resume: bool, init_from: str | os.PathLike[str] | None
) -> Path | None:
    """The checkpoint a run starts from: ``out_dir/last`` on resume, ``init_from``'s on a fine-tune, else None.

    A run folder given to ``init_from`` means its ``best/``, as everywhere a checkpoint is read.
    """
    if resume:
        return Path(out_dir) / LAST_FOLDER
    if init_from is not None:
        return resolve_checkpoint(init_from, "init_from")
    return None


@dataclass
class RunPlan(Generic[ModelType]):
    """What one task's run is made of; :func:`train_run` turns it into a trained model.

    ``config`` is the task's whole config: its ``train`` section drives the Trainer, its
    ``model.d_model`` the schedule. ``build_model()`` makes the model (called once the seed is
    set, so its initial weights follow ``config.train.seed``); ``loss_fn(model, batch)`` the
    training loss; ``train_batches(epoch)`` the epoch's batches (this process's shard under
    torchrun); ``evaluate_fn(model)`` the validation metrics (None: no validation);
    ``count_tokens(batch)`` the tokens a batch counts for tokens/s and the global loss;
    ``metric_names`` the keys ``evaluate_fn`` returns (checked against ``train.best_metric``
    before any step, and against each evaluation).
    Checkpoints record ``task_name``, ``metadata`` (a data report), ``data_counts`` and
    ``card`` (for the model card: the Hub's task type, the preset's dataset and languages,
    see ``training.model_card``), the prepared corpus's input files and checksums
    (``data.prepared_dir``'s, else ``corpus_folder``'s, else ``corpus_inputs``, those of a corpus
    read whole, for a resume to compare) and
    ``config``; ``extra_files`` (name -> text) hold the vocabulary.
    """

    task_name: str
    config: TaskConfig
    build_model: Callable[[], ModelType]
    loss_fn: Callable[[nn.Module, Any], Tensor]
    train_batches: Callable[[int], Iterable[Any]]
    evaluate_fn: Callable[[ModelType], dict[str, float]] | None
    count_tokens: Callable[[Any], int]
    # The names of the metrics evaluate_fn returns, so that train.best_metric is checked before training.
    metric_names: tuple[str, ...] = ()
    data_counts: Mapping[str, int] = field(default_factory=dict)
    card: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    extra_files: Mapping[str, str] = field(default_factory=dict)
    # The folder of the prepared corpus the run reads, a cache entry too (None: data in memory).
    corpus_folder: Path | None = None
    corpus_inputs: list[dict[str, Any]] | None = None  # a corpus read whole: its files' records


@dataclass
class RunResult(Generic[ModelType, VocabularyType, ConfigType, DataType]):
    """A finished run: its model (the trained weights, in train mode), vocabulary, config, data and summary."""

    model: ModelType
    vocabulary: VocabularyType
    config: ConfigType
    data: DataType
    summary: dict[str, Any]


def train_run(
    plan: RunPlan[ModelType],
    out_dir: str | os.PathLike[str],
    *,
    resume: bool = False,
    init_from: str | os.PathLike[str] | None = None,
) -> tuple[ModelType, dict[str, Any]]:
    """Build the plan's model, load ``init_from``'s weights for a fine-tune, train it; returns (model, summary).

    ``resume`` continues ``out_dir/last`` (the Trainer restores weights, optimizer and the
    data position); ``init_from`` (a checkpoint or run folder) only gives the first weights.
    """
    check_dropout_for_rdrop(plan.config.train.rdrop_alpha, plan.config.model.dropout)
    evaluate_fn = _checked_evaluation(plan)
    # The data is read (and prepared): what that freed goes back before training's own peak.
    release_free_memory()
    torch.manual_seed(plan.config.train.seed)
    model = plan.build_model()
    # On resume the Trainer loads the run's own last/, which holds newer weights than init_from.
    start = None if resume else start_checkpoint(out_dir, resume=False, init_from=init_from)
    initialized = load_initial_weights(model, start, resume)
    recorded = recorded_initialization(Path(out_dir) / LAST_FOLDER, plan.task_name) if resume else None
    if recorded is not None:  # a resumed fine-tune keeps naming the checkpoint it started from
        initialized = {INITIALIZED_FROM_KEY: recorded}
    counts = {DATA_COUNTS_KEY: dict(plan.data_counts)} if plan.data_counts else {}
    card = {CARD_HINTS_KEY: dict(plan.card)} if plan.card else {}
    prepared_dir = getattr(getattr(plan.config, "data", None), "prepared_dir", "") or plan.corpus_folder
    corpus = {PREPARED_CORPUS_KEY: prepared_corpus_record(prepared_dir)} if prepared_dir else {}
    if not corpus and plan.corpus_inputs:
        # Read whole, not prepared: its input files alone, which a resume compares as a cache entry's.
        corpus = {PREPARED_CORPUS_KEY: {"inputs": plan.corpus_inputs, "files": {}}}
    trainer = Trainer(
        model,
        plan.config.train,
        out_dir,
        loss_fn=plan.loss_fn,
        train_batches=plan.train_batches,
        d_model=plan.config.model.d_model,
        evaluate_fn=evaluate_fn,
        count_tokens=plan.count_tokens,
        checkpoint_config={
            "task": plan.task_name,
            **plan.metadata,
            **initialized,
            **counts,
            **card,
            **corpus,
            **with_absolute_paths(config_to_dict(plan.config)),
        },
        extra_files=dict(plan.extra_files),
        resume=resume,
    )
    return model, trainer.fit()


def _checked_evaluation(plan: RunPlan[Any]) -> Callable[[nn.Module], dict[str, float]] | None:
    """``plan.evaluate_fn``, once ``train.best_metric`` is found among its declared metrics; each result checked too.

    Without the early check a misspelt metric is refused at the first validation, after an
    epoch of training that no checkpoint keeps.
    """
    # The Trainer hands back the model it was given (unwrapped from DDP): build_model's, of the plan's type.
    evaluate = cast("Callable[[nn.Module], dict[str, float]] | None", plan.evaluate_fn)
    names = plan.metric_names
    if evaluate is None or not names:
        return evaluate
    best = plan.config.train.best_metric
    if best not in names:
        raise ValueError(f"train.best_metric: expected one of {', '.join(names)} for this task, got {best!r}")
    # A loss is better lower, every other metric the tasks report (BLEU, chrF, accuracy) higher:
    # the other mode would keep the worst validation as best/.
    lower_is_better = best.endswith("loss")
    expected_mode = "min" if lower_is_better else "max"
    if plan.config.train.best_mode != expected_mode:
        raise ValueError(
            f"train.best_mode: expected {expected_mode!r} with train.best_metric {best!r} "
            f"({'lower' if lower_is_better else 'higher'} is better), got {plan.config.train.best_mode!r}, "
            "which would keep its worst value as best/"
        )

    def evaluate_declared(model: nn.Module) -> dict[str, float]:
        metrics = evaluate(model)
        if sorted(metrics) != sorted(names):
            raise ValueError(f"evaluate_fn: expected the metrics {sorted(names)} it declares, got {sorted(metrics)}")
        return metrics

    return evaluate_declared
