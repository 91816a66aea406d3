"""The translation preset's learning rate when a budget or ``max_steps`` cuts it to P steps, before and now.

Before, a short run shrank the warm-up and the cool-down by ``P / L`` and lowered
``lr_factor`` by the square root of it, so that the peak stayed the preset's: the peak came
early and the rate then fell as ``(warm-up / step) ** 0.5`` for the rest of the run. Now
the run keeps the preset's warm-up and peak and scales only its cool-down, never into the
warm-up (``training.time_budget.fitted_schedule``). One panel per length, the preset's own
3,944 steps last.

    .venv/bin/python benchmarks/plot_budget_schedules.py --out docs/figures/budget-schedules.png
"""

from __future__ import annotations

import argparse
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from transformer_lab.lab.plotting import save_png  # noqa: E402
from transformer_lab.training.schedule import (  # noqa: E402
    cooldown_multiplier,
    fitted_schedule,  # noqa: E402
    noam_lr,
)

# The translation preset: d_model 256, 116 steps an epoch x 34 epochs.
D_MODEL, WARMUP, COOLDOWN, FACTOR, CONFIGURED = 256, 800, 800, 0.5, 3944
LENGTHS = (600, 900, 1400, 3944)


def rates(total: int, warmup: int, cooldown: int, factor: float) -> list[float]:
    return [
        noam_lr(step, D_MODEL, warmup, factor) * cooldown_multiplier(step, total, cooldown)
        for step in range(1, total + 1)
    ]


def shrunk_plan(total: int) -> tuple[int, int, float]:
    """The plan before: warm-up and cool-down times P / L, the factor times its square root (peak kept)."""
    scale = total / CONFIGURED
    return max(1, round(WARMUP * scale)), round(COOLDOWN * scale), FACTOR * math.sqrt(scale)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="budget-schedules.png")
    arguments = parser.parse_args()
    figure, axes = plt.subplots(1, len(LENGTHS), figsize=(13, 3.2), sharey=True)
    for axis, total in zip(axes, LENGTHS):
        now = fitted_schedule(total, CONFIGURED, 0, WARMUP, COOLDOWN, FACTOR)
        before = shrunk_plan(total)
        for label, (warmup, cooldown, factor), style in (
            (f"before: warm-up {before[0]}, cool-down {before[1]}", before, "--"),
            (f"now: warm-up {now[0]}, cool-down {now[1]}", now, "-"),
        ):
            axis.plot(range(1, total + 1), [rate * 1e3 for rate in rates(total, warmup, cooldown, factor)], style,
                      label=label)  # fmt: skip
        axis.set_title(f"{total:,} steps" + (" (the preset)" if total == CONFIGURED else ""))
        axis.set_xlabel("optimizer step")
        axis.legend(fontsize=7, loc="lower center")
    axes[0].set_ylabel("learning rate (x 1e-3)")
    figure.tight_layout()
    print(save_png(figure, arguments.out, dpi=110))


if __name__ == "__main__":
    main()
