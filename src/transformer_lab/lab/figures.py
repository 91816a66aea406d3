"""The teaching figures, drawn from the real model and written as PNG files.

The tutorials' pictures, each from the library's own objects: :func:`plot_masks` (the
masks of :mod:`transformer_lab.nn.masks`), :func:`plot_positions` (the positional table),
:func:`plot_lr_schedule` (:func:`~transformer_lab.training.noam_lr`),
:func:`plot_attention` / :func:`plot_checkpoint_attention` (every head of every layer of a
trained model) and :func:`plot_attention_heatmap` (one matrix). ``transformer-lab plot``
calls them. The plots of measured results (a run's training curve, a classifier's
confusion matrix, a benchmark's speed) are in :mod:`transformer_lab.lab.result_plots`.
"""

from __future__ import annotations

from transformer_lab.lab.plotting import (  # first: matplotlib, headless, or one line
    check_figure_size,
    check_image_path,
    laid_out,
    save_png,
    write_figure,
)

# isort: split
import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from torch import Tensor

from transformer_lab.data import Vocabulary
from transformer_lab.lab.checkpoints import checkpoint_attention
from transformer_lab.lab.fonts import check_cjk_text
from transformer_lab.lab.mask_panels import mask_panels
from transformer_lab.models.attention_maps import AttentionMap
from transformer_lab.models.embedding import SinusoidalPositionalEncoding
from transformer_lab.setting_error import SettingError
from transformer_lab.training.schedule import noam_lrs


def plot_attention_heatmap(
    weights: Tensor,
    source_labels: Sequence[str],
    target_labels: Sequence[str],
    path: str | os.PathLike[str],
    title: str = "cross-attention",
    value_range: tuple[float, float] | None = None,
) -> Path:
    """Draw one attention matrix (rows: target positions, columns: source positions).

    The colours span the weights' own range (``value_range`` fixes one, e.g. ``(0.0, 1.0)``),
    and the colorbar gives the numbers: a model early in training spreads its attention at
    0.1-0.2 over many keys, which on a fixed 0-1 scale is one flat block. The title sits
    above the whole figure and wraps, so a short sentence's narrow map does not run it into
    the colorbar.

    Shape:
        weights ``[T, S]``, with ``len(target_labels) == T`` and ``len(source_labels) == S``.
    """
    if weights.dim() != 2 or tuple(weights.shape) != (len(target_labels), len(source_labels)):
        raise ValueError(
            f"weights must have shape [len(target_labels), len(source_labels)] = "
            f"[{len(target_labels)}, {len(source_labels)}], got {list(weights.shape)}"
        )
    values = weights.detach().float().cpu().numpy()
    low, high = (float(values.min()), float(values.max())) if value_range is None else value_range
    if not high > low:
        if value_range is not None:
            raise ValueError(f"value_range: expected (low, high) with low < high, got {value_range!r}")
        high = low + 1e-6  # every weight equal (uniform attention): one colour, still a valid scale
    check_cjk_text([*source_labels, *target_labels, title])
    path = check_image_path(path)
    # At least 4 inches wide, so that the wrapped title keeps a few words a line.
    figsize = (max(0.5 * len(source_labels) + 2.5, 4.0), 0.5 * len(target_labels) + 2.0)
    figure, axes = plt.subplots(figsize=figsize)
    image = axes.imshow(values, cmap="viridis", vmin=low, vmax=high)
    axes.set_xticks(range(len(source_labels)), labels=list(source_labels), rotation=90)
    axes.set_yticks(range(len(target_labels)), labels=list(target_labels))
    axes.set_xlabel("source position (key)")
    axes.set_ylabel("target position (query)")
    figure.suptitle(title, wrap=True)
    figure.colorbar(image, ax=axes, fraction=0.046)
    laid_out(figure)
    try:
        write_figure(figure, path, dpi=120)
    finally:
        plt.close(figure)
    return path


# ----------------------------------------------------------------------------------------
# The tutorials' pictures, drawn from the library's own masks, tables and schedules, each
# exactly figsize * dpi pixels (lab.plotting).
# ----------------------------------------------------------------------------------------
_HIDDEN_COLORS = ListedColormap(["#f2f2f2", "#3b4b8c"])  # visible (False), hidden (True)
DEFAULT_LR_SETTINGS: tuple[tuple[int, int], ...] = ((512, 4000), (512, 8000), (256, 4000))


