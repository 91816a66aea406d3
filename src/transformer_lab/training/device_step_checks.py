"""A training step's loss and gradient checks kept on the device, read once every few steps.

Where reading a value waits for the device (:mod:`transformer_lab.nn.host_reads`), checking
each batch's loss and each step's gradient norm on the host stalls every step twice. The
Trainer keeps them here instead, when it trains in one process with an optimizer that can
skip a step on the device (torch's fused Adam takes a ``found_inf`` flag, as under a
``GradScaler``), and reads them once per logged row, before a checkpoint and at the end:

- a batch's loss joins the window's sum only where it is finite, and a group of batches
  with a non-finite loss or gradient norm is skipped on the device (parameters, Adam's
  moments and its step count untouched); the schedule and ``max_steps`` still count the
  step, since the host learns of it only later;
- the skipped steps are warned about when read, and a run of ``max_nonfinite_steps`` in a
  row stops training then, up to ``log_every_steps`` steps after it happened.

On the CPU reads are free and the Trainer checks on the host: a skipped batch takes no
step at all there.
"""

from __future__ import annotations

import dataclasses

import torch
from torch.optim import Optimizer

from ..nn import host_reads

__all__ = ["DeviceStepChecks", "StepFigures", "checks_stay_on_device"]


def checks_stay_on_device(device: torch.device, optimizer: Optimizer, distributed: bool) -> bool:
    """Whether a Trainer on ``device`` keeps its checks there: reads wait, one process, a skipping optimizer."""
    return (
        host_reads.host_reads_wait(device)
        and not distributed
        and bool(getattr(optimizer, "_step_supports_amp_scaling", False))
        # Only the fused update reads found_inf; torch's others refuse it.
        and all(group.get("fused") for group in optimizer.param_groups)
    )


@dataclasses.dataclass(frozen=True)
class StepFigures:
    """What one read brings back: the figures since the previous read."""

    loss_sum: float
    loss_count: int
    # The gradient norm of the last step taken (None: none taken since the previous read).
    grad_norm: float | None
    skipped_steps: int
    # The longest run of skipped steps in a row seen, counting those before the previous read.
    longest_skipped_run: int
    # The run of skipped steps the last step ends (0 if it was taken).
    current_skipped_run: int


class DeviceStepChecks:
    """Sums of the losses, the last gradient norm and the skipped steps, as device tensors."""

    def __init__(self, device: torch.device, skipped_run: int = 0) -> None:
        def zero(dtype: torch.dtype) -> torch.Tensor:
            return torch.zeros((), dtype=dtype, device=device)

        self._loss_sum = zero(torch.float64)
        self._loss_count = zero(torch.int64)
        self._group_nonfinite = zero(torch.bool)  # a non-finite loss in the group being accumulated
        self._grad_norm = zero(torch.float64)
        self._steps = zero(torch.int64)
        self._skipped = zero(torch.int64)
        # A resumed run continues the run of skipped steps its checkpoint ended on.
        self._current_run = torch.full((), skipped_run, dtype=torch.int64, device=device)
        self._longest_run = self._current_run.clone()

    def add_loss(self, loss: torch.Tensor) -> None:
        """Count one batch's loss (a one-element tensor) if finite, and remember for its group if not."""
        value = loss.detach().reshape(()).double()
        finite = torch.isfinite(value)
        self._loss_sum += torch.where(finite, value, torch.zeros_like(value))
        self._loss_count += finite
        self._group_nonfinite |= ~finite

    def step_to_skip(self, grad_norm: torch.Tensor) -> torch.Tensor:
        """Record a step's gradient norm; 1.0 where the step is to be skipped, else 0.0 (Adam's ``found_inf``)."""
        skip = ~torch.isfinite(grad_norm.detach().reshape(())) | self._group_nonfinite
        # The norm of the last step taken, as the host's checks log it.
        self._grad_norm = torch.where(skip, self._grad_norm, grad_norm.detach().reshape(()).double())
        self._group_nonfinite = torch.zeros_like(self._group_nonfinite)
        self._steps += 1
        self._skipped += skip
        self._current_run = (self._current_run + 1) * skip
        self._longest_run = torch.maximum(self._longest_run, self._current_run)
        return skip.float()

    def read(self) -> StepFigures:
        """The figures since the previous read, in one read of the device; the sums start again."""
        (loss_sum, loss_count, grad_norm, steps, skipped, longest, current) = torch.stack(
            [
                self._loss_sum,
                self._loss_count.double(),
                self._grad_norm,
                self._steps.double(),
                self._skipped.double(),
                self._longest_run.double(),
                self._current_run.double(),
            ]
        ).tolist()
        for total in (self._loss_sum, self._loss_count, self._steps, self._skipped):
            total.zero_()
        self._longest_run = self._current_run.clone()
        return StepFigures(
            loss_sum=loss_sum,
            loss_count=int(loss_count),
            grad_norm=grad_norm if steps > skipped else None,
            skipped_steps=int(skipped),
            longest_skipped_run=int(longest),
            current_skipped_run=int(current),
        )
