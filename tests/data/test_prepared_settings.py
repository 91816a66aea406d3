"""A data setting that a prepared folder fixes is the folder's: another value is refused, naming the key and both
values, before training; one left to the preset takes the corpus's value; the batching stays free."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from tests.data.prepared_corpora import one_line, prepare_corpora
from transformer_lab.cli import main
from transformer_lab.data.prepared_settings import with_prepared_settings
from transformer_lab.tasks.classification import train as classification_train
from transformer_lab.tasks.couplet import train as couplet_train
from transformer_lab.tasks.registry import TASKS
from transformer_lab.tasks.translation import train as translation_train


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One prepared folder per task, each made with some data settings other than the preset's."""
    return prepare_corpora(tmp_path_factory.mktemp("settings"))


@pytest.mark.parametrize(
    ("task", "options", "key", "own", "given"),
    [
        ("translation", ["--set", "data.vocab_size=500"], "vocab_size", "300", "500"),
        # Typed, though it is the preset's own value: the folder's 300 is what the run trains with.
        ("translation", ["--set", "data.vocab_size=8000"], "vocab_size", "300", "8000"),
        ("translation", ["--set", "data.lowercase=true"], "lowercase", "false", "true"),
        ("translation", ["--source-language", "fr"], "source_language", "'de'", "'fr'"),
        ("couplet", ["--set", "data.max_length=40"], "max_length", "30", "40"),
        ("couplet", ["--set", "data.add_reversed_pairs=true"], "add_reversed_pairs", "false", "true"),
        ("classification", ["--set", "data.vocab_size=400"], "vocab_size", "300", "400"),
        ("classification", ["--set", "data.label_field=topic"], "label_field", "'label'", "'topic'"),
    ],
)
def test_a_setting_the_prepared_folder_fixes_is_refused_when_it_differs(
    corpora: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    task: str,
    options: list[str],
    key: str,
    own: str,
    given: str,
) -> None:
    capsys.readouterr()
    folder = corpora[task]
    out = tmp_path / "run"
    run = ["train", task, "--prepared", str(folder), "--out", str(out), "--set", "train.max_steps=1"]
    assert main([*run, *options]) == 2
    assert one_line(capsys).endswith(
        f"data.{key}: expected the prepared corpus {folder}'s own value ({own}) or none, got {given}; "
        "prepare the corpus again to change it"
    )
    assert not (out / "last").exists()  # refused before training


def test_the_run_config_takes_the_corpus_values_and_refuses_a_typed_one_that_differs(
    corpora: dict[str, Path],
) -> None:
    folder = corpora["translation"]
    config = translation_train.default_config()
    config.data = dataclasses.replace(config.data, prepared_dir=str(folder), max_tokens=512, source_language="fr")
    # Left to the preset (not among the changed keys): the corpus's values, what config.json records.
    settled = with_prepared_settings(TASKS["translation"].corpus_kind, config, {"data.prepared_dir", "data.max_tokens"})
    assert (settled.data.vocab_size, settled.data.min_frequency, settled.data.source_language) == (300, 1, "de")
    assert settled.data.num_carved_validation == 6 and settled.data.max_tokens == 512  # the batching stays free
    # Typed, even where it equals the preset's default: refused.
    config.data = dataclasses.replace(config.data, source_language="de")
    with pytest.raises(ValueError, match=r"^data\.vocab_size: expected the prepared corpus .*'s own value \(300\)"):
        with_prepared_settings(TASKS["translation"].corpus_kind, config, {"data.prepared_dir", "data.vocab_size"})

    couplet = couplet_train.default_config()
    couplet.data = dataclasses.replace(couplet.data, prepared_dir=str(corpora["couplet"]), seed=7)
    settled_couplet = with_prepared_settings(TASKS["couplet"].corpus_kind, couplet, {"data.prepared_dir", "data.seed"})
    assert (settled_couplet.data.max_length, settled_couplet.data.num_validation, settled_couplet.data.seed) == (
        30,
        6,
        7,
    )
    news = classification_train.default_config()
    news.data = dataclasses.replace(news.data, prepared_dir=str(corpora["classification"]))
    settled_news = with_prepared_settings(TASKS["classification"].corpus_kind, news, {"data.prepared_dir"})
    assert (settled_news.data.vocab_size, settled_news.data.text_fields) == (300, ("title", "body"))
    assert settled_news.data.train_files == ()  # a prepared run reads its folder, not the files


def test_a_run_from_a_prepared_folder_records_the_corpus_settings(corpora: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "run"
    tiny = ["--set", "model.d_model=16", "--set", "model.nhead=2", "--set", "model.dim_feedforward=32"]
    run = ["train", "translation", "--prepared", str(corpora["translation"]), "--out", str(out)]
    assert main([*run, *tiny, "--set", "train.max_steps=1", "--set", "train.progress_bar=false"]) == 0
    saved = json.loads((out / "last" / "config.json").read_text(encoding="utf-8"))
    # The folder was prepared with a BPE of 300 and min_frequency 1: config.json says so, not the preset's 8000 / 2.
    assert (saved["data"]["vocab_size"], saved["data"]["min_frequency"]) == (300, 1)


def test_a_tokenizer_file_with_a_prepared_folder_is_refused(
    corpora: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = corpora["translation"]
    run = ["train", "translation", "--prepared", str(folder), "--out", str(tmp_path / "run")]
    assert main([*run, "--set", "data.tokenizer_file=other.json"]) == 2
    assert one_line(capsys).endswith(
        f"data.tokenizer_file: expected none with the prepared corpus {folder} (its ids were made with its "
        "own tokenizer), got 'other.json'"
    )


@pytest.mark.parametrize(("task", "key", "own"), [("translation", "vocab_size", 300), ("couplet", "max_length", 30)])
def test_the_printed_preset_fed_back_with_a_prepared_folder_leaves_its_settings_to_the_folder(
    corpora: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], task: str, key: str, own: int
) -> None:
    # `config TASK` prints every key of the preset, the empty file lists too: fed back, they are the preset's.
    capsys.readouterr()
    assert main(["config", task]) == 0
    printed = tmp_path / "preset.yaml"
    printed.write_text(capsys.readouterr().out, encoding="utf-8")
    out = tmp_path / "run"
    tiny = ["--set", "model.d_model=16", "--set", "model.nhead=2", "--set", "model.dim_feedforward=32"]
    run = ["train", task, "--config", str(printed), "--prepared", str(corpora[task]), "--out", str(out), *tiny]
    assert main([*run, "--set", "train.max_steps=1", "--set", "train.progress_bar=false"]) == 0
    saved = json.loads((out / "last" / "config.json").read_text(encoding="utf-8"))
    assert saved["data"][key] == own  # the folder's value, not the preset's the file repeats
    # A value of the file that is not the preset's is still a choice, refused where the folder fixes another.
    edited = tmp_path / "edited.yaml"
    text = re.sub(rf"^  {key}: .*$", f"  {key}: {own + 1}", printed.read_text(encoding="utf-8"), flags=re.MULTILINE)
    edited.write_text(text, encoding="utf-8")
    again = ["train", task, "--config", str(edited), "--prepared", str(corpora[task]), "--out", str(tmp_path / "other")]
    assert main(again) == 2
    assert one_line(capsys).endswith(
        f"data.{key}: expected the prepared corpus {corpora[task]}'s own value ({own}) or none, got {own + 1}; "
        "prepare the corpus again to change it"
    )
