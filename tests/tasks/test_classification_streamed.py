"""The streamed preparation of labelled text gives what the data read whole gives: AG News with malformed
lines skipped and a `num_train` cut, the user's file with a validation file of its own, a checkpoint's
tokenizer and classes; and a bad row is still one error naming the file and the line."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.tasks.classification_whole_read import read_whole
from tests.tasks.news_fixture import write_news_folder
from tests.tasks.test_labelled_classification import write_topic_csv
from transformer_lab.data import SubwordTokenizer
from transformer_lab.tasks.classification import data as classification_data


def assert_prepared_equals_whole(
    config: classification_data.ClassificationDataConfig,
    out: Path,
    tokenizer: SubwordTokenizer | None = None,
    class_names: tuple[str, ...] | None = None,
) -> classification_data.ClassificationData:
    read = read_whole(config, tokenizer, class_names)
    whole = read.data
    prepared = classification_data.corpus_kind(config, tokenizer, class_names).prepare(out)
    assert prepared.class_names == whole.class_names
    assert prepared.tokenizer.to_json() == whole.tokenizer.to_json()
    assert prepared.report == whole.report
    assert len(prepared.store) == len(read.train_rows)
    for index, article in enumerate(read.train_rows):
        assert prepared.store.ids("tokens", index).tolist() == whole.tokenizer.encode(article.text)
        assert int(prepared.store.labels[index]) == article.label  # type: ignore[index]
        assert int(prepared.line_numbers[index]) == article.line_number
    assert [(row.text, row.label, row.line_number) for row in prepared.validation_rows] == [
        (row.text, row.label, row.line_number) for row in whole.validation_articles
    ]
    return whole


def test_ag_news_with_malformed_lines_skipped_and_a_cut(tmp_path: Path) -> None:
    root = write_news_folder(tmp_path / "data", train_per_class=40)
    train = root / "ag_news" / "train.csv"
    lines = train.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[3] = '"9","a class that is none","of the four"\n'
    lines.append('"2","two fields only"\n')  # past the cut: still counted, as a whole read counts it
    train.write_text("".join(lines), encoding="utf-8")
    config = classification_data.ClassificationDataConfig(
        data_dir=str(root), skip_malformed=True, num_train=120, vocab_size=300, validation_fraction=0.2
    )
    whole = assert_prepared_equals_whole(config, tmp_path / "cut")
    assert whole.num_skipped == 2 and len(whole.train_store) + len(whole.validation_articles) == 120
    strict = classification_data.ClassificationDataConfig(data_dir=str(root), vocab_size=300)
    with pytest.raises(ValueError, match=r"train\.csv: line 4: expected a class id"):
        classification_data.corpus_kind(strict).prepare(tmp_path / "strict")
    assert not (tmp_path / "strict").exists()


def test_the_users_file_with_its_own_validation_and_a_checkpoints_tokenizer(tmp_path: Path) -> None:
    train_file = write_topic_csv(tmp_path / "train.csv", per_class=15, seed=1)
    valid_file = write_topic_csv(tmp_path / "valid.csv", per_class=3, seed=2)
    config = classification_data.ClassificationDataConfig(
        train_files=(str(train_file),),
        valid_files=(str(valid_file),),
        text_fields=("title", "body"),
        vocab_size=300,
    )
    whole = assert_prepared_equals_whole(config, tmp_path / "own")
    assert whole.validation_file == valid_file and len(whole.validation_articles) == 3 * len(whole.class_names)
    # A resumed run's tokenizer and classes (the classes in another order): kept, not learned.
    classes = tuple(reversed(whole.class_names))
    assert_prepared_equals_whole(config, tmp_path / "given", whole.tokenizer, classes)
    # A label the checkpoint never saw is one error naming the file, the line and the label: the whole read's.
    unseen = r"train\.csv: line \d+: field 'label': expected one of the checkpoint's classes"
    with pytest.raises(ValueError, match=unseen) as read:
        read_whole(config, whole.tokenizer, classes[1:])
    with pytest.raises(ValueError) as streamed:
        classification_data.corpus_kind(config, whole.tokenizer, classes[1:]).prepare(tmp_path / "unseen")
    assert str(streamed.value) == str(read.value)


def test_training_rows_repeating_a_carved_text_are_left_out_as_a_whole_read_leaves_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Every row twice: a carved row's twin stood in training, and validation scored texts the model had learned.
    train_file = write_topic_csv(tmp_path / "once.csv", per_class=15, seed=3)
    header, *rows = train_file.read_text(encoding="utf-8").splitlines()
    (tmp_path / "twice.csv").write_text("\n".join([header, *rows, *reversed(rows)]) + "\n", encoding="utf-8")
    config = classification_data.ClassificationDataConfig(
        train_files=(str(tmp_path / "twice.csv"),), text_fields=("title", "body"), vocab_size=300
    )
    caplog.set_level(logging.INFO, logger="transformer_lab.data")
    whole = assert_prepared_equals_whole(config, tmp_path / "prepared")
    validation_texts = {row.text for row in whole.validation_articles}
    trained = read_whole(config).train_rows
    assert validation_texts and not validation_texts & {row.text for row in trained}
    left_out = 2 * len(rows) - len(whole.validation_articles) - len(trained)
    assert left_out >= len(whole.validation_articles) // 2  # most held-out rows' twins were training rows
    assert f"left out {left_out} training rows whose text is a held-out validation row's" in caplog.text
