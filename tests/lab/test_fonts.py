"""Chinese text in figures: drawn with an installed CJK font (no missing glyph), or one warning naming a font."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytest

matplotlib = pytest.importorskip("matplotlib")

import torch  # noqa: E402

from transformer_lab.lab import figures, fonts, result_plots  # noqa: E402


def test_a_chinese_confusion_matrix_draws_without_missing_glyphs(tmp_path: Path) -> None:
    if fonts.installed_cjk_family() is None:
        pytest.skip(f"no CJK font installed here ({fonts.INSTALL_HINT})")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result_plots.plot_confusion_matrix(tmp_path / "zh.png", [[3, 1], [0, 4]], ["上联", "下联"], title="对联 上下")
    missing = [str(warning.message) for warning in caught if "missing from font" in str(warning.message)]
    assert missing == []
    assert (tmp_path / "zh.png").stat().st_size > 0


def test_without_a_cjk_font_one_warning_names_what_to_install(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(fonts, "installed_cjk_family", lambda: None)
    monkeypatch.setattr(fonts, "_warned", False)
    caplog.set_level(logging.WARNING, logger="transformer_lab.lab.fonts")
    fonts.check_cjk_text(["an English label"])
    assert caplog.records == []
    fonts.check_cjk_text(["上联", "下联"])
    fonts.check_cjk_text(["春风"])
    assert len(caplog.records) == 1 and "fonts-noto-cjk" in caplog.records[0].getMessage()


def test_cjk_detection() -> None:
    assert fonts.has_cjk("晚风摇树") and fonts.has_cjk("カタカナ") and fonts.has_cjk("한국어") and fonts.has_cjk("，")
    assert not fonts.has_cjk("Ein Hund läuft über die Straße.")


def test_without_a_cjk_font_matplotlib_adds_no_warning_per_missing_glyph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # As on a machine without a CJK font: DejaVu Sans alone, which has no Chinese glyph.
    monkeypatch.setattr(fonts, "installed_cjk_family", lambda: None)
    monkeypatch.setattr(fonts, "_warned", False)
    monkeypatch.setitem(matplotlib.rcParams, "font.family", ["DejaVu Sans"])
    caplog.set_level(logging.WARNING, logger="transformer_lab.lab.fonts")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for upper in ("晚风摇树树还挺", "春风得意马蹄疾"):
            figures.plot_attention_heatmap(torch.rand(7, 7), list(upper), list(upper), tmp_path / "zh.png")
    assert [str(warning.message) for warning in caught if "missing from font" in str(warning.message)] == []
    assert len(caplog.records) == 1 and "fonts-noto-cjk" in caplog.records[0].getMessage()
