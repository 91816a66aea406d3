"""Couplets through the prepared store: the ids equal the corpus read whole, the cache is reused while its
inputs hold and rebuilt when they change, and `prepare couplet` feeds `train couplet --prepared`."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest

from tests.tasks import couplet_whole_read
from tests.tasks.couplet_fixture import TINY, made_up_couplets, write_couplet_folder, write_split
from transformer_lab.cli import main
from transformer_lab.data.prepared_couplets import open_prepared_couplets
from transformer_lab.tasks.couplet import data as couplet_data
from transformer_lab.tasks.couplet import train as couplet_train


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return write_couplet_folder(tmp_path / "data", num_train=200)


def data_config(data_dir: Path, cache: Path, **changes: object) -> couplet_data.CoupletDataConfig:
    config = couplet_data.CoupletDataConfig(data_dir=str(data_dir), num_validation=20, cache_dir=str(cache))
    return dataclasses.replace(config, **changes)  # type: ignore[arg-type]


def test_the_store_holds_the_ids_of_the_corpus_read_whole(data_dir: Path, tmp_path: Path) -> None:
    config = data_config(data_dir, tmp_path / "cache", add_reversed_pairs=True)
    whole = couplet_whole_read.read_corpus(config)
    prepared = couplet_data.build_data(config)
    assert whole.train_pairs is not None and prepared.train_pairs is None
    assert prepared.vocabulary.tokens == whole.vocabulary.tokens
    assert prepared.validation_pairs == whole.validation_pairs
    assert prepared.report == whole.report
    assert len(prepared.train_store) == len(whole.train_pairs) > 0
    for index, (upper, lower) in enumerate(whole.train_pairs):
        assert prepared.train_store.ids("source", index).tolist() == whole.vocabulary.encode(list(upper))
        assert prepared.train_store.ids("target", index).tolist() == whole.vocabulary.encode(list(lower))
    assert prepared.train_store.folder is not None  # mapped from files, not held


def test_the_cache_is_reused_until_an_input_or_the_vocabulary_changes(
    data_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="transformer_lab")
    config = data_config(data_dir, tmp_path / "cache")
    first = couplet_data.build_data(config)
    # Prepared and opened, the data is described once, not once by each.
    assert sum("pairs 200" in record.getMessage() for record in caplog.records if record.levelno >= logging.INFO) == 1
    caplog.clear()
    again = couplet_data.build_data(config)
    assert "reusing the prepared corpus" in caplog.text
    assert again.train_store.folder == first.train_store.folder

    # A checkpoint's own vocabulary (a resume) reuses it too; another vocabulary does not.
    caplog.clear()
    couplet_data.build_data(config, first.vocabulary)
    assert "reusing the prepared corpus" in caplog.text
    other = type(first.vocabulary)([*first.vocabulary.tokens[4:], "龘"])
    caplog.clear()
    with_other = couplet_data.build_data(config, other)
    assert "the vocabulary differs" in caplog.text
    assert with_other.vocabulary.tokens == other.tokens

    # An edited training file (same size: one answer character swapped) is found by its hash.
    lower_file = data_dir / "couplet" / "train_couplet_machine" / "out.txt"
    text = lower_file.read_text(encoding="utf-8")
    lower_file.write_text(text.replace("秋", "雨", 1), encoding="utf-8")
    caplog.clear()
    rebuilt = couplet_data.build_data(config)
    assert "sha256 differs" in caplog.text
    assert rebuilt.train_store.num_tokens("target") == first.train_store.num_tokens("target")


def test_prepare_couplet_then_train_from_the_prepared_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upper, lower = tmp_path / "upper.txt", tmp_path / "lower.txt"
    pairs = made_up_couplets(150, seed=5)
    upper.write_text("".join(first + "\n" for first, _ in pairs), encoding="utf-8")
    lower.write_text("".join(second + "\n" for _, second in pairs), encoding="utf-8")
    prepared_dir = tmp_path / "prepared"
    # Only the data settings: preparing refuses the others.
    code = main(["prepare", "couplet", "--train", str(upper), str(lower), "--out", str(prepared_dir), *TINY[2:4]])
    assert code == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[0])
    assert summary["validation_pairs"] == 10 and summary["train_pairs"] + 10 <= 150
    prepared = open_prepared_couplets(prepared_dir)
    assert len(prepared.store) == summary["train_pairs"]

    out = tmp_path / "run"
    assert main(["train", "couplet", "--prepared", str(prepared_dir), "--out", str(out), *TINY]) == 0
    recorded = json.loads((out / "last" / "config.json").read_text(encoding="utf-8"))
    assert recorded["data"]["prepared_dir"] == str(prepared_dir)
    _, vocabulary, _ = couplet_train.load(out / "last")
    assert vocabulary.tokens == prepared.vocabulary.tokens

    # A prepared folder must not be written over, and a bad folder is one line.
    assert main(["prepare", "couplet", "--train", str(upper), str(lower), "--out", str(prepared_dir)]) != 0
    assert "expected a new folder" in capsys.readouterr().err
    write_split(tmp_path / "not-prepared", made_up_couplets(5, seed=1))
    code = main(["train", "couplet", "--prepared", str(tmp_path / "not-prepared"), "--out", str(tmp_path / "r2")])
    assert code != 0
    assert "manifest.json" in capsys.readouterr().err
