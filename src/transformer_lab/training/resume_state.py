"""Checking a ``trainer_state.pt`` before a resume uses any of it.

``load_trainer_state`` refuses pickled code, but plain data can still have the wrong
structure (a file from another run, an edited one, a tool's bug): an empty optimizer
state, a string where the random state goes, a negative step. Used as they are, they
crash deep inside torch with a ``KeyError`` or ``RuntimeError``, or worse, a negative step
truncates ``metrics.jsonl`` to nothing. :func:`check_trainer_state` checks every field a
resume reads, against the optimizer and schedule of the run that will use them, and
raises one ``ValueError`` naming the file, the field, what was expected and what was
given, before anything is changed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Mapping, NoReturn

import torch

# Python's Mersenne Twister state: 624 words and the position.
_PYTHON_STATE_WORDS = 625

# fail(field, expected, given) raises the ValueError; NoReturn lets the checks narrow types.
_Fail = Callable[[str, str, Any], NoReturn]


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_rng(rng: Any, field: str, fail: _Fail) -> None:
    if not isinstance(rng, Mapping):
        fail(field, "a mapping with the torch and python random states", rng)
    torch_state = rng.get("torch")
    if not (isinstance(torch_state, torch.Tensor) and torch_state.dtype == torch.uint8 and torch_state.dim() == 1):
        fail(f"{field}.torch", "a 1-D uint8 tensor (torch.get_rng_state())", torch_state)
    python_state = rng.get("python")
    valid = (
        isinstance(python_state, (list, tuple))
        and len(python_state) == 3
        and isinstance(python_state[0], int)
        and isinstance(python_state[1], (list, tuple))
        and len(python_state[1]) == _PYTHON_STATE_WORDS
        and all(isinstance(word, int) and not isinstance(word, bool) for word in python_state[1])
        and (python_state[2] is None or isinstance(python_state[2], float))
    )
    if not valid:
        fail(f"{field}.python", f"[version, {_PYTHON_STATE_WORDS} ints, gauss_next] (random.getstate())", python_state)
    if "cuda" in rng and not isinstance(rng["cuda"], torch.Tensor):
        fail(f"{field}.cuda", "a uint8 tensor (torch.cuda.get_rng_state())", rng["cuda"])


def _check_optimizer(saved: Any, optimizer: torch.optim.Optimizer, fail: _Fail) -> None:
    if not isinstance(saved, Mapping) or not isinstance(saved.get("state"), Mapping):
        fail("optimizer", "an optimizer state_dict with 'state' and 'param_groups'", saved)
    groups = saved.get("param_groups")
    if not isinstance(groups, (list, tuple)) or len(groups) != len(optimizer.param_groups):
        fail("optimizer.param_groups", f"a list of {len(optimizer.param_groups)} parameter group(s)", groups)
    shapes: dict[Any, torch.Size] = {}
    for index, (group, current) in enumerate(zip(groups, optimizer.param_groups)):
        params = group.get("params") if isinstance(group, Mapping) else None
        if not isinstance(params, (list, tuple)) or len(params) != len(current["params"]):
            fail(f"optimizer.param_groups[{index}].params", f"{len(current['params'])} parameter ids", params)
        shapes.update(zip(params, (parameter.shape for parameter in current["params"])))
    for key, moments in saved["state"].items():
        if key not in shapes:
            fail(f"optimizer.state[{key!r}]", f"the state of one of the parameter ids {sorted(shapes)[:5]}...", key)
        if not isinstance(moments, Mapping):
            fail(f"optimizer.state[{key!r}]", "a mapping of the parameter's moments", moments)
        for name, value in moments.items():
            if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape != shapes[key]:
                fail(
                    f"optimizer.state[{key!r}].{name}", f"a tensor of the parameter's shape {tuple(shapes[key])}", value
                )


def check_trainer_state(
    state: Mapping[str, Any],
    file: Path,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
) -> None:
    """Raise a ``ValueError`` naming ``file`` and the field unless ``state`` fits this run's optimizer and schedule."""

    def fail(field: str, expected: str, given: Any) -> NoReturn:
        raise ValueError(f"{file}: {field}: expected {expected}, got {_describe(given)}")

    for field in ("global_step", "epoch", "batch_index"):
        if not _is_count(state.get(field)):
            fail(field, "an int >= 0", state.get(field))
    for field in ("consecutive_nonfinite", "window_loss_count"):
        if field in state and not _is_count(state[field]):
            fail(field, "an int >= 0", state[field])
    window_sum = state.get("window_loss_sum", 0.0)
    if not isinstance(window_sum, (int, float)) or isinstance(window_sum, bool) or not math.isfinite(window_sum):
        fail("window_loss_sum", "a finite float", window_sum)
    for field in ("best_value", "last_train_loss"):
        value = state.get(field)
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
            fail(field, "a float or None", value)
    metrics = state.get("last_metrics", {})
    if not isinstance(metrics, Mapping) or not all(
        isinstance(name, str) and isinstance(value, (int, float)) and not isinstance(value, bool)
        for name, value in metrics.items()
    ):
        fail("last_metrics", "a mapping of metric names to numbers", metrics)
    _check_optimizer(state.get("optimizer"), optimizer, fail)
    schedule = state.get("scheduler")
    expected_keys = set(scheduler.state_dict())
    if not isinstance(schedule, Mapping) or not expected_keys <= set(schedule):
        fail("scheduler", f"a schedule state_dict with the keys {sorted(expected_keys)}", schedule)
    if not _is_count(schedule.get("last_epoch")):
        fail("scheduler.last_epoch", "an int >= 0 (the optimizer steps taken)", schedule.get("last_epoch"))
    _check_rng(state.get("rng"), "rng", fail)
    by_rank = state.get("rng_by_rank")
    if by_rank is not None:
        if not isinstance(by_rank, (list, tuple)):
            fail("rng_by_rank", "a list of random states, one per rank", by_rank)
        for rank, rng in enumerate(by_rank):
            _check_rng(rng, f"rng_by_rank[{rank}]", fail)
