"""The architecture figure: the encoder-decoder Transformer on one page, drawn with matplotlib.

One picture that the tutorial's chapters refer back to: the two embeddings with their
positions, the encoder stack, the memory it hands to every decoder layer, the decoder stack,
the generator and its logits, and the three attentions, each with the mask it takes (the
names are this library's and PyTorch's). :func:`draw_architecture` returns the figure,
:func:`plot_architecture` writes it; ``docs/figures/architecture.png`` is its output.
"""

from __future__ import annotations

from transformer_lab.lab.plotting import (  # first: matplotlib, headless, or one line
    check_figure_size,
    laid_out,
    save_png,
)

# isort: split
import os
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch

__all__ = ["ATTENTION_COLOURS", "draw_architecture", "plot_architecture"]

# One colour per attention, the same in the boxes and in the legend.
ATTENTION_COLOURS = {
    "encoder self-attention": "#f4b183",
    "decoder masked self-attention": "#9dc3e6",
    "cross-attention": "#c5a5e0",
}
_PLAIN = "#f2f2f2"  # add & norm, feed-forward, embeddings
_STACK = "#fbfbf2"
_WIDTH = 3.4  # every box in a column
_ENCODER_X = 2.6
_DECODER_X = 7.4


def _box(axes: Axes, x: float, y: float, height: float, text: str, colour: str = _PLAIN, size: int = 9) -> None:
    """A rounded box centred on ``x`` whose bottom edge is at ``y``."""
    axes.add_patch(
        FancyBboxPatch(
            (x - _WIDTH / 2, y),
            _WIDTH,
            height,
            boxstyle="round,pad=0.02,rounding_size=0.12",
            facecolor=colour,
            edgecolor="#404040",
            linewidth=1.0,
        )
    )
    axes.text(x, y + height / 2, text, ha="center", va="center", fontsize=size, linespacing=1.25)


def _arrow(axes: Axes, start: tuple[float, float], end: tuple[float, float], **style: object) -> None:
    settings: dict[str, object] = {"arrowstyle": "-|>", "mutation_scale": 11, "color": "#404040", "linewidth": 1.0}
    settings.update(style)
    axes.add_patch(FancyArrowPatch(start, end, **settings))  # type: ignore[arg-type]


def _sublayers(axes: Axes, x: float, bottom: float, parts: list[tuple[str, float, str]], side: float) -> float:
    """Stack ``(text, height, colour)`` sublayers from ``bottom`` up, each followed by add & norm.

    A residual line runs on the ``side`` (-1 left, +1 right) of each sublayer from its input to
    its add & norm, as in the paper's figure. Returns the top of the last add & norm.
    """
    y = bottom
    for text, height, colour in parts:
        _arrow(axes, (x, y - 0.3), (x, y))
        _box(axes, x, y, height, text, colour, size=8)
        norm_y = y + height + 0.25
        _arrow(axes, (x, y + height), (x, norm_y))
        _box(axes, x, norm_y, 0.38, "add & norm", size=8)
        edge = x + side * (_WIDTH / 2 + 0.25)
        axes.plot([x, edge, edge], [y - 0.15, y - 0.15, norm_y + 0.19], color="#808080", linewidth=0.9)
        _arrow(axes, (edge, norm_y + 0.19), (x + side * _WIDTH / 2, norm_y + 0.19), color="#808080")
        y = norm_y + 0.38 + 0.3
    return y - 0.3


