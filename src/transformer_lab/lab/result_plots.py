"""Plots of measured results, written as PNG files: a run's training curve, a classifier's errors, a benchmark's speed.

:func:`plot_training_curve` (a Trainer's ``metrics.jsonl``, read by
:func:`~transformer_lab.training.metrics_log.numbered_metrics`; ``transformer-lab plot
training-curve``), :func:`plot_confusion_matrix` (``transformer-lab evaluate
classification``) and :func:`plot_ms_per_step` (decoding speed against the batch size,
``benchmarks/bench_ctranslate2.py``). The teaching figures are in
:mod:`transformer_lab.lab.figures`.
"""

from __future__ import annotations

from transformer_lab.lab.plotting import (  # first: matplotlib, headless, or one line
    check_figure_size,
    laid_out,
    save_png,
)

# isort: split
import json
import logging
import math
import os
import textwrap
from pathlib import Path
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.ticker import FixedLocator, FormatStrFormatter, LogLocator, NullFormatter

from transformer_lab.lab.fonts import check_cjk_text
from transformer_lab.training.metrics_log import numbered_metrics

__all__ = ["plot_confusion_matrix", "plot_ms_per_step", "plot_training_curve"]

logger = logging.getLogger(__name__)


def plot_training_curve(
    path: str | os.PathLike[str],
    metrics_path: str | os.PathLike[str],
    figsize: tuple[float, float] = (10.0, 4.0),
    dpi: int = 100,
) -> Path:
    """Training loss and learning rate (left) and every evaluation metric (right) by step.

    Reads the rows ``{"event": "train", "step", "train_loss", "lr"}`` and
    ``{"event": "eval", "step", <metric>: value}`` that the Trainer writes.
    """
    check_figure_size(figsize, dpi)
    numbered = numbered_metrics(metrics_path)
    rows = [row for _, row in numbered]
    train_rows = [row for row in rows if row["event"] == "train"]
    eval_rows = [row for row in rows if row["event"] == "eval"]
    if not train_rows and not eval_rows:
        # An empty log is what a run stopped before its first logged step leaves.
        given = "an empty file" if not rows else f"only {', '.join(sorted({str(row['event']) for row in rows}))} rows"
        raise ValueError(f"{metrics_path}: expected 'train' or 'eval' rows to draw, got {given}")
    unplottable = [
        (number, row)
        for number, row in numbered
        if row["event"] == "train" and not isinstance(row.get("train_loss"), (int, float))
    ]
    if unplottable:
        number, row = unplottable[0]
        raise ValueError(
            f"{metrics_path}: line {number}: expected a numeric 'train_loss' in every train row "
            f"to draw, got {json.dumps(row)[:80]}"
        )
    _warn_of_values_not_drawn(metrics_path, numbered)
    _check_scalable(metrics_path, numbered)
    figure, (left, right) = plt.subplots(1, 2, figsize=figsize)
    if train_rows:
        steps = [row["step"] for row in train_rows]
        marker = "o" if len(steps) == 1 else None  # one point draws no line: a marker shows it
        left.plot(steps, [row["train_loss"] for row in train_rows], color="tab:blue", marker=marker, label="train loss")
        left.set_ylabel("train loss", color="tab:blue")
        if all("lr" in row for row in train_rows):
            rate_axes = left.twinx()
            rate_axes.plot(steps, [row["lr"] for row in train_rows], color="tab:orange", marker=marker, label="lr")
            rate_axes.set_ylabel("learning rate", color="tab:orange")
    else:
        # A run shorter than train.log_every_steps logs evaluations only: the panel says so, not left blank.
        left.text(
            0.5,
            0.5,
            "no train rows\n(one every train.log_every_steps)",
            ha="center",
            va="center",
            transform=left.transAxes,
        )
    left.set_xlabel("step")
    left.set_title("training", fontsize=10)
    metric_names = sorted({key for row in eval_rows for key in row if key not in ("event", "step", "epoch")})
    for name in metric_names:
        points = [(row["step"], row[name]) for row in eval_rows if isinstance(row.get(name), (int, float))]
        if points:
            right.plot([step for step, _ in points], [value for _, value in points], marker="o", label=name)
    if not eval_rows:
        right.text(0.5, 0.5, "no eval rows yet", ha="center", va="center", transform=right.transAxes)
    right.set_xlabel("step")
    right.set_title("evaluation", fontsize=10)
    if metric_names:
        right.legend(fontsize=8)
    laid_out(figure)
    return save_png(figure, path, dpi)


