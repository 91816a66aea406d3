"""What one ``"train"`` row of ``metrics.jsonl`` summarises: the batches since the last row.

The trainer adds every batch's loss and tokens and every optimizer step's learning rate
and gradient norm; every ``log_every_steps`` steps it closes the window into a row and a
new window starts. The row's loss is the mean of the per-batch losses (each already a mean
over its tokens), its speed the tokens over the seconds since the window opened.
"""

from __future__ import annotations

import dataclasses
import time

__all__ = ["LossWindow", "WindowSummary"]


@dataclasses.dataclass(frozen=True)
class WindowSummary:
    """One logged line: the fields of a ``"train"`` row besides ``event``, ``step`` and ``epoch``."""

    train_loss: float
    lr: float
    grad_norm: float | None
    tokens_per_second: float


@dataclasses.dataclass
class LossWindow:
    """The losses, tokens and time since the last logged line, and the last step's figures.

    ``loss_sum``, ``loss_count`` and ``last_loss`` go into the checkpoint, so that a
    resumed run logs the same rows as an uninterrupted one; the tokens and the clock do
    not (a resumed run's speed is its own).

    Attributes:
        loss_sum: the sum of the finite per-batch losses in the window.
        loss_count: how many losses ``loss_sum`` holds.
        tokens: the tokens of the window's batches, skipped ones included (they were
            computed, so they count towards the speed).
        started_at: ``time.perf_counter()`` when the window opened.
        lr: the learning rate the last optimizer step used.
        grad_norm: the gradient norm of the last optimizer step (None before the first).
        last_loss: the mean loss of the last closed window (None before the first).
    """

    loss_sum: float = 0.0
    loss_count: int = 0
    tokens: int = 0
    started_at: float = dataclasses.field(default_factory=time.perf_counter)
    lr: float = 0.0
    grad_norm: float | None = None
    last_loss: float | None = None

    def add(self, tokens: int, loss: float | None = None) -> None:
        """Count one batch: its ``tokens``, and its ``loss`` unless it was skipped (None)."""
        self.tokens += tokens
        if loss is not None:
            self.loss_sum += loss
            self.loss_count += 1

    def add_losses(self, loss_sum: float, loss_count: int, grad_norm: float | None) -> None:
        """Count ``loss_count`` finite losses summing to ``loss_sum`` at once (read from the device),
        and the gradient norm of the last step taken among them (None: none taken)."""
        self.loss_sum += loss_sum
        self.loss_count += loss_count
        if grad_norm is not None:
            self.grad_norm = grad_norm

    def record_step(self, lr: float, grad_norm: float) -> None:
        """Keep the learning rate and gradient norm of the optimizer step being taken."""
        self.lr = lr
        self.grad_norm = grad_norm

    def mean_loss(self) -> float | None:
        """The mean loss of the window so far, or of the last closed one if it holds none yet."""
        if self.loss_count:
            return self.loss_sum / self.loss_count
        return self.last_loss

    def tokens_per_second(self, now: float | None = None) -> float:
        """The window's tokens over the seconds since it opened (0.0 if no time has passed)."""
        elapsed = (time.perf_counter() if now is None else now) - self.started_at
        return self.tokens / elapsed if elapsed > 0 else 0.0

    def summary(self, now: float | None = None) -> WindowSummary | None:
        """The line this window would log now; None if it holds no loss (nothing to log)."""
        if self.loss_count == 0:
            return None
        return WindowSummary(
            train_loss=self.loss_sum / self.loss_count,
            lr=self.lr,
            grad_norm=self.grad_norm,
            tokens_per_second=self.tokens_per_second(now),
        )

    def close(self, now: float | None = None) -> WindowSummary | None:
        """Return :meth:`summary` and start a new window, keeping its loss as ``last_loss``.

        A window without a loss stays open (returns None), so its tokens and time count
        towards the next line.
        """
        line = self.summary(now)
        if line is not None:
            self.last_loss = line.train_loss
            self.reset(now)
        return line

    def restore(self, loss_sum: float, loss_count: int, last_loss: float | None, lr: float) -> None:
        """Reopen the window a checkpoint saved (``TrainerState``), with the optimizer's current ``lr``."""
        self.loss_sum, self.loss_count, self.last_loss, self.lr = loss_sum, loss_count, last_loss, lr

    def reset(self, now: float | None = None) -> None:
        """Empty the window and restart its clock; the last step's figures and ``last_loss`` stay."""
        self.loss_sum = 0.0
        self.loss_count = 0
        self.restart_clock(now)

    def restart_clock(self, now: float | None = None) -> None:
        """Drop the tokens and restart the clock, keeping the losses (a resumed window's)."""
        self.tokens = 0
        self.started_at = time.perf_counter() if now is None else now
