"""The optional packages: the core works without them, and a feature that needs one names the pip install."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from transformer_lab.cli import main
from transformer_lab.data import chinese
from transformer_lab.extras import EXTRA_OF_PACKAGE, MissingExtraError
from transformer_lab.tasks.couplet import train as couplet_train
from transformer_lab.tasks.couplet.data import build_data

BLOCK_EXTRAS = "import sys\n" + "".join(f"sys.modules[{package!r}] = None\n" for package in EXTRA_OF_PACKAGE)


def test_the_command_line_and_the_core_load_without_any_extra() -> None:
    script = BLOCK_EXTRAS + (
        "from transformer_lab.cli import main\n"
        "from transformer_lab.tasks import classification, couplet, translation, synthetic\n"
        "assert main(['plot', 'masks', '--out', '/nonexistent/x.png']) == 1\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    # The figure needs matplotlib: one line naming the extra, not a traceback.
    assert (
        "the matplotlib package, needed for drawing figures, is not installed: "
        'in your transformer_lab clone, run pip install -e ".[plots]"' in result.stderr
    )
    assert "Traceback" not in result.stderr


def test_without_the_plots_extra_evaluate_and_the_demo_finish_and_say_what_was_not_drawn(
    classification_checkpoint: Path, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(classification_checkpoint, checkpoint)
    tiny_demo = [
        *("--set", "data.num_train=64", "--set", "data.num_test=10", "--set", "data.max_length=5"),
        *("--set", "model.d_model=16", "--set", "model.nhead=2", "--set", "model.dim_feedforward=32"),
        *("--set", "train.max_steps=2", "--set", "train.epochs=0", "--set", "train.progress_bar=false"),
    ]
    script = BLOCK_EXTRAS + (
        "from transformer_lab.cli import main\n"
        f"assert main(['evaluate', 'classification', '--checkpoint', {str(checkpoint)!r}]) == 0\n"
        f"assert main(['demo', '--out', {str(tmp_path / 'demo')!r}, *{tiny_demo!r}]) == 0\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    # The scores are written and recorded in the card; only the pictures are missing, each said in one line.
    assert json.loads((checkpoint / "report.test.json").read_text(encoding="utf-8"))["accuracy"] >= 0.0
    assert "| test | argmax | accuracy |" in (checkpoint / "README.md").read_text(encoding="utf-8")
    missing = (
        "the matplotlib package, needed for drawing figures, is not installed: in your transformer_lab clone, run "
    )
    missing += 'pip install -e ".[plots]"'
    assert f"confusion matrix: not drawn: {missing}" in result.stderr
    assert f"Cross-attention heat map: not drawn: {missing}" in result.stderr
    assert not list(checkpoint.glob("*.png")) and not (tmp_path / "demo" / "attention.png").exists()
    assert "Traceback" not in result.stderr


def test_the_couplet_tones_name_their_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pypinyin", None)
    chinese.mandarin_tone.cache_clear()
    try:
        with pytest.raises(MissingExtraError, match=r'pip install -e "\.\[couplet\]"'):
            chinese.mandarin_tone("春")
    finally:
        chinese.mandarin_tone.cache_clear()
    monkeypatch.undo()
    assert chinese.mandarin_tone("春") == 1  # with pypinyin back, the tone is read


def test_serve_without_its_extra_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    assert main(["serve", "--checkpoint", "anything"]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and 'pip install -e ".[serve]"' in error


def test_couplet_training_without_its_extra_stops_before_any_work(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pairs = tmp_path / "pairs.jsonl"
    lines = [json.dumps({"upper": "春风" + "一二三四五六七八九十"[n % 10], "lower": "秋月明"}) for n in range(30)]
    pairs.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    read_corpora: list[object] = []
    monkeypatch.setattr(couplet_train, "build_data", lambda *args: read_corpora.append(args) or build_data(*args))
    monkeypatch.setitem(sys.modules, "pypinyin", None)
    chinese.mandarin_tone.cache_clear()
    try:
        code = main(
            [
                "train",
                "couplet",
                "--train",
                str(pairs),
                "--out",
                str(out),
                "--set",
                "data.num_validation=5",
                "--set",
                "train.max_steps=2",
            ]
        )
    finally:
        chinese.mandarin_tone.cache_clear()
    captured = capsys.readouterr()
    assert code == 1 and 'pip install -e ".[couplet]"' in captured.err and "Traceback" not in captured.err
    # Said before the corpus is read (it was said after the first epoch), and no run folder is left.
    assert read_corpora == [] and not out.exists()
