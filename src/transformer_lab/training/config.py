"""The training configuration: how long, how fast, how often to evaluate and save.

`TaskConfig` is what a task's whole config holds around it. Batch sizes and token budgets are
not here: the data package owns them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Literal, Protocol

import torch

from transformer_lab.data._checks import ANY_COUNT, SEED_RANGE, check_int_in_range
from transformer_lab.hardware import PRECISIONS

from .durations import check_budget
from .rdrop import check_alpha

__all__ = ["TaskConfig", "TrainConfig"]


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Hyperparameters of :class:`~transformer_lab.training.Trainer`.

    Frozen so that a config written into a checkpoint is the one that ran; change it with
    ``dataclasses.replace`` or :func:`~transformer_lab.training.apply_overrides`.
    """

    # Seeds torch's and Python's random generators at the start of a fresh run.
    seed: int = 0
    # Passes over the training data; 0 = no limit (then max_steps must be set).
    epochs: int = 10
    # Optimizer steps before stopping, whichever of epochs/max_steps comes first; 0 = no limit.
    max_steps: int = 0
    # Multiplies the Noam schedule (the paper uses 1.0 with d_model=512, warmup 4000).
    lr_factor: float = 1.0
    # Optimizer steps of linear warm-up before the inverse-square-root decay.
    warmup_steps: int = 4000
    # The run's last this many optimizer steps scale the rate linearly down towards 0
    # (0 = none). The run's length is max_steps, else epochs x the batches of epoch 0.
    cooldown_steps: int = 0
    # Scale warm-up and cool-down (and lr_factor, keeping the peak rate) to a run whose epochs
    # are too short for them, one where they would take over half of it (schedule.scaled_schedule);
    # False: the run takes them as set. The presets set it; a command given train.warmup_steps
    # or train.cooldown_steps turns it off.
    fit_schedule_to_run: bool = False
    # Probability mass spread over the wrong classes (paper: 0.1); read by the tasks' losses.
    label_smoothing: float = 0.1
    # R-Drop (Liang et al. 2021): each batch runs twice under different dropout, and the loss
    # adds this times the two outputs' symmetric KL divergence (rdrop.py); 0 = off. Costs a
    # second forward and backward per batch, and needs model.dropout > 0.
    rdrop_alpha: float = 0.0
    # Maximum global gradient norm; 0 = no clipping.
    clip_grad_norm: float = 1.0
    # Batches whose gradients are summed into one optimizer step (each loss divided by it).
    grad_accum_steps: int = 1
    # "bf16" runs forward and loss under torch.autocast(bfloat16); weights stay float32.
    # "auto" is bf16 where the device has fast bf16 matrix products, else fp32 (see
    # transformer_lab.hardware); the Trainer resolves it and checkpoints record the result.
    precision: Literal["auto", "fp32", "bf16"] = "fp32"
    # Evaluate and save a checkpoint every this many optimizer steps; 0 = at each epoch end.
    eval_every_steps: int = 0
    # Step checkpoints (step-000123/) kept besides last/ and best/; 0 = none.
    keep_last: int = 2
    # The evaluation metric that decides best/ (a key of evaluate_fn's result).
    best_metric: str = "val_loss"
    # Whether a smaller ("min") or larger ("max") best_metric is better.
    best_mode: Literal["min", "max"] = "min"
    # Write a training row to metrics.jsonl every this many optimizer steps.
    log_every_steps: int = 50
    # Show a tqdm progress bar where stderr is a terminal (never in a file or a pipe).
    progress_bar: bool = True
    # Where the model trains: "cpu", "cuda", "cuda:1", ... (the Trainer moves it there;
    # under torchrun "cuda" becomes each process's cuda:LOCAL_RANK).
    device: str = "cpu"
    # A batch with a non-finite loss, or a step with a non-finite gradient norm, is skipped
    # (no optimizer or schedule step) with a warning; this many in a row stop training.
    max_nonfinite_steps: int = 5
    # Train to a wall-clock budget ("90m", "1h30m", "5400s", or seconds) instead of epochs
    # (max_steps still caps it): the run measures its speed, then fixes its steps (time_budget.py).
    time_budget: str | float | None = None
    # Also write metrics.jsonl's scalars as TensorBoard event files in out_dir/tensorboard/
    # (needs the tensorboard extra).
    tensorboard: bool = False

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision: expected one of {PRECISIONS}, got {self.precision!r}")
        if self.best_mode not in ("min", "max"):
            raise ValueError(f"best_mode: expected 'min' or 'max', got {self.best_mode!r}")
        for name in ("epochs", "max_steps", "eval_every_steps", "keep_last", "cooldown_steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name}: expected an int >= 0, got {value!r}")
            # Past a 64-bit count the schedule's and the loss's float arithmetic overflows.
            check_int_in_range(name, value, 0, ANY_COUNT[1])
        check_int_in_range("seed", self.seed, *SEED_RANGE)
        for name in ("warmup_steps", "grad_accum_steps", "log_every_steps", "max_nonfinite_steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}: expected an int >= 1, got {value!r}")
            check_int_in_range(name, value, 1, ANY_COUNT[1])
        # A time budget bounds the run by itself: with it, both may be 0 (the preset's cap lifted).
        if self.epochs == 0 and self.max_steps == 0 and self.time_budget is None:
            raise ValueError(
                "epochs, max_steps: expected at least one of them > 0 (0 means no limit), or a time_budget, got both 0"
            )
        if not 0.0 < self.lr_factor < math.inf:
            raise ValueError(f"lr_factor: expected a finite float > 0, got {self.lr_factor!r}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing: expected a float in [0, 1), got {self.label_smoothing!r}")
        check_alpha(self.rdrop_alpha, "rdrop_alpha")
        if not 0.0 <= self.clip_grad_norm < math.inf:
            raise ValueError(f"clip_grad_norm: expected a finite float >= 0 (0 = off), got {self.clip_grad_norm!r}")
        try:
            torch.device(self.device)
        except (RuntimeError, TypeError) as error:
            raise ValueError(
                f"device: expected a torch device such as 'cpu' or 'cuda:0', got {self.device!r}"
            ) from error
        if self.time_budget is not None:
            check_budget(self.time_budget, "time_budget")
        if not self.best_metric:
            raise ValueError(f"best_metric: expected a metric name, got {self.best_metric!r}")


class TaskConfig(Protocol):
    """What every task's config is: a dataclass with ``model``, ``data`` and ``train`` sections."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    @property
    def model(self) -> Any: ...

    @property
    def data(self) -> Any: ...

    @property
    def train(self) -> TrainConfig: ...
