"""The architecture figure: it names every part the tutorial refers to, and docs/figures/ holds its latest drawing.

The tutorial's chapters link to ``docs/figures/architecture.png``; a change to
:func:`draw_architecture` without redrawing that file would leave them pointing at an old
picture. The freshness check compares pixels, under the matplotlib version that drew the
file (its PNG says which); another version may place text a pixel apart, so there the check
skips and says why.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.image
import matplotlib.pyplot as plt
import matplotlib.text
import numpy as np
import pytest
from PIL import Image

from transformer_lab.lab.architecture_figure import draw_architecture, plot_architecture
from transformer_lab.lab.plotting import show_figure

DOCS_FIGURE = Path(__file__).resolve().parents[2] / "docs" / "figures" / "architecture.png"
REDRAW = (
    'python -c "from transformer_lab.lab.architecture_figure import plot_architecture; '
    "plot_architecture('docs/figures/architecture.png')\" (or python docs/make_docs.py)"
)


def test_the_figure_names_the_parts_the_chapters_refer_to() -> None:
    figure = draw_architecture()
    texts = " ".join(text.get_text() for text in figure.findobj(matplotlib.text.Text))
    plt.close(figure)
    for part in (
        "token embedding x sqrt(D)",
        "sinusoidal positions",
        "memory [B, S, D]",
        "masked self-attention",
        "mask: causal",
        "cross-attention",
        "Q: decoder; K, V: memory",
        "mask: source key padding",
        "feed-forward",
        "add & norm",
        "x N",
        "generator",
        "logits [B, T, V]",
        "src_key_padding_mask",
        "tgt_mask",
        "memory_key_padding_mask",
    ):
        assert part in texts, part


def test_the_png_has_the_size_asked_for(tmp_path: Path) -> None:
    path = plot_architecture(tmp_path / "architecture.png", figsize=(4.0, 4.5), dpi=40)
    image = matplotlib.image.imread(path)
    assert image.shape[:2] == (180, 160) and image.std() > 0


def test_the_docs_figure_is_the_current_drawing(tmp_path: Path) -> None:
    assert DOCS_FIGURE.is_file(), f"docs/figures/architecture.png is missing: {REDRAW}"
    drawn_with = Image.open(DOCS_FIGURE).info.get("Software", "")
    if f"version{matplotlib.__version__}," not in drawn_with:
        pytest.skip(
            f"docs/figures/architecture.png was drawn by {drawn_with!r}; this is matplotlib {matplotlib.__version__}"
        )
    fresh = matplotlib.image.imread(plot_architecture(tmp_path / "architecture.png"))
    stored = matplotlib.image.imread(DOCS_FIGURE)
    assert fresh.shape == stored.shape, f"docs/figures/architecture.png is stale: {REDRAW}"
    assert float(np.abs(fresh - stored).max()) == 0.0, f"docs/figures/architecture.png is stale: {REDRAW}"


def test_show_figure_returns_the_path_and_shows_nothing_outside_a_notebook(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = plot_architecture(tmp_path / "architecture.png", figsize=(4.0, 4.5), dpi=20)
    assert show_figure(path) == path
    assert capsys.readouterr().out == ""  # not "<IPython.core.display.Image object>"
    with pytest.raises(FileNotFoundError, match="path"):
        show_figure(tmp_path / "missing.png")
