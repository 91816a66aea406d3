"""What a resumed run continues from: the Trainer's state, written, read and checked here alone.

:class:`TrainerState` is the one description of ``trainer_state.pt``: the position (step,
epoch, batch), the best value, the open loss window, the optimizer's and schedule's
``state_dict``s and the random states. The Trainer makes one with :meth:`TrainerState.to_dict`
for a save and gets one back from :meth:`TrainerState.read` on resume.

``torch.load(weights_only=True)`` refuses pickled code, but plain data can still be wrong
(a file from another run, an edited one, a tool's bug): a string for a learning rate, a
random state of the right dtype but the wrong size or content, a negative step. Used as
they are, they crash deep inside torch (``RuntimeError: Invalid mt19937 state``, a
``TypeError`` inside Adam), or a negative step truncates ``metrics.jsonl`` to nothing. So
:meth:`TrainerState.read` checks every field against the optimizer and schedule of the run
that will use it, and tries every random state on a scratch generator of its kind, before
anything is changed; a bad field is one ``ValueError`` naming the file, the field, what
was expected and what was given.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import torch
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

from .checkpoint import TRAINER_STATE_FILE, load_trainer_state
from .config import TrainConfig
from .optimization import check_same_optimizer
from .rng_state import RandomState
from .schedule import IMPLEMENTATION_FLAGS

__all__ = ["STATE_FORMAT_VERSION", "TrainerState"]

STATE_FORMAT_VERSION = 1
# Config fields whose change between a run and its resume changes the trajectory. Not
# time_budget: a resumed run keeps its plan, and TimeBudget.resume says so itself.
_TRAJECTORY_FIELDS = (
    "seed",
    "lr_factor",
    "warmup_steps",
    "cooldown_steps",
    "label_smoothing",
    "rdrop_alpha",
    "clip_grad_norm",
    "grad_accum_steps",
    "precision",
)
_REQUIRED_KEYS = ("global_step", "epoch", "batch_index", "optimizer", "scheduler", "rng")
# The random states a checkpoint holds (rng_state.RandomState.to_dict); "cuda" only from a GPU run.
_RANDOM_STATE_KEYS = ("torch", "python", "cuda")
# Hyperparameters and schedule fields that are never negative, whichever optimizer or schedule.
_NON_NEGATIVE = frozenset(
    {
        "lr",
        "initial_lr",
        "eps",
        "weight_decay",
        "momentum",
        "dampening",
        "lr_decay",
        "initial_accumulator_value",
        "base_lrs",
        "_last_lr",
        "last_epoch",
        "_step_count",
        "step",
    }
)
# Moving-average coefficients: [0, 1), or the averages never forget (or diverge).
_UNIT_INTERVAL = frozenset({"betas", "alpha", "beta1", "beta2"})

_PYTHON_STATE = "[version, 625 ints, gauss_next None or a finite float] (random.getstate())"
# fail(field, expected, given) raises the ValueError; NoReturn lets the checks narrow types.
_Fail = Callable[[str, str, Any], NoReturn]


@dataclasses.dataclass
class TrainerState:
    """Everything a run needs to continue exactly where a checkpoint left it.

    Attributes:
        global_step: optimizer steps taken.
        epoch: the epoch in progress (epochs completed).
        batch_index: batches of that epoch consumed.
        best_metric: the metric ``best_value`` is of.
        best_value: the best value of ``best_metric`` so far (None before an evaluation).
        last_metrics: the metrics of the last evaluation.
        consecutive_nonfinite: non-finite losses or gradients in a row so far.
        window_loss_sum, window_loss_count, last_train_loss: the open loss window
            (``loss_window.LossWindow``), so that the next logged row equals an
            uninterrupted run's.
        optimizer: the optimizer's ``state_dict``.
        scheduler: the schedule's ``state_dict``.
        rng: this process's random states (rank 0's under torchrun).
        train_config: the run's ``TrainConfig`` as a dict, to say what changed on resume.
        rng_by_rank: every rank's random states, under torchrun.
        best_step: the step ``best/`` was saved at (None before, or in a state written
            before it was recorded).
        best_tie_loss: ``best/``'s validation loss, which breaks a tie of ``best_value``
            (None where the evaluation has no ``val_loss``, or it was not recorded).
        evaluated_step: the step of the last validation and save (None before one, or not recorded):
            an epoch that ends on that step is not validated again.
    """

    global_step: int
    epoch: int
    batch_index: int
    best_metric: str
    best_value: float | None
    last_metrics: dict[str, float]
    consecutive_nonfinite: int
    window_loss_sum: float
    window_loss_count: int
    last_train_loss: float | None
    optimizer: dict[str, Any]
    scheduler: dict[str, Any]
    rng: RandomState
    train_config: dict[str, Any]
    rng_by_rank: list[RandomState] | None = None
    best_step: int | None = None
    best_tie_loss: float | None = None
    evaluated_step: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The form written to ``trainer_state.pt``: plain tensors, numbers, strings, lists and dicts."""
        state: dict[str, Any] = {"format_version": STATE_FORMAT_VERSION}
        for field in dataclasses.fields(self):
            state[field.name] = getattr(self, field.name)
        state["rng"] = self.rng.to_dict()
        if self.rng_by_rank is None:
            del state["rng_by_rank"]
        else:
            state["rng_by_rank"] = [rng.to_dict() for rng in self.rng_by_rank]
        return state

    def trajectory_changes(self, config: TrainConfig) -> list[str]:
        """``"name: saved -> now"`` for each field of ``config`` that makes the resumed run differ."""
        # A field missing from the saved config is one its version did not have: it ran at the default.
        defaults = {field.name: field.default for field in dataclasses.fields(TrainConfig)}
        saved = {**{name: defaults[name] for name in _TRAJECTORY_FIELDS}, **self.train_config}
        return [
            f"{name}: {saved[name]!r} -> {getattr(config, name)!r}"
            for name in _TRAJECTORY_FIELDS
            if saved[name] != getattr(config, name)
        ]

    @classmethod
    def read(cls, folder: Path, optimizer: Optimizer, scheduler: LRScheduler) -> TrainerState:
        """The state in ``folder/trainer_state.pt``, checked whole against this run's ``optimizer`` and ``scheduler``.

        Raises a ``ValueError`` naming the file and the first bad field; nothing outside
        this function has changed by then.
        """
        file = folder / TRAINER_STATE_FILE
        return cls.from_dict(load_trainer_state(folder, map_location="cpu"), file, optimizer, scheduler)

    @classmethod
    def from_dict(
        cls, state: Mapping[str, Any], file: Path, optimizer: Optimizer, scheduler: LRScheduler
    ) -> TrainerState:
        """Check ``state`` (as :meth:`to_dict` writes it, read from ``file``) and build the TrainerState."""

        def fail(field: str, expected: str, given: Any) -> NoReturn:
            raise ValueError(f"{file}: {field}: expected {expected}, got {_describe(given)}")

        missing = [key for key in _REQUIRED_KEYS if key not in state]
        if missing or state.get("format_version") != STATE_FORMAT_VERSION:
            raise ValueError(
                f"{file}: expected a trainer state of format {STATE_FORMAT_VERSION} with keys {list(_REQUIRED_KEYS)}, "
                f"got format {state.get('format_version')!r} missing {missing}"
            )
        for field in ("global_step", "epoch", "batch_index", "consecutive_nonfinite", "window_loss_count"):
            if field in state and not _is_count(state[field]):
                fail(field, "an int >= 0", state[field])
        window_sum = state.get("window_loss_sum", 0.0)
        if not _is_finite_number(window_sum):
            fail("window_loss_sum", "a finite float", window_sum)
        best_step = state.get("best_step")
        if best_step is not None and not _is_count(best_step):
            fail("best_step", "an int >= 0 or None", best_step)
        evaluated_step = state.get("evaluated_step")
        if evaluated_step is not None and not _is_count(evaluated_step):
            fail("evaluated_step", "an int >= 0 or None", evaluated_step)
        for field in ("best_value", "last_train_loss", "best_tie_loss"):
            value = state.get(field)
            if value is not None and not _is_finite_number(value):
                fail(field, "a finite float or None", value)
        best_metric = state.get("best_metric", "")
        if not isinstance(best_metric, str):
            fail("best_metric", "a metric name (str)", best_metric)
        metrics = state.get("last_metrics", {})
        if not isinstance(metrics, Mapping) or not all(
            isinstance(name, str) and _is_number(value) for name, value in metrics.items()
        ):
            fail("last_metrics", "a mapping of metric names to numbers", metrics)
        train_config = state.get("train_config", {})
        if not isinstance(train_config, Mapping):
            fail("train_config", "a mapping (the run's TrainConfig)", train_config)
        _check_optimizer(state["optimizer"], optimizer, file, fail)
        _check_scheduler(state["scheduler"], scheduler, fail)
        rng = _random_state(state["rng"], "rng", fail)
        by_rank = state.get("rng_by_rank")
        rng_by_rank = None
        if by_rank is not None:
            if not isinstance(by_rank, (list, tuple)) or not by_rank:
                fail("rng_by_rank", "a non-empty list of random states, one per rank", by_rank)
            rng_by_rank = [_random_state(item, f"rng_by_rank[{rank}]", fail) for rank, item in enumerate(by_rank)]
        return cls(
            global_step=state["global_step"],
            epoch=state["epoch"],
            batch_index=state["batch_index"],
            best_metric=best_metric,
            best_value=_float_or_none(state.get("best_value")),
            last_metrics={name: float(value) for name, value in metrics.items()},
            consecutive_nonfinite=state.get("consecutive_nonfinite", 0),
            window_loss_sum=float(window_sum),
            window_loss_count=state.get("window_loss_count", 0),
            last_train_loss=_float_or_none(state.get("last_train_loss")),
            optimizer=dict(state["optimizer"]),
            scheduler=dict(state["scheduler"]),
            rng=rng,
            train_config=dict(train_config),
            rng_by_rank=rng_by_rank,
            best_step=best_step,
            best_tie_loss=_float_or_none(state.get("best_tie_loss")),
            evaluated_step=evaluated_step,
        )


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_finite_number(value: Any) -> bool:
    return _is_number(value) and math.isfinite(value)


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def _random_state(saved: Any, field: str, fail: _Fail) -> RandomState:
    """The random states in ``saved``, each first set on a scratch generator of its kind.

    The scratch generators are the same implementations the run restores into, so what
    they accept restores; the process's own generators are not touched here.
    """
    if not isinstance(saved, Mapping):
        fail(field, "a mapping with the torch and python random states", saved)
    unknown = sorted(str(key) for key in saved if key not in _RANDOM_STATE_KEYS)
    if unknown:
        fail(field, f"only the random states {list(_RANDOM_STATE_KEYS)}", f"the key(s) {unknown}")
    torch_state = saved.get("torch")
    if not (isinstance(torch_state, torch.Tensor) and torch_state.dtype == torch.uint8 and torch_state.dim() == 1):
        fail(f"{field}.torch", "a 1-D uint8 tensor (torch.get_rng_state())", torch_state)
    _try_on_scratch(lambda: torch.Generator().set_state(torch_state), f"{field}.torch", "torch's CPU", fail)
    python_state = saved.get("python")
    if not isinstance(python_state, (list, tuple)):
        fail(f"{field}.python", _PYTHON_STATE, python_state)
    valid = (
        len(python_state) == 3
        and isinstance(python_state[0], int)
        and isinstance(python_state[1], (list, tuple))
        and all(isinstance(word, int) and not isinstance(word, bool) for word in python_state[1])
        and (python_state[2] is None or _is_finite_number(python_state[2]))
    )
    if not valid:
        fail(f"{field}.python", _PYTHON_STATE, python_state)
    version, words, gauss_next = python_state
    _try_on_scratch(
        lambda: random.Random().setstate((version, tuple(words), gauss_next)), f"{field}.python", "Python's", fail
    )
    cuda_state = saved.get("cuda")
    if cuda_state is not None:
        if not (isinstance(cuda_state, torch.Tensor) and cuda_state.dtype == torch.uint8 and cuda_state.dim() == 1):
            fail(f"{field}.cuda", "a 1-D uint8 tensor (torch.cuda.get_rng_state())", cuda_state)
        if torch.cuda.is_available():
            _try_on_scratch(
                lambda: torch.Generator(device="cuda").set_state(cuda_state), f"{field}.cuda", "the CUDA", fail
            )
    return RandomState(torch_state, [version, list(words), gauss_next], cuda_state)