def _warn_of_values_not_drawn(metrics_path: str | os.PathLike[str], numbered: Sequence[tuple[int, dict]]) -> None:
    """One warning naming the NaN and infinite values among those drawn, which matplotlib leaves out without a word.

    A loss that became NaN or inf is what a reader of the curve most needs to know; the gap
    it leaves in the line (an empty axis, when every loss is NaN) does not say so.
    """
    found = [
        f"{name} {'NaN' if math.isnan(value) else value} at step {row['step']} (line {number})"
        for number, row in numbered
        for name in _drawn_fields(row)
        if isinstance(value := row.get(name), float) and not math.isfinite(value)
    ]
    if found:
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        listed = ", ".join(found[:3])
        logger.warning("%s: %d value(s) not drawn, being NaN or infinite: %s%s", metrics_path, len(found), listed, more)


# The largest value an axis can span: beyond it matplotlib's tick arithmetic overflows ("cannot compute length").
_LARGEST_DRAWN = 1e300


def _check_scalable(metrics_path: str | os.PathLike[str], numbered: Sequence[tuple[int, dict]]) -> None:
    """Refuse a finite value too large for an axis (a hand-edited log), naming its line, before matplotlib fails."""
    for number, row in numbered:
        for name in _drawn_fields(row):
            value = row.get(name)
            if isinstance(value, float) and math.isfinite(value) and abs(value) > _LARGEST_DRAWN:
                raise ValueError(
                    f"{metrics_path}: line {number}: expected values an axis can span (at most {_LARGEST_DRAWN:g} "
                    f"in size), got {name} {value:g}"
                )


def _drawn_fields(row: Mapping[str, object]) -> tuple[str, ...]:
    """The fields of a metrics row that the training curve draws: a train row's loss and rate, an eval row's metrics."""
    if row["event"] == "train":
        return ("train_loss", "lr")
    if row["event"] == "eval":
        return tuple(name for name in row if name not in ("event", "step", "epoch"))
    return ()


# The most classes whose counts are written in their cells and whose names label the axes, at the default size.
MAX_LABELLED_CLASSES = 20


def plot_confusion_matrix(
    path: str | os.PathLike[str],
    confusion: Sequence[Sequence[int]],
    class_names: Sequence[str],
    title: str = "confusion matrix",
    figsize: tuple[float, float] = (6.0, 5.0),
    dpi: int = 100,
) -> Path:
    """A confusion matrix: rows true classes, columns predicted, each cell its count.

    Cells are coloured by their share of the row (the recall of the diagonal, the
    confusions off it), so that classes of different sizes read alike. Counts are written
    in the cells and the classes named on the axes for at most ``MAX_LABELLED_CLASSES``
    classes: beyond, they overlap into a black square, and one text per cell of hundreds of
    classes takes minutes to draw (the report's JSON holds every count).

    Shape:
        confusion: C rows of C counts, ``C == len(class_names)``.
    """
    check_cjk_text([*class_names, title])
    check_figure_size(figsize, dpi)
    counts = torch.tensor([list(row) for row in confusion], dtype=torch.float64)
    size = len(class_names)
    if counts.dim() != 2 or tuple(counts.shape) != (size, size):
        raise ValueError(
            f"confusion must be {size} rows of {size} counts (one per class name), got shape {list(counts.shape)}"
        )
    if bool((counts < 0).any()):
        raise ValueError(f"confusion must hold non-negative counts, got {counts.min().item()}")
    shares = counts / counts.sum(dim=1, keepdim=True).clamp_min(1.0)  # [C, C], rows sum to 1 (or 0)
    figure, axes = plt.subplots(figsize=figsize)
    image = axes.imshow(shares.numpy(), cmap="Blues", vmin=0.0, vmax=1.0)
    for row in range(size if size <= MAX_LABELLED_CLASSES else 0):
        for column in range(size):
            axes.text(
                column,
                row,
                f"{int(counts[row, column])}",
                ha="center",
                va="center",
                color="white" if shares[row, column] > 0.5 else "black",
                fontsize=9,
            )
    if size <= MAX_LABELLED_CLASSES:
        axes.set_xticks(range(size), labels=list(class_names), rotation=30, ha="right")
        axes.set_yticks(range(size), labels=list(class_names))
        axes.set_xlabel("predicted class")
        axes.set_ylabel("true class")
    else:
        axes.set_xlabel(f"predicted class (of {size:,}, in the report's order)")
        axes.set_ylabel(f"true class (of {size:,}, in the report's order)")
    axes.set_title(title, fontsize=10)
    figure.colorbar(image, ax=axes, fraction=0.046, label="share of the true class")
    laid_out(figure)
    return save_png(figure, path, dpi)