def plot_attention_map(predictor: Any, text: str, path: str | os.PathLike[str], **settings: Any) -> Path:
    """Draw the attention a task's predictor reads for ``text`` (its ``attention_map(text, **settings)``) to ``path``.

    The path is checked before the model runs, so that a bad one costs no decoding.
    """
    check_image_path(path)
    attention: AttentionMap = predictor.attention_map(text, **settings)
    return plot_attention_heatmap(attention.weights, attention.columns, attention.rows, path, title=attention.title)


def _draw_mask(axes: Axes, hidden: Tensor, labels: Sequence[str], title: str) -> None:
    """One bool mask as a grid: rows are queries, columns keys, dark = hidden (True)."""
    axes.imshow(hidden.to(torch.uint8).numpy(), cmap=_HIDDEN_COLORS, vmin=0, vmax=1)
    positions = range(len(labels))
    axes.set_xticks(positions, labels=list(labels), rotation=90, fontsize=8)
    axes.set_yticks(positions, labels=list(labels), fontsize=8)
    axes.set_xticks([position - 0.5 for position in range(1, len(labels))], minor=True)
    axes.set_yticks([position - 0.5 for position in range(1, len(labels))], minor=True)
    axes.grid(which="minor", color="white", linewidth=1)
    axes.tick_params(which="minor", length=0)
    axes.set_xlabel("key (column)", fontsize=8)
    axes.set_title(title, fontsize=9)


def plot_masks(
    path: str | os.PathLike[str],
    length: int = 6,
    real_length: int = 4,
    labels: Sequence[str] | None = None,
    figsize: tuple[float, float] = (12.0, 3.6),
    dpi: int = 100,
) -> Path:
    """The causal mask, a key padding mask, their combination, and rows+columns padding.

    One sequence of ``length`` positions whose last ``length - real_length`` are padding.
    Every panel is a ``[query, key]`` grid built by :mod:`transformer_lab.nn.masks`; dark
    cells are True (hidden). The fourth panel hides padded rows too (what the tutorials ask
    about, and the model never needs).

    Shape:
        each panel ``[length, length]``.
    """
    check_figure_size(figsize, dpi)
    if not 1 <= real_length <= length:
        # A SettingError, so that the command line names its --real-length and --length.
        raise SettingError(
            "{real_length} must be in [1, {length}] ({length} is {length_value}), got {given}",
            ("real_length", "length"),
            length_value=length,
            given=real_length,
        )
    if labels is None:
        labels = [f"w{index}" for index in range(real_length)] + ["<pad>"] * (length - real_length)
    if len(labels) != length:
        raise ValueError(f"labels must have length {length}, got {len(labels)}")
    panels = [(panel.hidden, panel.title) for panel in mask_panels([real_length], length)[0]]
    figure, axes_row = plt.subplots(1, len(panels), figsize=figsize)
    for axes, (hidden, title) in zip(axes_row, panels):
        _draw_mask(axes, hidden, labels, title)
    axes_row[0].set_ylabel("query (row)", fontsize=8)
    figure.suptitle("bool masks, True = hidden (dark): the query in the row may not attend to the key", fontsize=10)
    laid_out(figure)
    return save_png(figure, path, dpi)


