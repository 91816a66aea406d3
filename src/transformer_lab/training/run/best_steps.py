"""Which of a run's step checkpoints validated best: what ``average-checkpoints --best N`` averages.

A step checkpoint (``step-NNNNNN/``) is written with the evaluation of its step, whose row the
run's ``metrics.jsonl`` holds. The run's own ``train.best_metric`` and ``train.best_mode`` rank
them, a tie going to the lower ``val_loss``, as ``best/`` is chosen (``training.best_checkpoint``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformer_lab.training.best_checkpoint import TIE_BREAK_METRIC
from transformer_lab.training.checkpoint import load_checkpoint_config
from transformer_lab.training.metrics_log import numbered_metrics
from transformer_lab.training.run.run_folder import METRICS_FILE

__all__ = ["ScoredStep", "best_steps"]


@dataclass(frozen=True)
class ScoredStep:
    """A step checkpoint and the value of the run's best metric at its evaluation."""

    step: int
    folder: Path
    value: float


def best_steps(run: Path, steps: Sequence[tuple[int, Path]], count: int, name: str = "best") -> list[ScoredStep]:
    """The ``count`` of ``steps`` ((step, folder), a run's step checkpoints) that validated best, in step order.

    Ranked by the best metric and mode of the newest step's ``config.json``, from the last
    evaluation row of each step in ``run``'s ``metrics.jsonl`` (a resumed run may have logged a
    step twice); a step without a finite value is not ranked. Fewer than ``count`` ranked steps
    is an error starting with ``name`` (the option that asked).
    """
    metric, mode = _best_metric(steps[-1][1])
    rows: dict[int, dict[str, Any]] = {}
    log = run / METRICS_FILE
    if not log.exists() or log.is_dir():
        # The library's reader names its keyword (metrics:); here the option that needs the log is named.
        found = "a folder" if log.is_dir() else "none"
        raise ValueError(
            f"{name}: expected the run's {METRICS_FILE}, which ranks the step checkpoints by {metric}, got {found} at "
            f"{str(log)!r}; --last N averages the last N without it"
        )
    for _, row in numbered_metrics(log):
        if row["event"] == "eval":
            rows[row["step"]] = row
    scored = [
        ScoredStep(step, folder, float(value))
        for step, folder in steps
        if isinstance(value := rows.get(step, {}).get(metric), (int, float)) and math.isfinite(value)
    ]
    if len(scored) < count:
        unscored = len(steps) - len(scored)
        raise ValueError(
            f"{name}: expected at least {count} step checkpoints with a finite {metric} in {run / METRICS_FILE}, "
            f"got {len(scored)} ({unscored} of the {len(steps)} step checkpoints have none: a run without "
            "validation scores none)"
        )

    def rank(scored_step: ScoredStep) -> tuple[float, float]:
        loss = rows[scored_step.step].get(TIE_BREAK_METRIC)
        tie = float(loss) if isinstance(loss, (int, float)) and math.isfinite(loss) else math.inf
        return (-scored_step.value if mode == "max" else scored_step.value, tie)

    return sorted(sorted(scored, key=rank)[:count], key=lambda scored_step: scored_step.step)


def _best_metric(folder: Path) -> tuple[str, str]:
    """(train.best_metric, train.best_mode) of the checkpoint ``folder``'s ``config.json``."""
    train = load_checkpoint_config(folder).get("train")
    metric = train.get("best_metric") if isinstance(train, dict) else None
    mode = train.get("best_mode") if isinstance(train, dict) else None
    if not isinstance(metric, str) or mode not in ("max", "min"):
        raise ValueError(
            f"{folder / 'config.json'}: expected train.best_metric and train.best_mode ('max' or 'min'), "
            f"got {metric!r} and {mode!r}"
        )
    return metric, mode