def _try_on_scratch(set_state: Callable[[], Any], field: str, kind: str, fail: _Fail) -> None:
    try:
        set_state()
    except (RuntimeError, ValueError, TypeError, OverflowError) as error:
        fail(field, f"a state {kind} generator accepts ({' '.join(str(error).split())[:120]})", "one it refuses")


def _check_like(saved: Any, current: Any, field: str, name: str, fail: _Fail, none_takes_bool: bool) -> None:
    """Refuse ``saved`` unless it has the type (and, by ``name``, the range) of this run's ``current`` value."""
    if isinstance(current, bool):
        if not isinstance(saved, bool):
            fail(field, "a bool", saved)
    elif current is None:
        if saved is not None and not (none_takes_bool and isinstance(saved, bool)):
            fail(field, "None or a bool" if none_takes_bool else "None", saved)
    elif _is_number(current) or (isinstance(current, torch.Tensor) and current.dim() == 0):
        value = saved.item() if isinstance(saved, torch.Tensor) and saved.dim() == 0 else saved
        if not _is_finite_number(value):
            fail(field, "a finite number", saved)
        if name in _NON_NEGATIVE and value < 0:
            fail(field, "a number >= 0", saved)
        if name in _UNIT_INTERVAL and not 0 <= value < 1:
            fail(field, "a number in [0, 1)", saved)
    elif isinstance(current, (list, tuple)):
        if not isinstance(saved, (list, tuple)) or len(saved) != len(current):
            fail(field, f"a list of {len(current)} item(s)", saved)
        for index, (saved_item, current_item) in enumerate(zip(saved, current)):
            _check_like(saved_item, current_item, f"{field}[{index}]", name, fail, none_takes_bool)
    elif isinstance(current, str):
        if not isinstance(saved, str):
            fail(field, "a str", saved)