def plot_positions(
    path: str | os.PathLike[str],
    max_len: int = 100,
    d_model: int = 128,
    figsize: tuple[float, float] = (10.0, 4.0),
    dpi: int = 100,
) -> Path:
    """The sinusoidal positional encoding table, and four of its dimensions along the positions.

    The table is :class:`~transformer_lab.models.embedding.SinusoidalPositionalEncoding`'s.

    Shape:
        the table ``[max_len, d_model]``.
    """
    check_figure_size(figsize, dpi)
    if d_model < 2 or d_model % 2:
        # The encoding's own check, as a SettingError: the command line names its --d-model.
        raise SettingError(
            "{d_model} must be an even number >= 2 for sin/cos pairs, got {given}", ("d_model",), given=d_model
        )
    table = SinusoidalPositionalEncoding(d_model, max_len, dropout=0.0).table  # [max_len, D]
    figure, (left, right) = plt.subplots(1, 2, figsize=figsize, gridspec_kw={"width_ratios": [3, 2]})
    # nearest: no blending between cells, which also keeps the PNG small.
    image = left.imshow(table.numpy(), aspect="auto", cmap="RdBu", vmin=-1.0, vmax=1.0, interpolation="nearest")
    left.set_xlabel("dimension i")
    left.set_ylabel("position")
    left.set_title(f"PE[pos, i], d_model={d_model}", fontsize=10)
    figure.colorbar(image, ax=left, fraction=0.046)
    # Even (sin) dimensions from fast to slow, to show the wavelengths growing with i.
    dimensions = sorted({2 * ((d_model * share) // 16) for share in (1, 2, 4, 7)})
    for dimension in dimensions:
        kind = "sin" if dimension % 2 == 0 else "cos"
        right.plot(range(max_len), table[:, dimension].numpy(), label=f"i={dimension} ({kind})")
    right.set_xlabel("position")
    right.set_title("a few dimensions", fontsize=10)
    right.legend(fontsize=8, loc="lower right")
    laid_out(figure)
    return save_png(figure, path, dpi)


def plot_lr_schedule(
    path: str | os.PathLike[str],
    settings: Sequence[tuple[int, int]] = DEFAULT_LR_SETTINGS,
    total_steps: int = 20000,
    factor: float = 1.0,
    figsize: tuple[float, float] = (7.0, 4.0),
    dpi: int = 100,
) -> Path:
    """The warm-up / inverse-square-root rate (:func:`~transformer_lab.training.noam_lr`).

    ``settings`` holds ``(d_model, warmup_steps)`` pairs, one curve each. Every step is
    drawn up to a few per pixel of the figure's width; past that, as many steps spread
    evenly and each warm-up's last step (the peak), so ten million steps draw as fast.
    """
    check_figure_size(figsize, dpi)
    if total_steps < 2:
        raise ValueError(f"total_steps must be >= 2, got {total_steps}")
    if not settings:
        raise ValueError("settings must hold at least one (d_model, warmup_steps) pair, got none")
    if not (math.isfinite(factor) and factor > 0):
        # Checked before noam_lr would, as a SettingError: the command line names its --factor.
        raise SettingError("{factor}: expected a positive finite float, got {given!r}", ("factor",), given=factor)
    steps = drawn_steps(total_steps, [warmup_steps for _, warmup_steps in settings], round(figsize[0] * dpi))
    figure, axes = plt.subplots(figsize=figsize)
    for d_model, warmup_steps in settings:
        rates = noam_lrs(steps, d_model, warmup_steps, factor)
        axes.plot(steps.numpy(), rates.numpy(), label=f"d_model={d_model}, warmup={warmup_steps}")
    axes.set_xlabel("optimizer step")
    axes.set_ylabel("learning rate")
    axes.set_title("lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)", fontsize=10)
    axes.legend()
    axes.grid(alpha=0.3)
    laid_out(figure)
    return save_png(figure, path, dpi)


# Points drawn per pixel of a figure's width: more than it can show, so that the line looks as
# the one through every step would.
POINTS_PER_PIXEL = 4


def drawn_steps(total_steps: int, peaks: Sequence[int], width_pixels: int) -> Tensor:
    """The steps (float64, from 1, ascending) a curve over ``total_steps`` steps is drawn through.

    Every step while they are at most ``POINTS_PER_PIXEL`` per pixel of ``width_pixels``;
    past that, that many spread evenly from the first step to the last, and the ``peaks``
    (a warm-up's last step, where the curve bends) among them, so no peak is cut off.
    """
    most = POINTS_PER_PIXEL * max(width_pixels, 1)
    if total_steps <= most:
        return torch.arange(1, total_steps + 1, dtype=torch.float64)
    evenly = torch.linspace(1, total_steps, most, dtype=torch.float64).round()
    bends = torch.tensor([peak for peak in peaks if 1 <= peak <= total_steps], dtype=torch.float64)
    return torch.unique(torch.cat([evenly, bends]))  # sorted, each step once


def attention_grid_size(maps: Mapping[str, Tensor]) -> tuple[int, int]:
    """(rows, columns) of :func:`plot_attention`'s grid: one row per attention, one column per head."""
    if not maps:
        raise ValueError("maps must hold at least one attention's weights, got none")
    return len(maps), max(weights.shape[1] for weights in maps.values())


def plot_attention(
    path: str | os.PathLike[str],
    maps: Mapping[str, Tensor],
    source_labels: Sequence[str],
    target_labels: Sequence[str],
    figsize: tuple[float, float] | None = None,
    dpi: int = 100,
    title: str = "attention weights, every head of every layer",
) -> Path:
    """Every head of every attention module for one sentence (the first of the batch).

    ``maps`` is :func:`~transformer_lab.models.attention_maps.attention_maps`'s result; its
    keys name the modules (``encoder.layers.0.self_attn``, ``decoder.layers.0.multihead_attn``
    ...). Axis labels follow the module: encoder self-attention is source x source, decoder
    self-attention target x target, cross-attention target x source. ``figsize`` defaults
    to 2.2 x 2.2 inches per panel.

    Shape:
        maps values ``[B, H, L, S']``.
    """
    check_cjk_text([*source_labels, *target_labels, title])
    rows, columns = attention_grid_size(maps)
    if figsize is None:
        figsize = (2.2 * columns + 0.6, 2.2 * rows + 0.6)
    check_figure_size(figsize, dpi)
    sizes = {"source": len(source_labels), "target": len(target_labels)}
    figure, grid = plt.subplots(rows, columns, figsize=figsize, squeeze=False)
    for row, (name, weights) in enumerate(maps.items()):
        query_side, key_side = _attention_sides(name)
        expected = (sizes[query_side], sizes[key_side])
        if weights.dim() != 4 or tuple(weights.shape[2:]) != expected:
            plt.close(figure)
            raise ValueError(
                f"maps[{name!r}] must have shape [B, H, {expected[0]}, {expected[1]}] "
                f"({query_side} x {key_side}), got {list(weights.shape)}"
            )
        query_labels = source_labels if query_side == "source" else target_labels
        key_labels = source_labels if key_side == "source" else target_labels
        for column in range(columns):
            axes = grid[row][column]
            if column >= weights.shape[1]:
                axes.axis("off")
                continue
            axes.imshow(weights[0, column].float().cpu().numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
            axes.set_xticks(range(len(key_labels)), labels=list(key_labels), rotation=90, fontsize=6)
            axes.set_yticks(range(len(query_labels)), labels=list(query_labels), fontsize=6)
            axes.set_title(f"{_short_name(name)} h{column}", fontsize=7)
    figure.suptitle(title, fontsize=10)
    laid_out(figure)
    return save_png(figure, path, dpi)


def _attention_sides(name: str) -> tuple[str, str]:
    """(query side, key side) of an attention module, from its path."""
    if name.startswith("encoder"):
        return "source", "source"
    if name.endswith("multihead_attn"):
        return "target", "source"
    return "target", "target"


def _short_name(name: str) -> str:
    """``decoder.layers.1.multihead_attn`` -> ``dec1 cross``."""
    parts = name.split(".")
    stack = "enc" if parts[0] == "encoder" else "dec"
    kind = "cross" if parts[-1] == "multihead_attn" else "self"
    layer = parts[2] if len(parts) > 2 else "?"
    return f"{stack}{layer} {kind}"


def plot_checkpoint_attention(
    path: str | os.PathLike[str],
    checkpoint: str | os.PathLike[str],
    source_ids: Sequence[int] | None = None,
    target_ids: Sequence[int] | None = None,
    source_vocabulary: Vocabulary | str | os.PathLike[str] | None = None,
    target_vocabulary: Vocabulary | str | os.PathLike[str] | None = None,
    figsize: tuple[float, float] | None = None,
    dpi: int = 100,
    *,
    source: str | None = None,
    target: str | None = None,
) -> Path:
    """:func:`plot_attention` for one sentence read (and, by default, written) by a checkpoint.

    ``source`` and ``target`` are text, read as the checkpoint reads its inputs (a
    translation checkpoint's tokenizer, a couplet line's characters; a synthetic task's
    token ids): see :func:`~transformer_lab.lab.checkpoints.checkpoint_attention`, which
    also says the defaults and takes the vocabularies or their files. ``source_ids`` /
    ``target_ids`` give token ids instead.
    """
    attention = checkpoint_attention(
        checkpoint,
        source_ids if source_ids is not None else source,
        target_ids if target_ids is not None else target,
        source_vocabulary=source_vocabulary,
        target_vocabulary=target_vocabulary,
    )
    return plot_attention(
        path,
        attention.maps,
        attention.source_labels,
        attention.target_labels,
        figsize=figsize,
        dpi=dpi,
        title=f"attention weights of checkpoint {Path(checkpoint).name!r}, every head of every layer (rows: queries)",
    )
