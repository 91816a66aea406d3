"""What every figure module shares: matplotlib without a screen, CJK text, and the PNG's size and file.

Importing this module is the figure modules' first step: it imports matplotlib (or raises
the one-line error naming the plots extra), selects the Agg backend, so that figures are
drawn on machines without a display, and lets Chinese text draw with an installed CJK font.
Every figure takes ``figsize`` (inches) and ``dpi``; the PNG is exactly
``figsize[0] * dpi`` by ``figsize[1] * dpi`` pixels (no tight bounding box), so that a
caller, and the tests, know its size in advance.
"""

from __future__ import annotations

import os
from pathlib import Path

from transformer_lab.extras import require_extra

matplotlib = require_extra("matplotlib", "drawing figures")
matplotlib.use("Agg")  # files only: works on machines without a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from transformer_lab.lab.fonts import enable_cjk_fallback  # noqa: E402

__all__ = ["check_figure_size", "save_png"]

# Chinese tokens, couplet lines and class names draw with an installed CJK font.
enable_cjk_fallback()


def check_figure_size(figsize: tuple[float, float], dpi: int) -> None:
    """Refuse a size that is not two positive inches, or a resolution below 10 dpi."""
    if len(figsize) != 2 or min(figsize) <= 0:
        raise ValueError(f"figsize must be two positive numbers (width, height) in inches, got {figsize!r}")
    if dpi < 10:
        raise ValueError(f"dpi must be >= 10, got {dpi}")


def save_png(figure: Figure, path: str | os.PathLike[str], dpi: int) -> Path:
    """Write ``figure`` to the PNG file ``path`` (its folder created) and close it; anything but .png is refused."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        plt.close(figure)
        raise ValueError(f"path must name a .png file, got {str(path)!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return path
