"""Chinese (and Japanese, Korean) text in figures: an installed CJK font as matplotlib's fallback.

matplotlib's default font, DejaVu Sans, has no CJK glyphs: couplet lines, Chinese class
names and tokens would be drawn as boxes. :func:`enable_cjk_fallback` finds an installed
CJK font (Noto Sans CJK, WenQuanYi, Microsoft YaHei, PingFang, ...), also one installed after
matplotlib built its font cache, and appends it to the font families, so that each glyph
the default font lacks comes from it (matplotlib falls back glyph by glyph). Where none is installed,
:func:`check_cjk_text` warns once, naming what to install, and silences matplotlib's own
warning for each missing glyph (twenty lines for one couplet), which says nothing more.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable
from pathlib import Path

from matplotlib import font_manager, rcParams

logger = logging.getLogger(__name__)

# Preferred first: Simplified Chinese faces, then the other CJK faces of common systems.
CJK_FAMILIES = (
    "Noto Sans CJK SC",
    "Noto Sans SC",
    "Source Han Sans SC",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "Microsoft YaHei",
    "PingFang SC",
    "Hiragino Sans GB",
    "SimHei",
    "Noto Sans CJK JP",
    "Noto Serif CJK SC",
    "AR PL UMing CN",
)
# Font files of those families, for a font installed after matplotlib's cache was built.
_CJK_FILE_MARKS = ("notosanscjk", "notoserifcjk", "sourcehansans", "wqy", "msyh", "pingfang", "simhei", "uming")
INSTALL_HINT = "install a CJK font: Debian/Ubuntu 'apt-get install fonts-noto-cjk', or Noto Sans CJK from Google Fonts"

# matplotlib's UserWarning for each character its fonts lack: "Glyph 26202 (...) missing from font(s) ...".
_MISSING_GLYPH_WARNING = r"Glyph \d+ .*missing from font"

_warned = False


def _installed_families() -> set[str]:
    return {entry.name for entry in font_manager.fontManager.ttflist}


def installed_cjk_family() -> str | None:
    """The first of ``CJK_FAMILIES`` matplotlib can use here, or None."""
    found = _installed_families()
    for family in CJK_FAMILIES:
        if family in found:
            return family
    # Fonts installed after matplotlib cached its list are not in it yet: add their files.
    for path in font_manager.findSystemFonts():
        if any(mark in Path(path).name.lower() for mark in _CJK_FILE_MARKS):
            try:
                font_manager.fontManager.addfont(path)
            except (OSError, RuntimeError, ValueError):
                continue
    found = _installed_families()
    return next((family for family in CJK_FAMILIES if family in found), None)


def enable_cjk_fallback() -> str | None:
    """Make an installed CJK font the fallback of the sans-serif fonts; return its family, or None."""
    family = installed_cjk_family()
    if family is None:
        return None
    # matplotlib falls back glyph by glyph along font.family, where a generic name such
    # as "sans-serif" stands for one font: the CJK family goes after those.
    families = [name for name in rcParams["font.family"] if name != family]
    rcParams["font.family"] = [*families, family]
    return family


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a CJK ideograph, kana, hangul or CJK punctuation."""
    return any(
        "\u2e80" <= character <= "\u9fff" or "\uac00" <= character <= "\ud7af" or "\uff00" <= character <= "\uffef"
        for character in text
    )


def check_cjk_text(texts: Iterable[str]) -> None:
    """Warn once (logging) if ``texts`` hold CJK characters and no CJK font is installed.

    matplotlib's missing-glyph warnings are then ignored, for this figure and the later
    ones: the one line here has said what they would repeat per character.
    """
    global _warned
    if not any(has_cjk(text) for text in texts):
        return
    if not _warned:
        if installed_cjk_family() is not None:
            return
        _warned = True
        logger.warning("the figure has CJK text but no font for it (drawn as boxes); %s", INSTALL_HINT)
    # Added on every such figure, not once: a caller's warnings.catch_warnings() drops it on exit.
    warnings.filterwarnings("ignore", message=_MISSING_GLYPH_WARNING, category=UserWarning)