def draw_architecture(figsize: tuple[float, float] = (8.0, 9.0)) -> Figure:
    """The encoder-decoder Transformer as one figure (post-norm, as in the paper).

    Shape legend of its labels: B batch, S source length, T target length, D d_model,
    V vocabulary.
    """
    figure, axes = plt.subplots(figsize=figsize)
    axes.set_xlim(0, 10)
    axes.set_ylim(0, 11.4)
    axes.axis("off")
    colours = list(ATTENTION_COLOURS.values())

    for x, ids in ((_ENCODER_X, "source token ids [B, S]"), (_DECODER_X, "target ids shifted right:\n<bos> y  [B, T]")):
        axes.text(x, 0.25, ids, ha="center", va="center", fontsize=9)
        _arrow(axes, (x, 0.55), (x, 0.8))
        _box(axes, x, 0.8, 0.5, "token embedding x sqrt(D)")
        _arrow(axes, (x, 1.3), (x, 1.55))
        _box(axes, x, 1.55, 0.5, "+ sinusoidal positions")

    # The stacks: frames first, so that the boxes draw over them.
    encoder_parts = [("self-attention\nmask: source key padding", 0.62, colours[0]), ("feed-forward", 0.45, _PLAIN)]
    decoder_parts = [
        ("masked self-attention\nmask: causal", 0.62, colours[1]),
        ("cross-attention\nQ: decoder; K, V: memory\nmask: source key padding", 0.82, colours[2]),
        ("feed-forward", 0.45, _PLAIN),
    ]
    stack_bottom = 2.55
    for x, parts, label_x in ((_ENCODER_X, encoder_parts, 0.2), (_DECODER_X, decoder_parts, 9.8)):
        top = stack_bottom + 0.3 + sum(height + 0.25 + 0.38 + 0.3 for _, height, _ in parts) - 0.3 + 0.2
        axes.add_patch(
            FancyBboxPatch(
                (x - _WIDTH / 2 - 0.5, stack_bottom),
                _WIDTH + 1.0,
                top - stack_bottom,
                boxstyle="round,pad=0.02,rounding_size=0.2",
                facecolor=_STACK,
                edgecolor="#808080",
                linestyle="--",
            )
        )
        axes.text(label_x, (stack_bottom + top) / 2, "x N\nlayers", ha="center", va="center", fontsize=10)
    encoder_top = _sublayers(axes, _ENCODER_X, stack_bottom + 0.3, encoder_parts, side=-1)
    decoder_top = _sublayers(axes, _DECODER_X, stack_bottom + 0.3, decoder_parts, side=+1)
    axes.text(_ENCODER_X, stack_bottom - 0.02, "encoder", ha="center", va="top", fontsize=8, style="italic")
    axes.text(_DECODER_X, stack_bottom - 0.02, "decoder", ha="center", va="top", fontsize=8, style="italic")

    # The memory: computed once, read by the cross-attention of every decoder layer.
    memory_y = encoder_top + 0.55
    _arrow(axes, (_ENCODER_X, encoder_top), (_ENCODER_X, memory_y))
    _box(axes, _ENCODER_X, memory_y, 0.5, "memory [B, S, D]", "#e2efda")
    cross_y = stack_bottom + 0.3 + (0.62 + 0.25 + 0.38 + 0.3) + 0.41  # the middle of the cross-attention box
    _arrow(
        axes,
        (_ENCODER_X + _WIDTH / 2, memory_y + 0.25),
        (_DECODER_X - _WIDTH / 2, cross_y),
        connectionstyle="arc3,rad=-0.25",
        color="#548235",
        linewidth=1.6,
    )
    axes.text(
        5.0, memory_y + 0.95, "read by every\ndecoder layer", ha="right", va="center", fontsize=8, color="#548235"
    )

    # The generator and what comes out of it.
    generator_y = decoder_top + 0.55
    _arrow(axes, (_DECODER_X, decoder_top), (_DECODER_X, generator_y))
    _box(axes, _DECODER_X, generator_y, 0.5, "generator: linear D -> V")
    _arrow(axes, (_DECODER_X, generator_y + 0.5), (_DECODER_X, generator_y + 0.75))
    _box(axes, _DECODER_X, generator_y + 0.75, 0.62, "logits [B, T, V]\nsoftmax: next-token probabilities")
    _arrow(axes, (_DECODER_X, generator_y + 1.37), (_DECODER_X, generator_y + 1.6))
    axes.text(_DECODER_X, generator_y + 1.75, "predicts y <eos>", ha="center", va="center", fontsize=9)

    legend = [
        Patch(facecolor=colours[0], edgecolor="#404040", label="encoder self-attention (src_key_padding_mask)"),
        Patch(facecolor=colours[1], edgecolor="#404040", label="decoder masked self-attention (tgt_mask, causal)"),
        Patch(facecolor=colours[2], edgecolor="#404040", label="cross-attention (memory_key_padding_mask)"),
    ]
    axes.legend(handles=legend, loc="upper left", fontsize=8, frameon=False, bbox_to_anchor=(0.0, 1.0))
    figure.suptitle("The Transformer: encoder, decoder, generator (post-norm, as in the paper)", fontsize=11)
    laid_out(figure)
    return figure


def plot_architecture(path: str | os.PathLike[str], figsize: tuple[float, float] = (8.0, 9.0), dpi: int = 80) -> Path:
    """Write :func:`draw_architecture` to the PNG file ``path`` and return the path."""
    check_figure_size(figsize, dpi)
    return save_png(draw_architecture(figsize), path, dpi)
