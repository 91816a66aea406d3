"""What every figure module shares: matplotlib without a screen, CJK text, the PNG's size and file, its display.

Importing this module is the figure modules' first step: it imports matplotlib (or raises
the one-line error naming the plots extra), selects the Agg backend, so that figures are
drawn on machines without a display, and lets Chinese text draw with an installed CJK font.
Every figure takes ``figsize`` (inches) and ``dpi``; the PNG is exactly
``figsize[0] * dpi`` by ``figsize[1] * dpi`` pixels (no tight bounding box), so that a
caller, and the tests, know its size in advance. :func:`show_figure` shows a written PNG
inline in a notebook and hands back its path, which a script prints.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

from transformer_lab.atomic_files import write_through_temporary
from transformer_lab.extras import require_extra
from transformer_lab.folders import check_file_output, refused_write, writes_refused_as
from transformer_lab.path_argument import path_argument
from transformer_lab.setting_error import SettingError

matplotlib = require_extra("matplotlib", "drawing figures")
matplotlib.use("Agg")  # files only: works on machines without a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.backend_bases import FigureCanvasBase  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from transformer_lab.lab.fonts import enable_cjk_fallback  # noqa: E402

__all__ = ["check_figure_size", "check_image_path", "laid_out", "save_png", "show_figure", "write_figure"]

# Chinese tokens, couplet lines and class names draw with an installed CJK font.
enable_cjk_fallback()


def check_figure_size(figsize: tuple[float, float], dpi: int) -> None:
    """Refuse a size that is not two positive inches, a resolution below 10 dpi, or under a pixel either way."""
    if len(figsize) != 2 or min(figsize) <= 0:
        raise ValueError(f"figsize must be two positive numbers (width, height) in inches, got {figsize!r}")
    if dpi < 10:
        raise ValueError(f"dpi must be >= 10, got {dpi}")
    if min(figsize) * dpi < 1:  # matplotlib would draw it, then fail to write an empty image
        raise ValueError(
            f"figsize and dpi: expected a figure of at least 1 pixel each way, got {figsize[0] * dpi:g} by "
            f"{figsize[1] * dpi:g} ({figsize!r} inches at {dpi} dpi)"
        )


def laid_out(figure: Figure, rect: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0)) -> None:
    """Fit ``figure``'s axes, labels and margins into its size (``tight_layout`` within ``rect``).

    A size too small for them is a `SettingError` naming ``figsize``, and the figure is closed:
    matplotlib would warn and draw the labels over each other.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="Tight layout not applied", category=UserWarning)
        try:
            figure.tight_layout(rect=rect)
        except UserWarning:
            width, height = figure.get_size_inches()
            plt.close(figure)
            raise SettingError(
                f"{{figsize}}: expected a figure large enough for its labels and margins, got {width:g} x "
                f"{height:g} inches, which leaves them no room; make it larger",
                ("figsize",),
            ) from None


def check_image_path(path: str | os.PathLike[str], name: str = "path") -> Path:
    """``path`` as a Path if it names an image file of a format matplotlib writes (.png, .svg, .pdf, ...).

    A folder is refused, not written beside: matplotlib would add ".png" to its name and
    write a file other than the one the caller is told about. A name without a known
    suffix is refused for the same reason, and a path the system will not write (`folders.check_file_output`).
    ``name`` is what the message calls the path: a command line passes its option (``--plot-attention``).
    """
    path = path_argument(path, name)
    if path.is_dir():
        raise ValueError(
            f"{name}: expected an image file, got the folder {str(path)!r}; name a file in it, such as "
            f"{str(path / 'attention.png')!r}"
        )
    known = _writable_formats()
    if path.suffix.lower().lstrip(".") not in known:
        raise ValueError(
            f"{name}: expected a file name ending in {', '.join('.' + suffix for suffix in known)}, got {str(path)!r}"
        )
    # A file on the way, /proc, a read-only disk: said now, not after the figure's work (a decoding, for
    # plot_attention), as an error of the system's that named no argument.
    check_file_output(path, name)
    return path


def _writable_formats() -> list[str]:
    """The suffixes matplotlib writes here: its formats, less PGF where its TeX program is not installed."""
    formats = set(FigureCanvasBase.get_supported_filetypes())
    # PGF is written by running TeX (xelatex by default): without it, savefig fails after the work.
    if shutil.which(matplotlib.rcParams["pgf.texsystem"]) is None:
        formats.discard("pgf")
    return sorted(formats)


def save_png(figure: Figure, path: str | os.PathLike[str], dpi: int) -> Path:
    """Write ``figure`` to the PNG file ``path`` (its folder created) and close it; anything but .png is refused."""
    try:
        path = path_argument(path, "path")
    except TypeError:
        plt.close(figure)
        raise
    if path.is_dir():
        plt.close(figure)
        check_image_path(path)  # names the folder
    if path.suffix.lower() != ".png":
        plt.close(figure)
        raise ValueError(f"path must name a .png file, got {str(path)!r}")
    try:
        write_figure(figure, path, dpi)
    finally:
        plt.close(figure)
    return path


def write_figure(figure: Figure, path: Path, dpi: int) -> None:
    """Save ``figure`` to the image file ``path`` (its folder made) whole or not at all, as text outputs are.

    Drawn into a temporary file beside it and renamed: a full disk or Ctrl-C while matplotlib
    writes leaves an earlier figure of that name as it was. A folder the system refuses (read
    only, full, not this user's, or one that takes no files, as /proc) is one line naming ``path`` (a
    `FolderWriteError`).
    """
    try:
        with writes_refused_as(path, "nothing was written", permission=True):
            path.parent.mkdir(parents=True, exist_ok=True)
            write_through_temporary(path, lambda file: figure.savefig(file, dpi=dpi, format=path.suffix.lower()[1:]))
    except FileNotFoundError as error:  # its folder is there or was just made: the system refused the file in it
        raise refused_write(error, path, "nothing was written") from error


def show_figure(path: str | os.PathLike[str]) -> Path:
    """Show the PNG file ``path`` inline where a Jupyter kernel runs this code; return the path.

    Run as a script, IPython's ``display`` would print only ``<IPython.core.display.Image
    object>`` and never say where the figure is: there nothing is shown, and the caller prints
    the returned path.
    """
    path = path_argument(path, "path")
    if not path.is_file():
        raise FileNotFoundError(f"path: expected a PNG file that exists, got {str(path)!r}")
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
    except ImportError:  # IPython comes with the docs extra; without it there is no notebook either
        return path
    # A kernel's shell has a kernel; a terminal IPython has none and cannot draw an image.
    if getattr(get_ipython(), "kernel", None) is not None:
        display(Image(filename=str(path)))
    return path
