"""The optimizer and learning-rate schedule of the paper (section 5.3).

The rate rises linearly for ``warmup_steps`` steps, then falls as the inverse square root
of the step:

    lr(step) = factor * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)

Steps are counted from 1: the first optimizer step uses ``lr(1)``. The two branches meet at
``step == warmup_steps``, where the rate peaks at ``factor * (d_model * warmup_steps) ** -0.5``.

An optional cool-down multiplies the last ``cooldown_steps`` steps of a run of
``total_steps`` by a factor that falls linearly towards 0, so that the run ends with small
steps instead of the inverse square root's still sizeable rate: the final weights settle
instead of wandering, which is what a short budget's last checkpoint needs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

from transformer_lab.data._checks import ANY_COUNT, check_int_in_range

__all__ = [
    "build_noam_scheduler",
    "build_optimizer",
    "cooldown_multiplier",
    "fitted_schedule",
    "noam_lr",
    "noam_lrs",
    "scaled_schedule",
]


def _check_within_64_bits(name: str, value: float) -> None:
    """Refuse an int past 64 bits, as a config bounds it: the schedule's float powers of it raise OverflowError."""
    if isinstance(value, int) and value > ANY_COUNT[1]:
        check_int_in_range(name, value, 1, ANY_COUNT[1])


def _check_schedule_arguments(d_model: int, warmup_steps: int, factor: float) -> None:
    if d_model < 1:
        raise ValueError(f"d_model: expected a positive int, got {d_model!r}")
    if warmup_steps < 1:
        raise ValueError(f"warmup_steps: expected a positive int, got {warmup_steps!r}")
    _check_within_64_bits("d_model", d_model)
    _check_within_64_bits("warmup_steps", warmup_steps)
    if not factor > 0.0:
        raise ValueError(f"factor: expected a positive float, got {factor!r}")


def noam_lr(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """The learning rate of optimizer step ``step`` (counted from 1)."""
    _check_schedule_arguments(d_model, warmup_steps, factor)
    if step < 1:
        raise ValueError(f"step: expected an int >= 1 (steps are counted from 1), got {step!r}")
    _check_within_64_bits("step", step)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def noam_lrs(steps: torch.Tensor, d_model: int, warmup_steps: int, factor: float = 1.0) -> torch.Tensor:
    """:func:`noam_lr` of every step of ``steps`` (each >= 1) at once, in float64: a curve of millions of steps.

    Shape:
        steps ``[N]`` -> ``[N]``.
    """
    _check_schedule_arguments(d_model, warmup_steps, factor)
    steps = steps.to(torch.float64)
    if steps.numel() and bool((steps < 1).any()):
        raise ValueError(f"steps: expected steps >= 1 (steps are counted from 1), got {steps.min().item():g}")
    return factor * d_model**-0.5 * torch.minimum(steps**-0.5, steps * warmup_steps**-1.5)


def cooldown_multiplier(step: int, total_steps: int, cooldown_steps: int) -> float:
    """The factor on step ``step``'s rate (from 1): 1 before the cool-down, then linear towards 0.

    Step ``total_steps - cooldown_steps + k`` gets ``1 - k / (cooldown_steps + 1)``, so the
    last step still moves (by ``1 / (cooldown_steps + 1)``); steps past ``total_steps`` keep
    that last factor. ``cooldown_steps == 0`` is no cool-down.
    """
    if cooldown_steps < 0:
        raise ValueError(f"cooldown_steps: expected an int >= 0, got {cooldown_steps!r}")
    if cooldown_steps == 0:
        return 1.0
    if cooldown_steps > total_steps:
        raise ValueError(f"cooldown_steps: expected at most total_steps={total_steps}, got {cooldown_steps!r}")
    into_cooldown = min(step, total_steps) - (total_steps - cooldown_steps)
    if into_cooldown <= 0:
        return 1.0
    return 1.0 - into_cooldown / (cooldown_steps + 1)


def build_optimizer(
    parameters: Iterable[torch.nn.Parameter] | Iterable[dict[str, Any]],
    lr: float = 1.0,
    betas: tuple[float, float] = (0.9, 0.98),
    eps: float = 1e-9,
    weight_decay: float = 0.0,
) -> torch.optim.Adam:
    """Adam with the paper's betas (0.9, 0.98) and eps 1e-9.

    ``lr`` defaults to 1.0 because :func:`build_noam_scheduler` multiplies it by the
    schedule, so that the schedule's value is the learning rate itself. Where every
    parameter is on a CUDA device the update is torch's fused kernel (one launch for all
    parameters instead of several per tensor); the arithmetic is Adam's either way.
    """
    listed: list[Any] = [_listed_group(item) if isinstance(item, dict) else item for item in parameters]
    fused = _all_on_cuda(listed) or None
    return torch.optim.Adam(listed, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, fused=fused)


# How torch's Adam runs its update, not what the update is: a run resumed on another device (CPU -> CUDA) takes
# its own, not the saved ones (a CPU run saves fused=None; a CUDA run builds fused=True).
IMPLEMENTATION_FLAGS = ("fused", "foreach", "capturable", "differentiable")


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """``optimizer.load_state_dict(state)``, keeping the optimizer's own `IMPLEMENTATION_FLAGS` in every group.

    Loaded as saved, a CPU run's ``fused=None`` beside the fused optimizer a CUDA run builds leaves an
    optimizer that says it skips steps on the device (``found_inf``) yet runs the unfused update, which refuses it.
    """
    own = [{name: group[name] for name in IMPLEMENTATION_FLAGS if name in group} for group in optimizer.param_groups]
    optimizer.load_state_dict(state)  # moves the moments onto each parameter's device
    for group, flags in zip(optimizer.param_groups, own):
        group.update(flags)


def _listed_group(group: dict[str, Any]) -> dict[str, Any]:
    """A parameter group whose ``params`` is a list, so it can be read here and again by Adam."""
    params = group["params"]
    return {**group, "params": [params] if isinstance(params, torch.Tensor) else list(params)}


def _all_on_cuda(parameters: list[Any]) -> bool:
    """Whether there are parameters and all are floating-point CUDA tensors (groups' ``params`` included)."""
    tensors: list[torch.Tensor] = []
    for item in parameters:
        tensors.extend(item["params"] if isinstance(item, dict) else [item])
    return bool(tensors) and all(tensor.is_cuda and tensor.is_floating_point() for tensor in tensors)


def build_noam_scheduler(
    optimizer: torch.optim.Optimizer,
    d_model: int,
    warmup_steps: int,
    factor: float = 1.0,
    *,
    total_steps: int = 0,
    cooldown_steps: int = 0,
) -> torch.optim.lr_scheduler.LambdaLR:
    """A ``LambdaLR`` whose learning rate at optimizer step ``k`` (from 1) is ``noam_lr(k)``,
    times ``cooldown_multiplier(k, total_steps, cooldown_steps)``.

    Sets every parameter group's base learning rate to 1.0, since ``LambdaLR`` multiplies
    the base rate by the lambda. Call ``scheduler.step()`` after each ``optimizer.step()``.
    """
    _check_schedule_arguments(d_model, warmup_steps, factor)
    cooldown_multiplier(1, total_steps, cooldown_steps)  # checks the arguments now, not mid-run
    for group in optimizer.param_groups:
        group["lr"] = 1.0
        group["initial_lr"] = 1.0

    def schedule(completed_steps: int) -> float:
        # LambdaLR passes the number of scheduler.step() calls so far (0 at construction),
        # which is the number of optimizer steps done; the next step is one more.
        step = completed_steps + 1
        return noam_lr(step, d_model, warmup_steps, factor) * cooldown_multiplier(step, total_steps, cooldown_steps)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)


