"""Which evaluation ``best/`` holds: the best ``best_metric`` so far, a tie going to the lower ``val_loss``.

A tie goes to the lower validation loss because a short run's BLEU or exact match often
stays 0 over several evaluations while the loss falls, and the first of them is the worse
model. A non-finite value never becomes the best.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping

from .trainer_state import TrainerState

__all__ = ["TIE_BREAK_METRIC", "BestCheckpoint"]

logger = logging.getLogger(__name__)

# Breaks a tie of best_metric (lower wins) where the evaluation reports it.
TIE_BREAK_METRIC = "val_loss"


@dataclasses.dataclass
class BestCheckpoint:
    """The best value of ``metric`` (``mode`` "min" or "max"), the step it came at and its ``val_loss``."""

    metric: str
    mode: str
    value: float | None = None
    step: int | None = None
    tie_loss: float | None = None

    def offer(self, metrics: Mapping[str, float], step: int) -> bool:
        """Take ``metrics`` of ``step`` as the best if they beat it; whether they did."""
        if self.metric not in metrics:
            raise ValueError(
                f"best_metric: expected one of evaluate_fn's metrics {sorted(metrics)}, got {self.metric!r}"
            )
        value = metrics[self.metric]
        tie_loss = metrics.get(TIE_BREAK_METRIC) if self.metric != TIE_BREAK_METRIC else None
        if not (math.isfinite(value) and self._beaten_by(value, tie_loss)):
            return False
        self.value, self.step, self.tie_loss = value, step, tie_loss
        return True

    def _beaten_by(self, value: float, tie_loss: float | None) -> bool:
        best = self.value
        if best is None:
            return True
        if value != best:
            return value < best if self.mode == "min" else value > best
        best_loss = self.tie_loss
        return tie_loss is not None and best_loss is not None and math.isfinite(tie_loss) and tie_loss < best_loss

    def restore(self, state: TrainerState) -> None:
        """Continue the best of a resumed ``state``; one of another metric starts over (with a warning)."""
        if state.best_metric != self.metric:
            logger.warning(
                "best_metric changed from %r to %r since the checkpoint; best/ starts over",
                state.best_metric,
                self.metric,
            )
            return
        self.value, self.step, self.tie_loss = state.best_value, state.best_step, state.best_tie_loss
