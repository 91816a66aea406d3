"""How the Trainer gets its optimizer and learning-rate schedule: builders passed in, the paper's by default.

The Trainer collects the parameters to train and calls an :data:`OptimizerFactory` on
them, then a :data:`ScheduleFactory` on the optimizer; the schedule is stepped once per
optimizer step. Without factories it builds the paper's: Adam with betas (0.9, 0.98) and
eps 1e-9 (:func:`~transformer_lab.training.schedule.build_optimizer`) and the Noam
schedule of :mod:`~transformer_lab.training.schedule`, with the config's ``warmup_steps``,
``lr_factor`` and ``cooldown_steps`` (:func:`noam_schedule_factory`).

Both states go into ``trainer_state.pt`` as ``state_dict()``s, so a resumed run must build
the same kind of optimizer and schedule: :func:`check_same_optimizer` refuses another kind
before anything is loaded.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from torch import nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

from .config import TrainConfig
from .schedule import build_noam_scheduler, build_optimizer, fitted_schedule, scaled_schedule

logger = logging.getLogger(__name__)

__all__ = [
    "CooldownTooLongError",
    "OptimizerFactory",
    "ScheduleFactory",
    "build_optimization",
    "check_same_optimizer",
    "configured_run_steps",
    "fitted_cooldown_steps",
    "noam_schedule_factory",
    "run_too_short_for_schedule",
    "scaled_to_run",
]

OptimizerFactory = Callable[[list[nn.Parameter]], Optimizer]
ScheduleFactory = Callable[[Optimizer], LRScheduler]


def configured_run_steps(config: TrainConfig, train_batches: Callable[[int], Iterable[Any]]) -> int:
    """The run's optimizer steps as configured (``max_steps``, or fewer if the epochs end first; 0: unbounded),
    unchecked against the cool-down: a time budget's plan, not this length, is the run its cool-down must fit."""
    return _shorter(config, _steps_by_epochs(config, train_batches))


def _shorter(config: TrainConfig, steps_by_epochs: int) -> int:
    limits = [limit for limit in (config.max_steps, steps_by_epochs) if limit > 0]
    return min(limits) if limits else 0


def fitted_cooldown_steps(config: TrainConfig, steps_by_epochs: int) -> int:
    """The cool-down of a run that ``max_steps`` stops before its ``epochs`` end; else ``cooldown_steps``.

    ``steps_by_epochs`` is the length the epochs give (0: none). Such a run is the
    configured run stopped early, ending on a cool-down scaled as a time budget scales it
    (:func:`~transformer_lab.training.schedule.fitted_schedule`): the warm-up and peak as
    configured, the cool-down shortened by the ratio of the lengths and never reaching back
    into the warm-up.
    """
    if not (config.cooldown_steps and 0 < config.max_steps < steps_by_epochs):
        return config.cooldown_steps
    _, cooldown, _ = fitted_schedule(
        config.max_steps, steps_by_epochs, 0, config.warmup_steps, config.cooldown_steps, config.lr_factor
    )
    logger.info(
        "max_steps %d stops the configured %d steps (%d epochs) early: cool-down %d steps instead of %d, "
        "after the warm-up of %d",
        config.max_steps,
        steps_by_epochs,
        config.epochs,
        cooldown,
        config.cooldown_steps,
        config.warmup_steps,
    )
    return cooldown