def plot_ms_per_step(
    path: str | os.PathLike[str],
    batch_sizes: Sequence[int],
    ms_per_step: Mapping[str, Sequence[float]],
    title: str = "decoding speed by batch size",
    footnote: str = "",
    figsize: tuple[float, float] = (7.0, 4.8),
    dpi: int = 100,
) -> Path:
    """Milliseconds per decoding step against the batch size, one labelled line per engine, log-log.

    ``ms_per_step`` maps each line's label (an engine: ``ours fp32``, ``ctranslate2 int8``
    ...) to its time per step of the whole batch, one value per batch size, in the order of
    ``batch_sizes``. The x ticks are the batch sizes themselves. ``footnote`` (the machine,
    the versions, the settings) is written small under the axes, wrapped to the width.
    """
    check_figure_size(figsize, dpi)
    if not batch_sizes or min(batch_sizes) < 1:
        raise ValueError(f"batch_sizes must be one or more positive sizes, got {list(batch_sizes)!r}")
    if not ms_per_step:
        raise ValueError("ms_per_step must hold at least one engine's times, got none")
    for label, values in ms_per_step.items():
        if len(values) != len(batch_sizes) or min(values) <= 0:
            raise ValueError(
                f"ms_per_step[{label!r}] must be {len(batch_sizes)} positive times (one per batch size), "
                f"got {list(values)!r}"
            )
    figure, axes = plt.subplots(figsize=figsize)
    markers = "osD^vP*X"
    for index, (label, values) in enumerate(ms_per_step.items()):
        axes.plot(list(batch_sizes), list(values), marker=markers[index % len(markers)], label=label)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.xaxis.set_major_locator(FixedLocator(sorted(set(batch_sizes))))
    axes.xaxis.set_major_formatter(FormatStrFormatter("%d"))
    axes.xaxis.set_minor_formatter(NullFormatter())
    # 1-2-3-5 ticks with plain numbers: a log axis that reads in milliseconds, not powers of ten.
    axes.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 3.0, 5.0)))
    axes.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    axes.yaxis.set_minor_formatter(NullFormatter())
    axes.set_xlabel("batch size (sentences decoded together)")
    axes.set_ylabel("ms per decoding step (whole batch, median)")
    axes.set_title("\n".join(textwrap.wrap(title, width=max(20, int(figsize[0] * 12)))), fontsize=10)
    axes.grid(which="both", alpha=0.3)
    axes.legend(fontsize=8)
    bottom = 0.0
    if footnote:
        lines = textwrap.wrap(footnote, width=max(20, int(figsize[0] * 17)))
        figure.text(0.01, 0.01, "\n".join(lines), fontsize=7, color="dimgray", ha="left", va="bottom")
        bottom = min(0.5, (len(lines) * 7 * 1.35 + 6) / 72 / figsize[1])  # the footnote's height, as a share
    laid_out(figure, rect=(0.0, bottom, 1.0, 1.0))
    return save_png(figure, path, dpi)
