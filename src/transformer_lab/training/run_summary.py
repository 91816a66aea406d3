"""A finished run's summary (``Trainer.fit``'s dict) in a few lines a person reads at the end of ``train``.

The numbers are rounded to what a reader compares (four significant digits, durations in
hours, minutes and seconds); the dict itself, unrounded, stays what ``fit`` returns and
what ``transformer-lab train --json`` prints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["format_duration", "summary_lines"]


def summary_lines(summary: Mapping[str, Any]) -> list[str]:
    """The run's steps and time, its last losses and metrics, and which step ``best/`` holds and why."""
    epochs = summary.get("epochs_completed", 0)
    steps, first_step = summary["steps"], summary.get("first_step", 0)
    wall = format_duration(summary.get("wall_seconds", 0.0))
    if first_step:
        # A resumed run: this sitting's time is not the run's, which the earlier sittings' make up.
        run_time = summary.get("training_seconds")
        overall = "" if run_time is None else f" in {format_duration(run_time)} in all"
        took = f"{overall}; this sitting trained steps {first_step + 1:,}-{steps:,} in {wall}"
        if first_step >= steps:
            took = f"{overall}; this sitting trained no step (the run had already reached its end)"
    else:
        took = f" in {wall}"
    lines = [
        f"trained {steps:,} steps ({epochs} epoch{'' if epochs == 1 else 's'} completed, "
        f"stopped by {summary.get('stopped_by', '?')}){took}"
    ]
    if summary.get("final_train_loss") is not None:
        lines.append(f"last training loss: {_number(summary['final_train_loss'])}")
    metrics = summary.get("final_metrics") or {}
    if metrics:
        lines.append(f"validation at step {summary['steps']:,}: {_metrics(metrics)}")
    best_value, best_step = summary.get("best_value"), summary.get("best_step")
    if best_value is None:
        lines.append("best/: none (no validation gave a finite value)" if metrics else "best/: none (no validation)")
    else:
        where = "" if best_step is None else f"step {best_step:,}, "
        lines.append(f"best/: {where}{summary['best_metric']} {_number(best_value)}")
    plan = summary.get("time_budget_plan")
    if plan:
        lines.append(f"time budget: {_metrics(plan)}")
    return lines


def format_duration(seconds: float) -> str:
    """``42.3 s``, ``5 min 03 s`` or ``2 h 07 min``: what a reader compares at each scale."""
    if seconds < 59.95:  # what rounds to "60.0 s" reads as a minute
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def _metrics(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{name} {_number(value)}" for name, value in values.items())


def _number(value: Any) -> str:
    # Four significant digits tell a BLEU of 38.34 or a loss of 2.346 apart; 15 digits do not help.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.4g}"
