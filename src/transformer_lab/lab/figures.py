"""Figures drawn from the real model, written as PNG files (matplotlib, no screen needed).

The tutorials' pictures, each from the library's own objects: :func:`plot_masks` (the
masks of :mod:`transformer_lab.nn.masks`), :func:`plot_positions` (the positional table),
:func:`plot_lr_schedule` (:func:`~transformer_lab.training.noam_lr`),
:func:`plot_attention` / :func:`plot_checkpoint_attention` (every head of every layer of a
trained model), :func:`plot_training_curve` (a Trainer's ``metrics.jsonl``) and
:func:`plot_attention_heatmap` (one matrix) and :func:`plot_confusion_matrix` (a
classifier's errors). ``transformer-lab plot`` calls them. :func:`plot_ms_per_step` draws
a benchmark's decoding speed against the batch size (``benchmarks/bench_ctranslate2.py``).
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Mapping, Sequence

from transformer_lab.extras import require_extra

matplotlib = require_extra("matplotlib", "drawing figures")
matplotlib.use("Agg")  # files only: works on machines without a display
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FixedLocator, FormatStrFormatter, LogLocator, NullFormatter  # noqa: E402
from torch import Tensor  # noqa: E402

from transformer_lab.data import Vocabulary, make_synthetic_pairs, read_lines  # noqa: E402
from transformer_lab.lab.checkpoints import load_seq2seq_checkpoint, sentence_attention  # noqa: E402
from transformer_lab.lab.fonts import check_cjk_text, enable_cjk_fallback  # noqa: E402
from transformer_lab.lab.mask_panels import mask_panels  # noqa: E402
from transformer_lab.models.embedding import SinusoidalPositionalEncoding  # noqa: E402
from transformer_lab.training import noam_lr  # noqa: E402

# Chinese tokens, couplet lines and class names draw with an installed CJK font.
enable_cjk_fallback()


def plot_attention_heatmap(
    weights: Tensor,
    source_labels: Sequence[str],
    target_labels: Sequence[str],
    path: str | os.PathLike[str],
    title: str = "cross-attention",
) -> Path:
    """Draw one attention matrix (rows: target positions, columns: source positions).

    Shape:
        weights ``[T, S]``, with ``len(target_labels) == T`` and ``len(source_labels) == S``.
    """
    if weights.dim() != 2 or tuple(weights.shape) != (len(target_labels), len(source_labels)):
        raise ValueError(
            f"weights must have shape [len(target_labels), len(source_labels)] = "
            f"[{len(target_labels)}, {len(source_labels)}], got {list(weights.shape)}"
        )
    check_cjk_text([*source_labels, *target_labels, title])
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(figsize=(0.5 * len(source_labels) + 2.5, 0.5 * len(target_labels) + 1.5))
    image = axes.imshow(weights.float().cpu().numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
    axes.set_xticks(range(len(source_labels)), labels=list(source_labels), rotation=90)
    axes.set_yticks(range(len(target_labels)), labels=list(target_labels))
    axes.set_xlabel("source position (key)")
    axes.set_ylabel("target position (query)")
    axes.set_title(title)
    figure.colorbar(image, ax=axes, fraction=0.046)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


# ----------------------------------------------------------------------------------------
# The tutorials' pictures, drawn from the library's own masks, tables and schedules. Every
# function takes ``figsize`` (inches) and ``dpi``; the PNG is exactly
# ``figsize[0] * dpi`` by ``figsize[1] * dpi`` pixels (no tight bounding box), so that a
# caller, and the tests, know its size in advance.
# ----------------------------------------------------------------------------------------
_HIDDEN_COLORS = ListedColormap(["#f2f2f2", "#3b4b8c"])  # visible (False), hidden (True)
DEFAULT_LR_SETTINGS: tuple[tuple[int, int], ...] = ((512, 4000), (512, 8000), (256, 4000))


def _check_figure_size(figsize: tuple[float, float], dpi: int) -> None:
    if len(figsize) != 2 or min(figsize) <= 0:
        raise ValueError(f"figsize must be two positive numbers (width, height) in inches, got {figsize!r}")
    if dpi < 10:
        raise ValueError(f"dpi must be >= 10, got {dpi}")


def _save(figure: Figure, path: str | os.PathLike[str], dpi: int) -> Path:
    path = Path(path)
    if path.suffix.lower() != ".png":
        plt.close(figure)
        raise ValueError(f"path must name a .png file, got {str(path)!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return path


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
    _check_figure_size(figsize, dpi)
    if not 1 <= real_length <= length:
        raise ValueError(f"real_length must be in [1, length={length}], got {real_length}")
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
    figure.tight_layout()
    return _save(figure, path, dpi)


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
    _check_figure_size(figsize, dpi)
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
    figure.tight_layout()
    return _save(figure, path, dpi)


def plot_lr_schedule(
    path: str | os.PathLike[str],
    settings: Sequence[tuple[int, int]] = DEFAULT_LR_SETTINGS,
    total_steps: int = 20000,
    factor: float = 1.0,
    figsize: tuple[float, float] = (7.0, 4.0),
    dpi: int = 100,
) -> Path:
    """The warm-up / inverse-square-root rate (:func:`~transformer_lab.training.noam_lr`).

    ``settings`` holds ``(d_model, warmup_steps)`` pairs, one curve each.
    """
    _check_figure_size(figsize, dpi)
    if total_steps < 2:
        raise ValueError(f"total_steps must be >= 2, got {total_steps}")
    if not settings:
        raise ValueError("settings must hold at least one (d_model, warmup_steps) pair, got none")
    steps = list(range(1, total_steps + 1))
    figure, axes = plt.subplots(figsize=figsize)
    for d_model, warmup_steps in settings:
        rates = [noam_lr(step, d_model, warmup_steps, factor) for step in steps]
        axes.plot(steps, rates, label=f"d_model={d_model}, warmup={warmup_steps}")
    axes.set_xlabel("optimizer step")
    axes.set_ylabel("learning rate")
    axes.set_title("lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)", fontsize=10)
    axes.legend()
    axes.grid(alpha=0.3)
    figure.tight_layout()
    return _save(figure, path, dpi)


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

    ``maps`` is :func:`~transformer_lab.lab.attention_maps.attention_maps`'s result; its
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
    _check_figure_size(figsize, dpi)
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
    figure.tight_layout()
    return _save(figure, path, dpi)


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


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, object]]:
    """The rows of a Trainer's ``metrics.jsonl``, one dict per line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"metrics: expected a metrics.jsonl file at {str(path)!r}, which does not exist")
    rows: list[dict[str, object]] = []
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"metrics: line {number} of {str(path)!r} is not JSON: {error}") from None
        if not isinstance(row, dict) or "event" not in row or "step" not in row:
            raise ValueError(
                f"metrics: line {number} of {str(path)!r} must be an object with 'event' and 'step', "
                f"got {line.strip()[:80]!r}"
            )
        rows.append(row)
    return rows


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
    _check_figure_size(figsize, dpi)
    rows = read_metrics(metrics_path)
    train_rows = [row for row in rows if row["event"] == "train"]
    eval_rows = [row for row in rows if row["event"] == "eval"]
    if not train_rows and not eval_rows:
        raise ValueError(f"metrics: expected 'train' or 'eval' rows in {str(metrics_path)!r}, got none")
    unplottable = [row for row in train_rows if not isinstance(row.get("train_loss"), (int, float))]
    if unplottable:
        raise ValueError(
            f"metrics: expected every train row of {str(metrics_path)!r} to have a numeric 'train_loss', "
            f"got {json.dumps(unplottable[0])[:80]}"
        )
    figure, (left, right) = plt.subplots(1, 2, figsize=figsize)
    if train_rows:
        steps = [row["step"] for row in train_rows]
        left.plot(steps, [row["train_loss"] for row in train_rows], color="tab:blue", label="train loss")
        left.set_ylabel("train loss", color="tab:blue")
        if all("lr" in row for row in train_rows):
            rate_axes = left.twinx()
            rate_axes.plot(steps, [row["lr"] for row in train_rows], color="tab:orange", label="lr")
            rate_axes.set_ylabel("learning rate", color="tab:orange")
    left.set_xlabel("step")
    left.set_title("training", fontsize=10)
    metric_names = sorted({key for row in eval_rows for key in row if key not in ("event", "step", "epoch")})
    for name in metric_names:
        points = [(row["step"], row[name]) for row in eval_rows if isinstance(row.get(name), (int, float))]
        if points:
            right.plot([step for step, _ in points], [value for _, value in points], marker="o", label=name)
    right.set_xlabel("step")
    right.set_title("evaluation", fontsize=10)
    if metric_names:
        right.legend(fontsize=8)
    figure.tight_layout()
    return _save(figure, path, dpi)


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
    confusions off it), so that classes of different sizes read alike.

    Shape:
        confusion: C rows of C counts, ``C == len(class_names)``.
    """
    check_cjk_text([*class_names, title])
    _check_figure_size(figsize, dpi)
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
    for row in range(size):
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
    axes.set_xticks(range(size), labels=list(class_names), rotation=30, ha="right")
    axes.set_yticks(range(size), labels=list(class_names))
    axes.set_xlabel("predicted class")
    axes.set_ylabel("true class")
    axes.set_title(title, fontsize=10)
    figure.colorbar(image, ax=axes, fraction=0.046, label="share of the true class")
    figure.tight_layout()
    return _save(figure, path, dpi)


def plot_checkpoint_attention(
    path: str | os.PathLike[str],
    checkpoint: str | os.PathLike[str],
    source_ids: Sequence[int] | None = None,
    target_ids: Sequence[int] | None = None,
    source_vocabulary: Vocabulary | None = None,
    target_vocabulary: Vocabulary | None = None,
    figsize: tuple[float, float] | None = None,
    dpi: int = 100,
) -> Path:
    """:func:`plot_attention` for one sentence read (and, by default, written) by a checkpoint.

    Without ``source_ids`` the sentence is a synthetic one (6 symbols, seed 0) over the
    model's vocabulary; without ``target_ids`` the target is the model's greedy output.
    """
    model = load_seq2seq_checkpoint(checkpoint)
    if source_ids is None:
        vocab_size = min(model.src_vocab_size, model.tgt_vocab_size)
        source_ids = make_synthetic_pairs("reverse", 1, vocab_size, 6, 6, seed=0)[0][0]
    attention = sentence_attention(
        model, source_ids, target_ids, source_vocabulary=source_vocabulary, target_vocabulary=target_vocabulary
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
    _check_figure_size(figsize, dpi)
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
    figure.tight_layout(rect=(0.0, bottom, 1.0, 1.0))
    return _save(figure, path, dpi)
