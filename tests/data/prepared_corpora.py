"""Small prepared folders of each corpus kind, made with data settings other than the presets', for the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tasks.couplet_fixture import made_up_couplets
from tests.tasks.test_labelled_classification import write_topic_csv
from transformer_lab.cli import main


def prepare_corpora(root: Path) -> dict[str, Path]:
    """One prepared folder per task that prepares (by task name), and the pair files ("source", "target")."""
    source, target = root / "corpus.de", root / "corpus.en"
    source.write_text("".join(f"wort{n % 17} wort{n % 5}\n" for n in range(80)), encoding="utf-8")
    target.write_text("".join(f"word{n % 17} word{n % 5}\n" for n in range(80)), encoding="utf-8")
    pairs = root / "de-en"
    settings = [
        *("--no-progress", "--set", "data.vocab_size=300", "--set", "data.min_frequency=1"),
        *("--set", "data.num_carved_validation=6"),
    ]
    assert main(["prepare", "translation", "--train", str(source), str(target), "--out", str(pairs), *settings]) == 0
    upper, lower = root / "upper.txt", root / "lower.txt"
    couplets = made_up_couplets(60, seed=5)
    upper.write_text("".join(first + "\n" for first, _ in couplets), encoding="utf-8")
    lower.write_text("".join(second + "\n" for _, second in couplets), encoding="utf-8")
    couplet = root / "couplets"
    arguments = ["prepare", "couplet", "--train", str(upper), str(lower), "--out", str(couplet)]
    assert main([*arguments, "--set", "data.num_validation=6", "--set", "data.max_length=30"]) == 0
    news = write_topic_csv(root / "train.csv", per_class=10, seed=0)
    labelled = root / "labelled"
    settings = ["--set", "data.text_fields=title,body", "--set", "data.vocab_size=300"]
    assert main(["prepare", "classification", "--train", str(news), "--out", str(labelled), *settings]) == 0
    return {"translation": pairs, "couplet": couplet, "classification": labelled, "source": source, "target": target}


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The one stderr line a refused command wrote (no traceback)."""
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "Traceback" not in error, error
    return error