def scaled_to_run(config: TrainConfig, train_batches: Callable[[int], Iterable[Any]]) -> TrainConfig:
    """``config`` with its schedule scaled to the run's length where ``fit_schedule_to_run`` asks and it is too short.

    The length is the configured run's (``epochs`` times epoch 0's steps, else ``max_steps``):
    a ``max_steps`` that stops the epochs early stops the scaled schedule early, as
    :func:`fitted_cooldown_steps` stops any. The scaling is
    :func:`~transformer_lab.training.schedule.scaled_schedule`'s; it is logged in one line.
    """
    run_steps = run_too_short_for_schedule(config, train_batches)
    if not run_steps:
        return config
    # run_too_short_for_schedule found that this scaling changes the schedule.
    warmup, cooldown, factor = scaled_schedule(run_steps, config.warmup_steps, config.cooldown_steps, config.lr_factor)
    logger.info(
        "the run's %d optimizer steps are too short for the schedule's warm-up %d and cool-down %d (the data is "
        "smaller than it was made for): scaled to warm-up %d and cool-down %d, lr_factor %.4g for the same peak "
        "rate (set train.warmup_steps and train.cooldown_steps to choose them)",
        run_steps,
        config.warmup_steps,
        config.cooldown_steps,
        warmup,
        cooldown,
        factor,
    )
    return dataclasses.replace(config, warmup_steps=warmup, cooldown_steps=cooldown, lr_factor=factor)


def run_too_short_for_schedule(config: TrainConfig, train_batches: Callable[[int], Iterable[Any]]) -> int:
    """The configured run's optimizer steps where ``fit_schedule_to_run`` asks and they are too short for the
    schedule (its data smaller than the schedule was made for); else 0.

    The length is ``epochs`` times epoch 0's steps, else ``max_steps``; a stream of batches
    without a len() and no ``max_steps`` has none to scale to.
    """
    if not config.fit_schedule_to_run:
        return 0
    try:
        run_steps = _steps_by_epochs(config, train_batches) or config.max_steps
    except ValueError:
        return 0
    if run_steps < 1:
        return 0
    scaled = scaled_schedule(run_steps, config.warmup_steps, config.cooldown_steps, config.lr_factor)
    return 0 if scaled[:2] == (config.warmup_steps, config.cooldown_steps) else run_steps


def _steps_by_epochs(config: TrainConfig, train_batches: Callable[[int], Iterable[Any]]) -> int:
    """``epochs`` times epoch 0's optimizer steps; 0 without epochs (a ValueError if neither length is known).

    Epoch 0 stands for every epoch: token-budget batches of a reshuffled epoch differ by a batch
    or two at most, and the cool-down's end only needs to be close.
    """
    if not config.epochs:
        return 0
    try:
        batches = len(train_batches(0))  # type: ignore[arg-type]
    except TypeError:
        if not config.max_steps:
            raise ValueError(
                "cooldown_steps: needs the run's length, from max_steps or from "
                "train_batches(epoch) with a len(); got neither"
            ) from None
        return 0
    return config.epochs * math.ceil(batches / config.grad_accum_steps)


class CooldownTooLongError(ValueError):
    """A cool-down longer than the run; its steps and the run's, for a caller that knows where it came from."""

    def __init__(self, cooldown_steps: int, run_steps: int) -> None:
        super().__init__(
            f"train.cooldown_steps: expected at most the run's {run_steps} optimizer steps, got "
            f"{cooldown_steps} (lower it, or 0 for no cool-down)"
        )
        self.cooldown_steps = cooldown_steps
        self.run_steps = run_steps


def _checked_length(config: TrainConfig, steps_by_epochs: int, cooldown_steps: int) -> int:
    """The shorter of ``max_steps`` and ``steps_by_epochs`` (0: unbounded); an error if ``cooldown_steps`` is longer."""
    planned = _shorter(config, steps_by_epochs)
    if planned < cooldown_steps:
        raise CooldownTooLongError(cooldown_steps, planned)
    return planned


