"""Options that size an allocation are bounded before any work: one line naming the option, never an abort."""

from __future__ import annotations

from pathlib import Path

import pytest

from transformer_lab.cli import main


def test_a_vocabulary_too_large_to_hold_is_refused_before_reading_the_corpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = tmp_path / "corpus.de", tmp_path / "corpus.en"
    source.write_text("ein Hund\n" * 50, encoding="utf-8")
    target.write_text("a dog\n" * 50, encoding="utf-8")
    for option in ("data.vocab_size=1000000000", "data.target_vocab_size=2000000"):
        arguments = ["train", "translation", "--train", str(source), str(target), "--out", str(tmp_path / "run")]
        assert main([*arguments, "--set", option]) == 2
        error = capsys.readouterr().err.strip()
        name = option.split("=")[0]
        assert error.startswith(f"transformer-lab train: error: {name}: expected at most 1,048,576 entries, got ")
        assert "\n" not in error
        assert not (tmp_path / "run" / "last").exists()


def test_a_classification_vocabulary_too_large_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = "".join(f'"{label}","word {index} more words"\n' for index, label in enumerate(["a", "b"] * 20))
    (tmp_path / "train.csv").write_text("label,text\n" + rows, encoding="utf-8")
    arguments = ["train", "classification", "--train", str(tmp_path / "train.csv"), "--out", str(tmp_path / "run")]
    assert main([*arguments, "--set", "data.vocab_size=1000000000"]) == 2
    assert "vocab_size: expected at most 1,048,576 entries" in capsys.readouterr().err