def _check_optimizer(saved: Any, optimizer: Optimizer, file: Path, fail: _Fail) -> None:
    if not isinstance(saved, Mapping) or not isinstance(saved.get("state"), Mapping):
        fail("optimizer", "an optimizer state_dict with 'state' and 'param_groups'", saved)
    groups = saved.get("param_groups")
    if not isinstance(groups, (list, tuple)) or len(groups) != len(optimizer.param_groups):
        fail("optimizer.param_groups", f"a list of {len(optimizer.param_groups)} parameter group(s)", groups)
    for index, group in enumerate(groups):
        if not isinstance(group, Mapping):
            fail(f"optimizer.param_groups[{index}]", "a mapping of hyperparameters and 'params'", group)
    # Another kind of optimizer first: its missing hyperparameters would otherwise be named one by one.
    check_same_optimizer(saved, optimizer, file)
    parameters: dict[Any, torch.Tensor] = {}
    for index, (group, current) in enumerate(zip(groups, optimizer.param_groups)):
        where = f"optimizer.param_groups[{index}]"
        ids = group.get("params")
        if (
            not isinstance(ids, (list, tuple))
            or len(ids) != len(current["params"])
            or not all(_is_count(item) for item in ids)
            or len(set(ids)) != len(ids)
            or set(ids) & set(parameters)
        ):
            fail(f"{where}.params", f"{len(current['params'])} distinct parameter ids (ints)", ids)
        parameters.update(zip(ids, current["params"]))
        for name, value in current.items():
            if name == "params":
                continue
            if name in IMPLEMENTATION_FLAGS:
                # The run's own are kept (load_optimizer_state): a CPU run's None beside a GPU run's True is no fault.
                if not (group.get(name) is None or isinstance(group.get(name), bool)):
                    fail(f"{where}.{name}", "None or a bool", group[name])
                continue
            if name not in group:
                # Flags a newer torch added are filled in by the optimizer; numbers never are.
                if isinstance(value, (bool, type(None))):
                    continue
                fail(f"{where}.{name}", f"the hyperparameter {name!r} that {type(optimizer).__name__} uses", "none")
            _check_like(group[name], value, f"{where}.{name}", name, fail, none_takes_bool=True)
    for key, moments in saved["state"].items():
        if key not in parameters:
            fail(f"optimizer.state[{key!r}]", f"the state of one of the parameter ids {sorted(parameters)[:5]}...", key)
        if not isinstance(moments, Mapping):
            fail(f"optimizer.state[{key!r}]", "a mapping of the parameter's moments", moments)
        parameter = parameters[key]
        for name, value in moments.items():
            where = f"optimizer.state[{key!r}].{name}"
            if isinstance(value, torch.Tensor) and value.dim() > 0:
                if value.shape != parameter.shape:
                    fail(where, f"a tensor of the parameter's shape {tuple(parameter.shape)}", value)
                if parameter.is_floating_point() and not value.is_floating_point():
                    fail(where, f"a floating-point tensor like the parameter ({parameter.dtype})", value)
            elif isinstance(value, torch.Tensor) or _is_number(value):
                number = value.item() if isinstance(value, torch.Tensor) else value
                if not _is_finite_number(number) or (name in _NON_NEGATIVE and number < 0):
                    fail(where, "a finite number" + (" >= 0" if name in _NON_NEGATIVE else ""), value)
            elif not isinstance(value, (bool, str, type(None))):
                fail(where, "a tensor or a number", value)


def _check_scheduler(saved: Any, scheduler: LRScheduler, fail: _Fail) -> None:
    current = scheduler.state_dict()
    if not isinstance(saved, Mapping) or not set(current) <= set(saved):
        fail("scheduler", f"a schedule state_dict with the keys {sorted(current)}", saved)
    if not _is_count(saved.get("last_epoch")):
        fail("scheduler.last_epoch", "an int >= 0 (the optimizer steps taken)", saved.get("last_epoch"))
    for name, value in current.items():
        _check_like(saved[name], value, f"scheduler.{name}", name, fail, none_takes_bool=False)