def noam_schedule_factory(
    config: TrainConfig, d_model: int, train_batches: Callable[[int], Iterable[Any]]
) -> ScheduleFactory:
    """The default schedule: Noam with ``config``'s warm-up and factor, and its cool-down if any.

    The run's length, which only the cool-down needs, is worked out now (epoch 0's batches
    counted once), so that a cool-down longer than the run fails when the Trainer is built,
    not when it ends.
    """
    cooldown, total_steps = 0, 0
    if config.cooldown_steps:
        steps_by_epochs = _steps_by_epochs(config, train_batches)
        cooldown = fitted_cooldown_steps(config, steps_by_epochs)
        total_steps = _checked_length(config, steps_by_epochs, cooldown)
    known_length = total_steps or config.max_steps  # counting an epoch's batches for this alone costs a pass
    if known_length and config.warmup_steps > known_length:
        # Allowed (a short check of a long recipe), but said: a cool-down that long is refused.
        logger.warning(
            "train.warmup_steps: %d, longer than the run's %d optimizer steps: the learning rate rises the whole "
            "run and stops at %.0f%% of its peak",
            config.warmup_steps,
            known_length,
            100 * known_length / config.warmup_steps,
        )
    return functools.partial(
        build_noam_scheduler,
        d_model=d_model,
        warmup_steps=config.warmup_steps,
        factor=config.lr_factor,
        total_steps=total_steps,
        cooldown_steps=cooldown,
    )


def build_optimization(
    parameters: list[nn.Parameter],
    config: TrainConfig,
    train_batches: Callable[[int], Iterable[Any]],
    *,
    d_model: int | None,
    optimizer_factory: OptimizerFactory | None = None,
    schedule_factory: ScheduleFactory | None = None,
) -> tuple[Optimizer, LRScheduler]:
    """The optimizer of ``parameters`` and its schedule, from the factories or the defaults.

    None for ``optimizer_factory``: Adam with the paper's settings; None for
    ``schedule_factory``: :func:`noam_schedule_factory`, which needs ``d_model``. A custom
    schedule requires ``config.cooldown_steps == 0``, since the cool-down is the default's.
    Raises a ``ValueError`` naming the argument when a factory returns something else than
    an optimizer, or a schedule that drives another optimizer than the one it was given.
    """
    if schedule_factory is None:
        if d_model is None:
            raise ValueError("d_model: expected the model width for the default Noam schedule, got None")
        schedule_factory = noam_schedule_factory(config, d_model, train_batches)
    elif config.cooldown_steps:
        raise ValueError(
            f"cooldown_steps: expected 0 with a schedule_factory (the cool-down belongs to the default "
            f"Noam schedule; build it into yours), got {config.cooldown_steps}"
        )
    optimizer = (optimizer_factory or build_optimizer)(parameters)
    if not isinstance(optimizer, Optimizer):
        raise ValueError(f"optimizer_factory: expected a torch.optim.Optimizer, got {type(optimizer).__name__}")
    scheduler = schedule_factory(optimizer)
    if not isinstance(scheduler, LRScheduler):
        raise ValueError(
            f"schedule_factory: expected a torch.optim.lr_scheduler.LRScheduler, got {type(scheduler).__name__}"
        )
    if scheduler.optimizer is not optimizer:
        raise ValueError(
            "schedule_factory: expected a schedule of the optimizer it was given, got one of another optimizer"
        )
    return optimizer, scheduler


def check_same_optimizer(saved: Mapping[str, Any], optimizer: Optimizer, file: Path) -> None:
    """Raise a ``ValueError`` naming ``file`` if ``saved`` is the state of another kind of optimizer.

    A state_dict does not name its class; the hyperparameters of its groups tell the kind
    apart (Adam's ``betas``, SGD's ``momentum``). Only names this optimizer lacks count:
    a newer torch adds options to an optimizer, so an older checkpoint may hold fewer.
    Without the check, Adam's state loads into SGD and the first step fails with a
    ``KeyError`` deep inside torch.
    """
    # Called after TrainerState.read, which has refused a state without a list of groups.
    foreign = _hyperparameter_names(saved["param_groups"]) - _hyperparameter_names(optimizer.param_groups)
    if foreign:
        raise ValueError(
            f"{file}: optimizer: expected an optimizer state of type {type(optimizer).__name__} (the optimizer "
            f"this run builds), got one with hyperparameters {sorted(foreign)} that it lacks; resume with the "
            "optimizer and schedule the run was started with"
        )


def _hyperparameter_names(groups: Iterable[Any]) -> set[str]:
    names: set[str] = set()
    for group in groups:
        if isinstance(group, Mapping):
            names.update(str(name) for name in group if name != "params")
    return names