def fitted_schedule(
    total_steps: int,
    configured_steps: int,
    done_steps: int,
    warmup_steps: int,
    cooldown_steps: int,
    lr_factor: float,
) -> tuple[int, int, float]:
    """(warm-up, cool-down, factor) of the configured schedule fitted to a shorter run of ``total_steps``.

    The warm-up and the factor stay as configured, so that every step before the cool-down
    takes the rate the configured run would give it; a run shorter than configured scales
    its cool-down by ``total_steps / configured_steps``, so that it still ends on a linear
    decay. The cool-down never reaches back into the warm-up (a run that ends while still
    warming up gets none: decaying a rate that has not peaked cost 2.8 BLEU at 600 of the
    translation preset's 3,944 steps) nor into the ``done_steps`` already taken.
    """
    scale = min(1.0, total_steps / configured_steps) if configured_steps > 0 else 1.0
    after_warmup = max(total_steps - max(warmup_steps, done_steps), 0)
    cooldown = min(round(cooldown_steps * scale), after_warmup)
    return warmup_steps, cooldown, lr_factor


def scaled_schedule(run_steps: int, warmup_steps: int, cooldown_steps: int, lr_factor: float) -> tuple[int, int, float]:
    """(warm-up, cool-down, factor) of the schedule compressed in time to a run of ``run_steps`` too short for it.

    A run is too short when its warm-up and cool-down would take more than half of it (the
    presets' take 41% of the translation run and 27% of the couplet run they were tuned on).
    Both are then scaled by ``r = run_steps / (2 * (warmup_steps + cooldown_steps))`` and the
    factor by ``sqrt(r)``: the rate at step ``s`` is the configured rate at step ``s / r``, so
    the run peaks at the configured peak and ends on the configured share of cool-down. Unlike
    :func:`fitted_schedule` (the configured run stopped early, whose warm-up must stay), this
    is a whole run whose data is smaller than the schedule was made for. A run long enough
    keeps the schedule as it is.
    """
    if run_steps < 1:
        raise ValueError(f"run_steps: expected an int >= 1, got {run_steps!r}")
    needed = 2 * (warmup_steps + cooldown_steps)
    if run_steps >= needed:
        return warmup_steps, cooldown_steps, lr_factor
    ratio = run_steps / needed
    warmup = max(1, round(warmup_steps * ratio))
    cooldown = min(round(cooldown_steps * ratio), run_steps - warmup)
    # The peak factor * (d_model * warmup) ** -0.5 stays where the warm-up's rounding puts it.
    return warmup, max(cooldown, 0), lr_factor * math.sqrt(warmup / warmup_steps)
