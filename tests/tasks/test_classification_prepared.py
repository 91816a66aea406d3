"""Classification through the prepared store: ids, labels and lines equal the data read whole, the cache is
reused while its inputs hold, and `prepare classification` feeds `train` and `evaluate --split validation`."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.tasks.classification_whole_read import read_whole
from tests.tasks.test_labelled_classification import TINY, write_topic_csv
from transformer_lab.cli import main
from transformer_lab.data import labelled_text, prepared_labelled
from transformer_lab.data.prepared_labelled import open_prepared_labelled
from transformer_lab.tasks.classification import data as classification_data
from transformer_lab.tasks.classification import train as classification_train
from transformer_lab.training import apply_overrides


def test_the_store_holds_the_ids_labels_and_lines_of_the_data_read_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    train_file = write_topic_csv(tmp_path / "train.csv", per_class=10, seed=0)
    overrides = [f"data.train_files={train_file}", f"data.cache_dir={tmp_path / 'cache'}", *TINY]
    config = apply_overrides(classification_train.default_config(), overrides).data
    whole = read_whole(config)
    train_rows, validation_rows = whole.train_rows, whole.data.validation_articles
    class_names, tokenizer = whole.data.class_names, whole.data.tokenizer
    prepared = classification_data.build_data(config)
    assert prepared.class_names == class_names
    assert prepared.tokenizer.to_json() == tokenizer.to_json()
    assert len(prepared.train_store) == len(train_rows) == 24
    for index, article in enumerate(train_rows):
        assert prepared.train_store.ids("tokens", index).tolist() == tokenizer.encode(article.text)
        assert int(prepared.train_store.labels[index]) == article.label  # type: ignore[index]
        assert int(prepared.train_line_numbers[index]) == article.line_number
    assert [(row.text, row.label, row.line_number) for row in prepared.validation_articles] == [
        (row.text, row.label, row.line_number) for row in validation_rows
    ]

    caplog.set_level(logging.INFO, logger="transformer_lab.data")
    caplog.clear()
    classification_data.build_data(config, prepared.tokenizer, prepared.class_names)
    assert "reusing the prepared corpus" in caplog.text
    with train_file.open("a", encoding="utf-8") as file:
        file.write("一个新的标题,一个新的正文,体育\n")
    caplog.clear()
    grown = classification_data.build_data(config)
    assert "changed size" in caplog.text
    assert len(grown.train_store) + len(grown.validation_articles) == 31


def test_prepare_classification_then_train_and_evaluate_from_the_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train_file = write_topic_csv(tmp_path / "train.csv", per_class=20, seed=0)
    prepared_dir = tmp_path / "prepared"
    settings = [argument for item in TINY for argument in ("--set", item)]
    # The corpus's own settings: the batch size is a setting of train, which prepare refuses.
    corpus_settings = [item for item in TINY if item.startswith("data.") and not item.startswith("data.max_tokens=")]
    data_settings = [argument for item in corpus_settings for argument in ("--set", item)]
    arguments = ["prepare", "classification", "--train", str(train_file), "--out", str(prepared_dir)]
    assert main([*arguments, *data_settings]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[0])
    assert summary["train_rows"] == 48 and summary["validation_rows"] == 12
    prepared = open_prepared_labelled(prepared_dir)

    out = tmp_path / "run"
    assert main(["train", "classification", "--prepared", str(prepared_dir), "--out", str(out), *settings]) == 0
    capsys.readouterr()
    report_path = tmp_path / "validation.json"
    code = main(
        ["evaluate", "classification", "--checkpoint", str(out), "--split", "validation", "--output", str(report_path)]
    )
    assert code == 0
    report = json.loads(report_path.read_text(encoding="utf-8"))
    supports = [row["support"] for row in report["per_class"].values()]
    assert sum(supports) == len(prepared.validation_rows) == 12


def test_a_class_spelt_two_ways_is_refused_by_train_and_a_cache_that_holds_both_is_prepared_again(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    labels = ["sci tech", "sport", "world", "sci  tech"] * 6
    train_file = tmp_path / "topics.jsonl"
    train_file.write_text(
        "".join(
            json.dumps({"text": f"news {number} of {label}", "label": label}) + "\n"
            for number, label in enumerate(labels)
        ),
        encoding="utf-8",
    )
    cache = tmp_path / "cache"
    overrides = [f"data.train_files={train_file}", f"data.cache_dir={cache}", *TINY[1:], "data.text_fields=text"]
    config = apply_overrides(classification_train.default_config(), overrides).data
    # A corpus cached by a reader that took the two spellings as two classes.
    for module in (labelled_text, prepared_labelled):
        monkeypatch.setattr(module, "label_spelling_key", lambda label: label)
    assert classification_data.build_data(config).class_names == ("sci  tech", "sci tech", "sport", "world")
    monkeypatch.undo()

    out = tmp_path / "run"
    settings = [argument for item in overrides for argument in ("--set", item)]
    caplog.set_level(logging.INFO, logger="transformer_lab.data")
    assert main(["train", "classification", "--out", str(out), *settings]) == 2
    # The spaces as in the file: the one-line error keeps a quoted label's inner spaces.
    assert (
        f"{train_file}: line 4: field 'label': expected each class spelt one way, got 'sci  tech', which differs "
        "from the label 'sci tech' of line 1 only in whitespace" in capsys.readouterr().err
    )
    assert "preparing the corpus again" in caplog.text and "expected each class spelt one way" in caplog.text
    assert not out.exists()


def test_validation_texts_that_are_training_texts_too_are_counted_in_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    train_file = write_topic_csv(tmp_path / "train.csv", per_class=10, seed=0)
    rows = train_file.read_text(encoding="utf-8").splitlines()
    other = write_topic_csv(tmp_path / "other.csv", per_class=2, seed=9).read_text(encoding="utf-8").splitlines()
    valid_file = tmp_path / "valid.csv"
    # Lines 2 and 3 of the validation file are training rows 5 and 17; the others are new.
    valid_file.write_text("\n".join([rows[0], other[1], rows[5], rows[17], other[2]]) + "\n", encoding="utf-8")
    caplog.set_level(logging.WARNING, logger="transformer_lab.data")
    arguments = ["prepare", "classification", "--train", str(train_file), "--valid", str(valid_file)]
    settings = ["--set", "data.text_fields=title,body", "--set", "data.vocab_size=300"]
    assert main([*arguments, *settings, "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    warnings = [record.getMessage() for record in caplog.records if "also training" in record.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"{valid_file}: 2 of the 4 validation texts are also training texts of {train_file}")
    assert "(the first: line 3, " in warnings[0]

    # Validation texts of their own: nothing to say.
    valid_file.write_text("\n".join([rows[0], *other[1:]]) + "\n", encoding="utf-8")
    caplog.clear()
    assert main([*arguments, *settings, "--out", str(tmp_path / "out-new"), "--no-progress"]) == 0
    assert not [record for record in caplog.records if "also training" in record.getMessage()]


def test_prepare_says_the_classes_it_found_so_a_class_spelt_two_ways_shows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Labels given as names and as numbers are four classes; the preparation names them, as found.

    (Was: nothing said which classes were read; the model trained ``pos`` and ``1`` apart.)
    """
    train_file = tmp_path / "reviews.tsv"
    labels = ["pos", "neg", "1", "0"] * 6
    rows = [f"a review {number} that reads {label}\t{label}" for number, label in enumerate(labels)]
    train_file.write_text("text\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    caplog.set_level(logging.INFO, logger="transformer_lab.data")
    arguments = ["prepare", "classification", "--train", str(train_file), "--set", "data.vocab_size=300"]
    assert main([*arguments, "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    said = [record.getMessage() for record in caplog.records if "classes in the labels" in record.getMessage()]
    assert said == [f"{train_file}: 4 classes in the labels: 0, 1, neg, pos"]
