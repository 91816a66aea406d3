"""A model-agnostic training loop with exact checkpoint-and-resume.

The :class:`Trainer` knows nothing about the model or the data; the caller hands it

- ``loss_fn(model, batch) -> Tensor``: the scalar training loss of one batch, the mean over
  its tokens. It also moves the batch to the model's device, since only it knows the
  batch's structure.
- ``train_batches(epoch) -> Iterable``: the batches of epoch ``epoch``. It must be a
  deterministic function of the epoch (shuffle with a generator seeded by ``seed + epoch``,
  never the global RNG), because resume calls it again and skips the batches already done.
- ``evaluate_fn(model) -> dict[str, float]`` (optional): called in eval mode under
  ``torch.no_grad()``, with the random generators saved and restored around it, so that
  evaluating (or not) never changes the training trajectory.
- ``count_tokens(batch) -> int`` (optional): the tokens ``loss_fn`` averages over, for the
  tokens/s figure and, under ``torchrun``, to weigh each rank's loss by its share of tokens.

Each optimizer step sums the gradients of ``grad_accum_steps`` batches, each loss divided by
``grad_accum_steps``: the step follows the mean of the per-batch mean losses, which equals
the mean over all their tokens when the batches hold equally many tokens (token-budget
batches are close to that). A group cut short by the end of an epoch, or by a skipped
non-finite batch, has its gradient rescaled to the same mean over the batches it has.

The optimizer and schedule come from ``optimizer_factory`` and ``schedule_factory``
(``optimization.py``); by default Adam and the Noam schedule (``schedule.py``), whose last
``cooldown_steps`` steps fall linearly towards 0. The run's length for that is
``max_steps``, or ``epochs`` times the batches of ``train_batches(0)`` (divided by
``grad_accum_steps``), whichever ends first.

Files under ``out_dir``::

    metrics.jsonl    one JSON object per event: {"event": "train", "step", "epoch",
                     "train_loss", "lr", "grad_norm", "tokens_per_second"} every
                     log_every_steps steps, {"event": "eval", "step", "epoch", <metrics>}
                     at each evaluation. "epoch" is the number of epochs completed.
    last/            the newest checkpoint, written at every evaluation and at the end
    step-000123/     the keep_last newest step checkpoints, one per evaluation (if keep_last > 0)
    best/            the checkpoint with the best best_metric so far (a tie: the lower val_loss)

(the log is written by ``metrics_log.py``, the step folders rotated by ``run/run_folder.py``, the
choice of ``best/`` made by ``best_checkpoint.py``; each checkpoint's ``README.md`` is the model
card of ``model_card.py``).

With ``config.time_budget`` the run's length comes from the clock instead of ``epochs`` (a
``max_steps`` still caps it): after a 30-second measurement it validates once and fixes its total steps,
warm-up and cool-down (``time_budget.py``), recorded in ``config.json`` for ``--resume``.
``config.json`` is ``checkpoint_config`` as given, with the precision that ran in place of
"auto" and the budget's plan added: the Trainer never edits the caller's mapping.

Evaluation (and checkpointing) happens every ``eval_every_steps`` optimizer steps, or at the
end of each epoch when that is 0, and once more at the end of :meth:`Trainer.fit` if the
last step was not evaluated yet.

Resume: ``Trainer(..., resume=True)`` loads ``out_dir/last`` (``trainer_state.py``): weights, optimizer, schedule,
step, epoch, position in the epoch, best value, the loss window of the next log row
(``loss_window.py``) and the random states (``rng_state.py``). :meth:`fit`
then restores the random states, calls ``train_batches(epoch)`` and skips the batches
already done. Since checkpoints are only written right after an optimizer step (no
gradient pending), the resumed run takes exactly the steps the uninterrupted one would, and
ends with bitwise-identical weights on the same machine. Rows of ``metrics.jsonl`` after
the resumed step are dropped so the log does not repeat steps.

Under ``torchrun`` (see :mod:`transformer_lab.training.distributed`) the model is wrapped in
``DistributedDataParallel`` and ``train_batches(epoch)`` must give this rank's shard (the same
number of batches on every rank). Each micro-step then trains on the global batch made of
the ranks' batches, with the loss normalised per token over all of it; the logged loss and
tokens/s are those of the global batch, identical on every rank. Rank 0 alone evaluates (the
others receive its metrics), writes ``metrics.jsonl``, checkpoints (the unwrapped model's
weights, with every rank's random state) and shows the progress bar; the others wait at a
barrier after each checkpoint. Resume loads the same ``last/`` on every rank. A fresh run
seeds rank r with ``seed + r``, so ranks draw different dropout masks. A process group the
Trainer creates is destroyed when the process exits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from transformer_lab.devices import resolve_device
from transformer_lab.hardware import autocast, resolve_precision
from transformer_lab.nn.eval_mode import eval_mode

from . import time_budget
from .best_checkpoint import BestCheckpoint
from .checkpoint import (
    CONFIG_FILE,
    checkpoint_damage,
    copy_checkpoint,
    load_checkpoint_config,
    load_model_weights,
    recover_interrupted_save,
    save_checkpoint,
)
from .config import TrainConfig
from .config_io import config_to_dict
from .device_step_checks import DeviceStepChecks, checks_stay_on_device
from .distributed import DataParallel, ProcessLostError, is_peer_lost
from .loss_window import LossWindow
from .metrics_log import MetricsLog
from .model_card import CARD_FILE, TrainerFacts, TrainingClock, trainer_card
from .optimization import OptimizerFactory, ScheduleFactory, build_optimization, scaled_to_run
from .rng_state import RandomState, isolated_rng, seed_all
from .run.run_folder import prune_step_checkpoints, remove_pruned_leftovers, step_checkpoints, step_folder_name
from .run.same_run import check_same_model
from .run.stop_signal import StopRequests, TrainingInterrupted
from .schedule import load_optimizer_state
from .tensorboard_log import TensorBoardLog, require_tensorboard
from .time_budget import PLAN_KEY, TimeBudget
from .trainer_state import TrainerState

__all__ = ["Trainer", "TrainingDivergedError"]

logger = logging.getLogger(__name__)

LAST_FOLDER = "last"
BEST_FOLDER = "best"


class TrainingDivergedError(RuntimeError):
    """``max_nonfinite_steps`` non-finite losses or gradient norms came in a row."""


def _model_device(model: nn.Module) -> torch.device:
    for tensor in itertools.chain(model.parameters(), model.buffers()):
        return tensor.device
    return torch.device("cpu")


class Trainer:
    """Train ``model`` with an optimizer and schedule (Adam and Noam by default), clipping, accumulation, checkpoints.

    Args:
        model: the model to train; moved to ``config.device``.
        config: the training hyperparameters.
        out_dir: folder for ``metrics.jsonl`` and the checkpoints (created if needed).
        loss_fn: ``loss_fn(model, batch)`` -> scalar tensor, mean over the batch's tokens.
        train_batches: ``train_batches(epoch)`` -> the batches of that epoch, deterministic.
        d_model: the model width, which scales the default Noam schedule; needed only
            without ``schedule_factory``.
        evaluate_fn: ``evaluate_fn(model)`` -> metrics; must contain
            ``config.best_metric`` for ``best/`` to be kept. None: no evaluation.
        count_tokens: ``count_tokens(batch)`` -> the tokens ``loss_fn`` averages over, for
            tokens/s and (under torchrun) the per-token loss over all ranks. None: 0.
        checkpoint_config: the dict written as every checkpoint's ``config.json`` (the
            caller's resolved config, model included). None: ``{"train": <config>}``.
        extra_files: files written into every checkpoint (name -> bytes or str).
        resume: load ``out_dir/last`` and continue from it (see the module docstring).
        optimizer_factory: ``optimizer_factory(parameters)`` -> the optimizer of the
            parameters to train. None: Adam with the paper's betas and eps.
        schedule_factory: ``schedule_factory(optimizer)`` -> the schedule, stepped after
            each optimizer step. None: the Noam schedule of ``config`` and ``d_model``.
            With one, ``config.cooldown_steps`` must be 0 (build the cool-down into it).
    """

    def __init__(
        self,
        model: nn.Module,
        config: TrainConfig,
        out_dir: str | os.PathLike[str],
        loss_fn: Callable[[nn.Module, Any], torch.Tensor],
        train_batches: Callable[[int], Iterable[Any]],
        *,
        d_model: int | None = None,
        evaluate_fn: Callable[[nn.Module], Mapping[str, float]] | None = None,
        count_tokens: Callable[[Any], int] | None = None,
        checkpoint_config: Mapping[str, Any] | None = None,
        extra_files: Mapping[str, bytes | str] | None = None,
        resume: bool = False,
        optimizer_factory: OptimizerFactory | None = None,
        schedule_factory: ScheduleFactory | None = None,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise ValueError(f"model: expected an nn.Module, got {type(model).__name__}")
        if not isinstance(config, TrainConfig):
            raise ValueError(f"config: expected a TrainConfig, got {type(config).__name__}")
        for name, function in (
            ("loss_fn", loss_fn),
            ("train_batches", train_batches),
            ("evaluate_fn", evaluate_fn),
            ("count_tokens", count_tokens),
            ("optimizer_factory", optimizer_factory),
            ("schedule_factory", schedule_factory),
        ):
            if function is not None and not callable(function):
                raise ValueError(f"{name}: expected a callable, got {type(function).__name__}")
        self.model = model
        self.out_dir = Path(out_dir)
        self.loss_fn = loss_fn
        self.train_batches = train_batches
        self.evaluate_fn = evaluate_fn
        self.count_tokens = count_tokens
        self.checkpoint_config = (
            dict(checkpoint_config) if checkpoint_config is not None else {"train": config_to_dict(config)}
        )
        self.extra_files = dict(extra_files or {})
        # A device this machine lacks is one line naming the key, not torch's error from inside model.to.
        model.to(DataParallel.launch_device(resolve_device(config.device, name="train.device")))
        self._distributed = DataParallel.from_environment(model, _model_device(model))
        self.device = _model_device(model)
        # "auto" becomes what this device runs fast; config.json says which (_written_config).
        self.config = config = dataclasses.replace(config, precision=resolve_precision(config.precision, self.device))
        if schedule_factory is None and config.time_budget is None:
            # A preset's schedule on data smaller than it was made for (a budget fits it to its plan instead).
            self.config = config = scaled_to_run(config, train_batches)
        # A time budget fixes the run's length after measuring; its schedule follows the plan.
        self._budget = TimeBudget(config, train_batches) if config.time_budget is not None else None
        self._distributed.check_identical("checkpoint_config and extra_files", self._run_fingerprint())

        self._parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
        if not self._parameters:
            raise ValueError("model: expected at least one parameter with requires_grad=True, got none")
        if self._budget is not None and schedule_factory is None and d_model is not None:
            config, schedule_factory = self._budget.schedule(config, d_model)
        self.optimizer, self.scheduler = build_optimization(
            self._parameters,
            config,
            train_batches,
            d_model=d_model,
            optimizer_factory=optimizer_factory,
            schedule_factory=schedule_factory,
        )
        # DDP shares the parameters above (after copying rank 0's values into them).
        self.model = self._distributed.wrap(model)

        # The position: optimizer steps done, epoch in progress, batches of it consumed.
        self.global_step = 0
        self.epoch = 0
        self.batch_index = 0
        # Whether batch_index was carried over from a run of another number of processes.
        self._position_from_other_shards = False
        self.best = BestCheckpoint(config.best_metric, config.best_mode)  # what best/ holds
        self.last_metrics: dict[str, float] = {}
        self._consecutive_nonfinite = 0
        self._window = LossWindow(lr=self.optimizer.param_groups[0]["lr"])
        self._metrics_log = MetricsLog(self.out_dir)
        self._tensorboard: TensorBoardLog | None = None
        if config.tensorboard and self._is_main_process:
            require_tensorboard()  # now, not after the data and the model are built and the first steps
        self._last_checkpoint_step: int | None = None
        self._stop_requests = StopRequests()
        # Random states to apply when fit() starts, not now, so that whatever the caller
        # does between construction and fit() cannot shift them.
        self._pending_rng_state: RandomState | None = None
        self._started = False
        self._resumed = False
        self._said_short_epoch = False  # the warning that an epoch holds fewer batches than a step sums, once
        # For the model card: the training seconds, the step last validated.
        self._card_clock = TrainingClock()
        self._metrics_step: int | None = None
        self._evaluated_step: int | None = None  # the step of the last validation and save
        if self._is_main_process:
            remove_pruned_leftovers(self.out_dir)
        if resume:
            last = self.out_dir / LAST_FOLDER
            self._load_resume_state(last)
            if self._budget is not None:
                self._budget.resume(last, load_checkpoint_config(last), str(last / CONFIG_FILE))
            self._card_clock.resume_from(last)
        # Where reads wait for the device, the per-step checks stay there (device_step_checks.py).
        self._device_checks = (
            DeviceStepChecks(self.device, self._consecutive_nonfinite)
            if checks_stay_on_device(self.device, self.optimizer, self._distributed.active)
            else None
        )

    # -- the seam for DistributedDataParallel ---------------------------------------------

    @property
    def _is_main_process(self) -> bool:
        """Whether this process writes files, logs and shows the progress bar: rank 0."""
        return self._distributed.is_main

    @property
    def _unwrapped_model(self) -> nn.Module:
        return self._distributed.unwrap(self.model)

    def _run_fingerprint(self) -> bytes:
        """What must be identical on every rank: the config and the checkpoint's files."""
        extra = {
            name: content if isinstance(content, str) else content.hex() for name, content in self.extra_files.items()
        }
        return json.dumps([self._written_config(), extra], sort_keys=True, default=str).encode("utf-8")

    # -- public ---------------------------------------------------------------------------

    def fit(self) -> dict[str, Any]:
        """Train until ``config.epochs`` or ``config.max_steps`` is reached; return a summary.

        The summary holds ``steps``, ``epochs_completed``, ``stopped_by`` ("max_steps",
        "epochs" or "time_budget"), ``final_train_loss``, ``final_metrics``, ``best_metric``,
        ``best_value``, ``best_step`` (the step ``best/`` holds), ``wall_seconds`` (this call's),
        ``first_step`` (the step this call started from: 0 unless resumed), ``training_seconds``
        (the run's, earlier sittings included) and, under a time budget, its ``time_budget_plan``.
        ``training.run_summary.summary_lines`` says it in words.
        """
        start_time = time.perf_counter()
        self._card_clock.start()
        if self._pending_rng_state is not None:
            self._pending_rng_state.restore(self.device)
            self._pending_rng_state = None
        elif not self._started:
            seed_all(self.config.seed + self._distributed.rank)
        self._started = True
        if self._is_main_process:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            if self._resumed:
                last = self._metrics_log.truncate_after(self.global_step)
                # A row is written at least every log_every_steps: fewer means rows were deleted or lost.
                every = self.config.log_every_steps or self.global_step
                if (last is None and self.global_step >= every) or (
                    last is not None and last < self.global_step - every
                ):
                    logger.warning(
                        "%s: %s, before the resumed step %d: the rows of the steps between were deleted or lost, "
                        "and the run's curves will have a gap there",
                        self._metrics_log.path,
                        "holds no row (missing or emptied)" if last is None else f"its rows end at step {last}",
                        self.global_step,
                    )
                self._resumed = False
            if self.config.tensorboard:
                # Earlier event files' points after this step are dropped, as their log rows are.
                self._tensorboard = TensorBoardLog(self.out_dir, purge_step=self.global_step + 1)
        try:
            return self._train(start_time)
        except RuntimeError as error:
            if not (self._distributed.active and is_peer_lost(error)):
                raise
            saved = (
                "no checkpoint yet"
                if self._last_checkpoint_step is None
                else f"last/ holds step {self._last_checkpoint_step}"
            )
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ProcessLostError(
                f"rank {self._distributed.rank} of {self._distributed.world_size}: another process of the run stopped "
                f"or lost its connection at step {self.global_step} ({first_line[:200]}); {saved}: run the same "
                "torchrun command with --resume to continue"
            ) from error
        finally:
            if self._tensorboard is not None:
                self._tensorboard.close()
                self._tensorboard = None

    def _train(self, start_time: float) -> dict[str, Any]:
        """The body of :meth:`fit`, once the random states and the logs are ready."""
        first_step = self.global_step
        self._window.restart_clock()
        self.model.train()
        if self.device.type == "cpu":
            logger.info(
                "training on the CPU, %d thread(s), precision %s", torch.get_num_threads(), self.config.precision
            )
        else:
            logger.info("training on %s, precision %s", self.device, self.config.precision)

        if self._budget is not None:
            self._budget.start(self.global_step)
        stopped_by = self._limit_reached()
        # SIGTERM / SIGINT: finish the step in progress, save last/, raise TrainingInterrupted.
        with self._stop_requests:
            while stopped_by is None:
                self._run_epoch()
                stopped_by = self._limit_reached()
            # The closing validation too: a signal during it lets it save last/, then stops the run as
            # after any step (outside, SIGTERM ended the process there and lost every step since the last save).
            if self._last_checkpoint_step != self.global_step:
                self._evaluate_and_save()
            self._stop_if_asked()
        self._read_device_checks()
        wall_seconds = time.perf_counter() - start_time
        logger.info("training stopped (%s) at step %d after %.1f s", stopped_by, self.global_step, wall_seconds)
        return {
            "steps": self.global_step,
            "epochs_completed": self.epoch,
            "stopped_by": stopped_by,
            "final_train_loss": self._window.mean_loss(),
            "final_metrics": dict(self.last_metrics),
            "best_metric": self.config.best_metric,
            "best_value": self.best.value,
            "best_step": self.best.step,
            "wall_seconds": wall_seconds,
            "first_step": first_step,
            "training_seconds": self._card_clock.seconds(),
            **(self._budget.recorded() if self._budget is not None else {}),
        }

    def evaluate(self) -> dict[str, float]:
        """Run ``evaluate_fn`` in eval mode, without gradients, leaving the RNG untouched.

        Runs under the same autocast as training. Returns {} without ``evaluate_fn``.
        """
        if self.evaluate_fn is None:
            return {}
        with eval_mode(self.model), isolated_rng(self.device), torch.no_grad(), self._autocast():
            metrics = self.evaluate_fn(self._unwrapped_model)
        if not isinstance(metrics, Mapping):
            raise ValueError(f"evaluate_fn: expected a dict of metric name -> number, got {type(metrics).__name__}")
        result = {}
        for name, value in metrics.items():
            if isinstance(value, torch.Tensor) and value.numel() == 1:
                value = value.item()
            if not isinstance(name, str) or not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ValueError(f"evaluate_fn: expected a dict of metric name -> number, got {name!r}: {value!r}")
            result[name] = float(value)
        return result

    # -- the loop -------------------------------------------------------------------------

    def _limit_reached(self) -> str | None:
        if self.config.max_steps and self.global_step >= self.config.max_steps:
            return "max_steps"
        if self._budget is not None:
            # The budget replaces epochs; max_steps caps its plan (and its measurement).
            return "time_budget" if self._budget.finished(self.global_step) else None
        if self.config.epochs and self.epoch >= self.config.epochs:
            return "epochs"
        return None

    def _autocast(self) -> contextlib.AbstractContextManager:
        return autocast(self.config.precision, self.device)

    def _run_epoch(self) -> None:
        """Train from the current position to the end of the epoch or to max_steps."""
        batches = self.train_batches(self.epoch)
        try:
            total: int | None = len(batches)  # type: ignore[arg-type]
        except TypeError:
            total = None
        if total is not None:
            self._distributed.check_same_count("train_batches", total)
            if 0 < total < self.config.grad_accum_steps and not self._said_short_epoch:
                # Allowed (an epoch's end closes its group), but said: each step takes fewer batches than asked.
                logger.warning(
                    "train.grad_accum_steps: %d, more than an epoch's %d batches: each optimizer step sums the "
                    "epoch's %d",
                    self.config.grad_accum_steps,
                    total,
                    total,
                )
                self._said_short_epoch = True
        iterator: Iterator[Any]
        if isinstance(batches, Sequence):
            # A sequence (lazy batches collated on access) is entered at the resumed position.
            skipped = min(self.batch_index, len(batches))
            iterator = (batches[position] for position in range(skipped, len(batches)))
        else:
            iterator = iter(batches)
            skipped = sum(1 for _ in itertools.islice(iterator, self.batch_index))
        if skipped != self.batch_index and not self._position_from_other_shards:
            raise ValueError(
                f"train_batches: expected at least {self.batch_index} batches in epoch "
                f"{self.epoch} (the resumed position), got {skipped}; it must give the same "
                "batches for the same epoch every time"
            )
        # A position carried over from another number of processes may pass this list's end.
        self._position_from_other_shards = False
        self.batch_index = skipped
        accumulation = self.config.grad_accum_steps
        group_size = 0
        group_contributed = 0
        bar = tqdm(
            total=total,
            initial=self.batch_index,
            desc=f"epoch {self.epoch}",
            unit="batch",
            leave=False,
            dynamic_ncols=True,
            # None: only on a terminal, as the download bar; a log file gets no "\r" updates.
            disable=None if self.config.progress_bar and self._is_main_process else True,
        )
        try:
            for batch in iterator:
                self.batch_index += 1
                group_size += 1
                # Under DDP only a group's last batch all-reduces the gradients.
                if self._distributed.micro_batch(
                    self.model, group_size == accumulation, lambda: self._forward_backward(batch)
                ):
                    group_contributed += 1
                bar.update(1)
                if group_size < accumulation:
                    continue
                stepped = self._optimizer_step(group_contributed)
                group_size = group_contributed = 0
                if stepped:
                    self._after_step(bar)
                    self._stop_if_asked()
                    if self._limit_reached() is not None:
                        if total is None or self.batch_index < total:
                            return
                        break  # on the epoch's last batch: the epoch is complete (else a resume closed it again)
            if group_size:
                # The epoch ended inside a group: step on what it has.
                if self._optimizer_step(group_contributed):
                    self._after_step(bar)
        finally:
            bar.close()
        self.epoch += 1
        self.batch_index = 0
        logger.info("epoch %d done at step %d", self.epoch, self.global_step)
        # Not twice at one step: the budget's measurement (or, resumed, the save read back) may have just done it.
        if self.config.eval_every_steps == 0 and self._evaluated_step != self.global_step:
            self._evaluate_and_save()

    def _forward_backward(self, batch: Any) -> bool:
        """Add one batch's gradient; False (and nothing added) if its loss is not finite."""
        with self._autocast():
            loss = self.loss_fn(self.model, batch)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
            raise ValueError(f"loss_fn: expected a scalar tensor, got {shape}")
        # The loss of the global batch under DDP (the same on all ranks), else this one's.
        tokens = int(self.count_tokens(batch)) if self.count_tokens is not None else None
        if self._device_checks is not None:
            self._device_checks.add_loss(loss)
            (loss.float().reshape(()) / self.config.grad_accum_steps).backward()
            self._window.add(tokens or 0)
            return True
        batch_loss = self._distributed.reduce_batch_loss(loss, tokens)
        loss_value = batch_loss.value
        if not math.isfinite(loss_value):
            self._window.add(batch_loss.tokens)  # computed, so it counts towards the speed
            self._note_nonfinite(
                f"loss {loss_value} at epoch {self.epoch}, batch {self.batch_index - 1}; " "batch skipped"
            )
            return False
        if batch_loss.weight != 1.0:
            loss = loss * batch_loss.weight  # this rank's share of the global per-token mean
        (loss.float().reshape(()) / self.config.grad_accum_steps).backward()
        self._window.add(batch_loss.tokens, loss_value)
        return True

    def _optimizer_step(self, contributed: int) -> bool:
        """Clip and take one optimizer step on the accumulated gradient; False if skipped."""
        if contributed == 0:
            self.optimizer.zero_grad(set_to_none=True)
            return False
        self._distributed.finish_gradient_sync(self._parameters)
        if contributed < self.config.grad_accum_steps:
            # Each loss was divided by grad_accum_steps; make it a mean over the batches
            # actually summed.
            scale = self.config.grad_accum_steps / contributed
            for parameter in self._parameters:
                if parameter.grad is not None:
                    parameter.grad.mul_(scale)
        # With clipping off, max_norm=inf still gives the norm (for the log and the
        # finiteness check) and multiplies by exactly 1.
        max_norm = self.config.clip_grad_norm if self.config.clip_grad_norm > 0 else math.inf
        norm = torch.nn.utils.clip_grad_norm_(self._parameters, max_norm)
        if self._device_checks is not None:
            # The fused optimizer skips the step on the device where found_inf is 1.
            setattr(self.optimizer, "found_inf", self._device_checks.step_to_skip(norm))
            self._window.lr = self.optimizer.param_groups[0]["lr"]
        else:
            grad_norm = float(norm)
            if not math.isfinite(grad_norm):
                self.optimizer.zero_grad(set_to_none=True)
                self._note_nonfinite(f"gradient norm {grad_norm} at step {self.global_step + 1}; step skipped")
                return False
            self._window.record_step(self.optimizer.param_groups[0]["lr"], grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.global_step += 1
        # Reset only here: a finite loss whose gradient is not finite must still count.
        self._consecutive_nonfinite = 0
        return True

    def _note_nonfinite(self, description: str) -> None:
        self._consecutive_nonfinite += 1
        logger.warning("non-finite %s (%d in a row)", description, self._consecutive_nonfinite)
        if self._consecutive_nonfinite >= self.config.max_nonfinite_steps:
            raise _diverged(self._consecutive_nonfinite, description)

    def _read_device_checks(self) -> None:
        """Bring the device's step figures into the window (one read); warn of skipped steps, stop if diverged."""
        if self._device_checks is None:
            return
        figures = self._device_checks.read()
        self._window.add_losses(figures.loss_sum, figures.loss_count, figures.grad_norm)
        self._consecutive_nonfinite = figures.current_skipped_run
        if not figures.skipped_steps:
            return
        description = f"{figures.skipped_steps} step(s) up to step {self.global_step} skipped on the device"
        logger.warning(
            "non-finite loss or gradient norm: %s (%d in a row at most)", description, figures.longest_skipped_run
        )
        if figures.longest_skipped_run >= self.config.max_nonfinite_steps:
            raise _diverged(figures.longest_skipped_run, description)

    def _after_step(self, bar: tqdm) -> None:
        """Log, evaluate and save as due after optimizer step ``global_step``."""
        step = self.global_step
        # Measured before a logged row closes the window, so the bar shows its speed.
        tokens_per_second = self._window.tokens_per_second()
        if step % self.config.log_every_steps == 0:
            self._read_device_checks()
            line = self._window.close()
            if line is not None:
                self._write_metrics_row(
                    {"event": "train", "step": step, "epoch": self.epoch, **dataclasses.asdict(line)}
                )
        postfix = {"step": step, "lr": f"{self._window.lr:.2e}"}
        loss = self._window.mean_loss()
        if loss is not None:
            postfix["loss"] = f"{loss:.4f}"
        if self.count_tokens is not None:
            postfix["tok/s"] = f"{tokens_per_second:.0f}"
        bar.set_postfix(postfix, refresh=False)
        if self._budget is not None and step % self.config.log_every_steps == 0:
            lateness = self._budget.lateness(step)
            if lateness is not None and self._is_main_process:
                logger.warning("%s", lateness)
        if self._budget is not None and self._distributed.largest(int(self._budget.measurement_over())):
            self._fix_budget_plan()
        elif self.config.eval_every_steps and step % self.config.eval_every_steps == 0:
            self._evaluate_and_save()

    def _stop_if_asked(self) -> None:
        """After an optimizer step: if a stop signal came (on any rank), save last/ and raise TrainingInterrupted."""
        signal_number = self._distributed.largest(self._stop_requests.signal_number or 0)
        if not signal_number:
            return
        if self._last_checkpoint_step != self.global_step:
            # last/ alone: step-N/ folders are evaluations', and a resumed run keeps the same ones.
            self._save_checkpoints(improved=False, step_folder=False)
            self._last_checkpoint_step = self.global_step
        # The exception carries the one line (the command prints it); a log line too would say it twice.
        raise TrainingInterrupted(signal_number, self.global_step, str(self.out_dir / LAST_FOLDER))

    def _write_metrics_row(self, row: dict[str, Any]) -> None:
        if self._is_main_process:
            self._metrics_log.append(row)
            if self._tensorboard is not None:
                self._tensorboard.append(row)

    # -- evaluation and checkpoints -------------------------------------------------------

    def _fix_budget_plan(self) -> None:
        """End the measurement: validate and save (each timed), fix the plan, record it."""
        assert self._budget is not None
        run_on_main = self._distributed.run_on_main
        self._budget.end_measurement(
            self.global_step,
            lambda: run_on_main(self.evaluate),
            self._evaluate_and_save,
            run_on_main,
            self.scheduler,
            self._record_config_again,
        )
        self._window.lr = self.optimizer.param_groups[0]["lr"]

    def _record_config_again(self) -> None:
        """Rewrite ``config.json`` of the checkpoints written at this step (the budget's plan changed since)."""
        if self._is_main_process:
            written = [self.out_dir / LAST_FOLDER, self.out_dir / step_folder_name(self.global_step)]
            if self.best.step == self.global_step:
                written.append(self.out_dir / BEST_FOLDER)
            for folder in written:
                if folder.is_dir():
                    copy_checkpoint(folder, folder, config=self._written_config())
        self._distributed.barrier()

    def _evaluate_and_save(self, metrics: dict[str, float] | None = None) -> None:
        """Validate (unless ``metrics`` are given, already measured), record, save checkpoints."""
        started = time_budget.now()
        if metrics is None:
            metrics = self._distributed.run_on_main(self.evaluate)
        improved = False
        if metrics:
            improved = self.best.offer(metrics, self.global_step)
            self.last_metrics = metrics
            self._metrics_step = self.global_step
            self._write_metrics_row({"event": "eval", "step": self.global_step, "epoch": self.epoch, **metrics})
            logger.info(
                "step %d: %s",
                self.global_step,
                ", ".join(f"{key}={value:.4g}" for key, value in metrics.items()),
            )
        self._evaluated_step = self.global_step  # before the save: its trainer_state.pt records it
        self._save_checkpoints(improved)
        self._last_checkpoint_step = self.global_step
        if self._budget is not None:
            self._budget.note_evaluation(time_budget.now() - started)

    def _save_checkpoints(self, improved: bool, step_folder: bool = True) -> None:
        """Write best/ (if improved), step-N/ (if kept and ``step_folder``) and last/, in that order.

        last/ goes last because resume reads it: a crash before it leaves the previous
        last/, from which the resumed run repeats these steps and rewrites the others.
        The first folder is serialised; the others are hard-linked copies of it. Under DDP
        rank 0 writes, with every rank's random state, while the others wait.
        """
        self._read_device_checks()  # the window's losses go into trainer_state.pt
        rng_by_rank = self._distributed.gather_on_main(RandomState.capture(self.device).to_dict())
        if self._is_main_process:
            self._write_checkpoints(improved, rng_by_rank, step_folder)
        self._distributed.barrier()

    def _write_checkpoints(
        self, improved: bool, rng_by_rank: list[dict[str, Any]] | None, step_folder: bool = True
    ) -> None:
        targets = []
        if improved:
            targets.append(self.out_dir / BEST_FOLDER)
        if self.config.keep_last > 0 and step_folder:
            targets.append(self.out_dir / step_folder_name(self.global_step))
        targets.append(self.out_dir / LAST_FOLDER)
        save_checkpoint(
            targets[0],
            self._unwrapped_model,
            self._written_config(),
            extra_files={**self.extra_files, CARD_FILE: self._model_card()},
            trainer_state=self._trainer_state(rng_by_rank),
        )
        for target in targets[1:]:
            copy_checkpoint(targets[0], target)
        prune_step_checkpoints(self.out_dir, self.config.keep_last)

    def _written_config(self) -> dict[str, Any]:
        """``config.json``: checkpoint_config with the precision that ran for "auto", and the budget's plan."""
        written = dict(self.checkpoint_config)
        train = written.get("train")
        if isinstance(train, Mapping) and train.get("precision") == "auto":
            written["train"] = {**train, "precision": self.config.precision}
        return {**written, **(self._budget.recorded() if self._budget is not None else {})}

    def _model_card(self) -> str:
        """The checkpoint's README.md: what it was trained on, its sizes, time, machine and scores."""
        facts = TrainerFacts(
            parameters=sum(parameter.numel() for parameter in self._unwrapped_model.parameters()),
            step=self.global_step,
            epoch=self.epoch,
            training_seconds=self._card_clock.seconds(),
            validation=self.last_metrics,
            validation_step=self._metrics_step,
        )
        return trainer_card(self._written_config(), facts, self.device)

    def _trainer_state(self, rng_by_rank: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        return TrainerState(
            global_step=self.global_step,
            epoch=self.epoch,
            batch_index=self.batch_index,
            best_metric=self.config.best_metric,
            best_value=self.best.value,
            best_step=self.best.step,
            best_tie_loss=self.best.tie_loss,
            evaluated_step=self._evaluated_step,
            last_metrics=dict(self.last_metrics),
            consecutive_nonfinite=self._consecutive_nonfinite,
            window_loss_sum=self._window.loss_sum,
            window_loss_count=self._window.loss_count,
            last_train_loss=self._window.last_loss,
            optimizer=self.optimizer.state_dict(),
            scheduler=self.scheduler.state_dict(),
            rng=RandomState.capture(self.device),
            train_config=config_to_dict(self.config),
            rng_by_rank=None if rng_by_rank is None else [RandomState.from_dict(rng) for rng in rng_by_rank],
        ).to_dict()

    def _warn_of_later_steps(self, folder: Path) -> None:
        """Say which step checkpoints lie past the step resumed from: another run's future, not this one's."""
        later = [path.name for step, path in step_checkpoints(self.out_dir) if step > self.global_step]
        if later and self._is_main_process:
            # last/ replaced by an earlier checkpoint, or a stop between a step folder's save and last/'s.
            logger.warning(
                "%s: %s past the step resumed from (%d), from the run this one replaces: pruning keeps the newest "
                "step folders and averaging takes them as this run's; move them out of %s unless this run "
                "writes them again",
                folder,
                ", ".join(later),
                self.global_step,
                self.out_dir,
            )

    def _resumed_position(self, state: TrainerState) -> int:
        """The batch of this process's shard to continue the epoch at.

        Shard i of k takes batches i, i + k, ... of the epoch's list (``data/batching.py``), so
        k processes at batch b of their shards have taken the list's first k * b batches; a
        run of another size goes on from there (to within the few batches split to give the
        shards equal counts) rather than from its own shard's batch b.
        """
        saved_processes = len(state.rng_by_rank) if state.rng_by_rank is not None else 1
        processes = self._distributed.world_size
        if saved_processes == processes or state.batch_index == 0:
            return state.batch_index
        taken = state.batch_index * saved_processes
        position = taken // processes
        self._position_from_other_shards = True
        logger.warning(
            "the checkpoint was saved by %d process(es) at batch %d of each shard of epoch %d (%d batches of the "
            "epoch); this run of %d continues at batch %d of its shard, the same place in the epoch to within "
            "%d batch(es)",
            saved_processes,
            state.batch_index,
            state.epoch,
            taken,
            processes,
            position,
            taken - position * processes + saved_processes - 1 + processes - 1,
        )
        return position

    def _load_resume_state(self, folder: Path) -> None:
        if self._is_main_process:
            # A crash between a save's two renames leaves the complete old folder aside; best/'s
            # too, which the next save of best/ alone would restore, and that may never come.
            recover_interrupted_save(folder)
            recover_interrupted_save(self.out_dir / BEST_FOLDER)
        # Everything is checked before anything (weights, optimizer, the metrics log) changes;
        # the model settings first, so that another width is named, not its optimizer shapes.
        check_same_model(folder, self.checkpoint_config.get("model"))
        state = TrainerState.read(folder, self.optimizer, self.scheduler)
        plan = load_checkpoint_config(folder).get(PLAN_KEY) if self._budget is not None else None
        planned = plan.get("total_steps") if isinstance(plan, Mapping) else None
        # A resumed budget run continues its plan: a max_steps beyond it would be read and do nothing.
        further = "resume without --time-budget to train past its plan" if planned else "more to train further"
        if self.config.max_steps and state.global_step > self.config.max_steps:
            # Nothing would train, and the summary would say the run stopped at a max_steps it had passed.
            raise ValueError(
                f"train.max_steps: expected at least the {state.global_step} steps the run in {folder} has taken "
                f"({further}), got {self.config.max_steps}"
            )
        given = self.config.max_steps != state.train_config.get("max_steps")
        if planned and given and self.config.max_steps > planned:
            raise ValueError(
                f"train.max_steps: expected at most the {planned} steps the run's time budget planned (a resumed "
                f"budget run continues its plan), got {self.config.max_steps}; {further}"
            )
        # The same for epochs (a budget replaces them): a position inside an epoch has begun it.
        begun = state.epoch + (1 if state.batch_index else 0)
        # A run its time budget planned, resumed without it: its plan no longer holds.
        dropped_budget = None if self._budget is not None else state.train_config.get("time_budget")
        planned_by = f"the run was planned by its train.time_budget of {dropped_budget}"
        if self._budget is None and self.config.epochs and begun > self.config.epochs:
            raise ValueError(
                f"train.epochs: expected at least the {begun} epoch(s) the run in {folder} has "
                f"{'begun' if state.batch_index else 'completed'} (more to train further), got {self.config.epochs}"
                + (f"; {planned_by}: give it again (--time-budget) to continue its plan" if dropped_budget else "")
            )
        if dropped_budget is not None:
            logger.warning(
                "%s: %s, given no budget now: it trains to its epochs and max_steps instead", folder, planned_by
            )
        load_model_weights(folder, self._unwrapped_model)
        load_optimizer_state(self.optimizer, state.optimizer)
        self.scheduler.load_state_dict(state.scheduler)
        self.global_step = state.global_step
        self.epoch = state.epoch
        self.batch_index = self._resumed_position(state)
        self.last_metrics = dict(state.last_metrics)
        self._consecutive_nonfinite = state.consecutive_nonfinite
        self._window.restore(
            state.window_loss_sum, state.window_loss_count, state.last_train_loss, self.optimizer.param_groups[0]["lr"]
        )
        self.best.restore(state)
        damage = None if self.best.step is None else checkpoint_damage(self.out_dir / BEST_FOLDER)
        if damage is not None:
            # Else the run goes on claiming a best/ it lacks (and evaluate scores last/ in its place).
            logger.warning(
                "%s: the run's best so far (step %d) is gone or damaged (%s): the best starts over at the next "
                "validation, which writes best/ again",
                self.out_dir / BEST_FOLDER,
                self.best.step,
                damage,
            )
            self.best = BestCheckpoint(self.best.metric, self.best.mode)
        changed = state.trajectory_changes(self.config)
        if changed:
            logger.warning(
                "resuming with a changed config, so the run will differ from an " "uninterrupted one: %s",
                "; ".join(changed),
            )
        self._pending_rng_state = self._distributed.rank_state(state.rng, state.rng_by_rank)
        self._last_checkpoint_step = self.global_step
        self._evaluated_step = state.evaluated_step
        self._warn_of_later_steps(folder)
        self._started = True
        self._resumed = True
        logger.info(
            "resumed from %s at step %d (epoch %d, batch %d)",
            folder,
            self.global_step,
            self.epoch,
            self.batch_index,
        )


def _diverged(count: int, description: str) -> TrainingDivergedError:
    return TrainingDivergedError(
        f"training diverged: {count} non-finite losses or gradient norms in a row (the last: {description}). "
        "Lower lr_factor, raise warmup_steps, turn on clip_grad_norm, try precision='fp32', or check the data."
    )
