"""Classification on the user's own labelled files: a tiny Chinese CSV with string labels, end to end.

Three made-up topics written in Chinese, each with its own characters, so that a working
model must beat chance (1/3) clearly; the labels are Chinese strings, so the class order,
the checkpoint's class names and what `classify` / `evaluate` print are all checked on
text that is not ASCII.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import shutil
from pathlib import Path

import pytest

from tests.tasks.classification_whole_read import read_whole
from transformer_lab.cli import main
from transformer_lab.data import read_labelled_text
from transformer_lab.data.prepared_labelled import open_prepared_labelled
from transformer_lab.tasks.classification import data as classification_data
from transformer_lab.tasks.classification import evaluate as classification_evaluate
from transformer_lab.tasks.classification import train as classification_train
from transformer_lab.training import apply_overrides
from transformer_lab.training.model_card import add_test_scores, file_test_name, read_card

TOPICS = {
    "体育": "球赛队跑冠军射门教练联赛",
    "财经": "股票市场银行利润投资收益",
    "科技": "电脑网络芯片软件手机数据",
}
FILLER = "的了在是有和今天我们"
CLASS_ORDER = ("体育", "科技", "财经")  # sorted: the order of their code points


def _sentence(label: str, generator: random.Random, topic: int, filler: int) -> str:
    chosen = generator.sample(TOPICS[label], topic) + generator.sample(FILLER, filler)
    generator.shuffle(chosen)
    return "".join(chosen)


def write_topic_csv(path: Path, per_class: int, seed: int, labels: tuple[str, ...] = tuple(TOPICS)) -> Path:
    """A CSV with columns title,body,label: a short title, a longer body, a Chinese topic label."""
    generator = random.Random(seed)
    rows = [
        f"{_sentence(label, generator, 2, 1)},{_sentence(label, generator, 4, 3)},{label}"
        for label in labels
        for _ in range(per_class)
    ]
    generator.shuffle(rows)
    path.write_text("title,body,label\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


TINY = [
    "data.text_fields=title,body",
    "data.vocab_size=300",
    "data.max_tokens=256",
    "data.validation_fraction=0.2",
    "model.d_model=32",
    "model.nhead=2",
    "model.num_layers=1",
    "model.dim_feedforward=64",
    "model.dropout=0.1",
    "model.max_len=64",
    "train.epochs=20",
    "train.warmup_steps=10",
    "train.lr_factor=2.0",
    "train.progress_bar=false",
]


@pytest.fixture(scope="module")
def chinese_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(data folder with train.csv and test.csv, run folder) of a CLI run on the Chinese topics."""
    data = tmp_path_factory.mktemp("topics")
    train_file = write_topic_csv(data / "train.csv", per_class=20, seed=0)
    write_topic_csv(data / "test.csv", per_class=8, seed=1)
    out = tmp_path_factory.mktemp("runs") / "topics"
    overrides = [argument for item in [f"data.train_files={train_file}", *TINY] for argument in ("--set", item)]
    assert main(["train", "classification", "--out", str(out), *overrides]) == 0
    return data, out


def test_the_classes_are_the_training_labels_in_sorted_order_and_stored(chinese_run: tuple[Path, Path]) -> None:
    data, out = chinese_run
    config = json.loads((out / "best" / "config.json").read_text(encoding="utf-8"))
    assert config["class_names"] == list(CLASS_ORDER)
    assert config["model"]["num_classes"] == 3
    # The files used are recorded as absolute paths, so evaluate works from any folder.
    assert config["data"]["train_files"] == [str((data / "train.csv").resolve())]
    assert config["data"]["text_fields"] == ["title", "body"] and config["data"]["label_field"] == "label"


def test_scoring_the_training_file_is_said_to_measure_fit(
    chinese_run: tuple[Path, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data, out = chinese_run
    scored = ["evaluate", "classification", "--checkpoint", str(out), "--output", str(tmp_path / "r.json")]
    figure = ["--confusion-png", str(tmp_path / "c.png")]
    with caplog.at_level(logging.WARNING):
        assert main([*scored, *figure, "--test", str(data / "test.csv")]) == 0
        assert "trained or validated on" not in caplog.text
        # Was scored and carded as a test without a word.
        assert main([*scored, *figure, "--test", str(data / "train.csv")]) == 0
    assert f"--test {data / 'train.csv'} is a file the model trained or validated on: its score says" in caplog.text


def test_a_test_file_is_read_in_the_format_its_suffix_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A run on a .txt file, its format given: the checkpoint records csv.
    train_file = tmp_path / "train.txt"
    write_topic_csv(train_file, per_class=8, seed=0)
    out = tmp_path / "run"
    settings = [f"data.train_files={train_file}", "data.file_format=csv", *TINY, "train.max_steps=2"]
    assert main(["train", "classification", "--out", str(out), *[a for s in settings for a in ("--set", s)]]) == 0
    rows = read_labelled_text(write_topic_csv(tmp_path / "test.csv", per_class=2, seed=1), ("title", "body")).records
    jsonl = tmp_path / "test.jsonl"
    jsonl.write_text(
        "".join(json.dumps({"title": r.text, "body": ".", "label": r.label}, ensure_ascii=False) + "\n" for r in rows),
        encoding="utf-8",
    )
    capsys.readouterr()
    evaluate = ["evaluate", "classification", "--checkpoint", str(out), "--test", str(jsonl)]
    # Was read as CSV, the checkpoint's format: "expected a header with a column 'title'", naming the fields.
    assert main([*evaluate, "--output", str(tmp_path / "r.json"), "--confusion-png", str(tmp_path / "c.png")]) == 0
    assert "test.jsonl: 6 rows" in capsys.readouterr().out


def test_the_tokenizer_reads_chinese_exactly_and_the_validation_rows_are_carved(chinese_run: tuple[Path, Path]) -> None:
    _, out = chinese_run
    model, tokenizer, config = classification_train.load_classifier(out)
    text = "球赛队跑\n今天我们的股票"
    assert tokenizer.decode(tokenizer.encode(text)) == text
    # Byte-level BPE merges the three bytes of a frequent character into one token.
    assert len(tokenizer.encode("球赛队跑")) < len("球赛队跑".encode("utf-8"))
    validation = classification_evaluate.load_split(config, "validation")
    assert len(validation) == 12  # 20 % of each class's 20 rows
    assert sorted(example.label for example in validation) == [0] * 4 + [1] * 4 + [2] * 4


def test_classify_prints_the_chinese_class_names(
    chinese_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = chinese_run
    assert main(["classify", "--checkpoint", str(out), "射门教练联赛的冠军", "芯片软件和手机数据"]) == 0
    lines = capsys.readouterr().out.splitlines()
    predicted = []
    for line in lines:
        label, shares = line.split("\t")
        probabilities = dict(item.split("=") for item in shares.split(" "))
        assert tuple(probabilities) == CLASS_ORDER and label in CLASS_ORDER
        predicted.append(label)
    assert predicted == ["体育", "科技"]


@pytest.mark.convergence
def test_evaluate_scores_a_labelled_file_and_beats_chance(
    chinese_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data, out = chinese_run
    report_path = tmp_path / "report.json"
    assert (
        main(
            [
                "evaluate",
                "classification",
                "--checkpoint",
                str(out),
                "--test",
                str(data / "test.csv"),
                "--output",
                str(report_path),
                "--confusion-png",
                str(tmp_path / "c.png"),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "test.csv: 24 rows" in printed and all(name in printed for name in CLASS_ORDER)
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert list(report["per_class"]) == list(CLASS_ORDER)
    assert [row["support"] for row in report["per_class"].values()] == [8, 8, 8]
    assert report["accuracy"] >= 0.8 > 1 / 3
    # The same rows as JSON Lines with one field named differently, read by the overrides.
    rows = read_labelled_text(data / "test.csv", ("title", "body")).records
    jsonl = tmp_path / "test.jsonl"
    jsonl.write_text(
        "".join(json.dumps({"words": r.text, "topic": r.label}, ensure_ascii=False) + "\n" for r in rows),
        encoding="utf-8",
    )
    assert (
        main(
            [
                "evaluate",
                "classification",
                "--checkpoint",
                str(out),
                "--test",
                str(jsonl),
                "--text-field",
                "words",
                "--label-field",
                "topic",
                "--output",
                str(tmp_path / "r2.json"),
                "--confusion-png",
                str(tmp_path / "c2.png"),
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "r2.json").read_text(encoding="utf-8"))["accuracy"] == report["accuracy"]


def copied_run(chinese_run: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """(the data folder, a copy of the trained run in ``tmp_path``), for a test that writes into the run."""
    data, run = chinese_run
    shutil.copytree(run, tmp_path / "run")
    return data, tmp_path / "run"


def copied_test_file(data: Path, destination: Path) -> Path:
    """The data's test.csv copied to ``destination`` (its folder made), a file of one's own by another name."""
    destination.parent.mkdir(parents=True)
    shutil.copyfile(data / "test.csv", destination)
    return destination


def test_files_of_the_same_name_from_elsewhere_each_keep_their_report_figure_and_card_row(
    chinese_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data, out = copied_run(chinese_run, tmp_path)
    first, second = (copied_test_file(data, tmp_path / folder / "test.csv") for folder in ("a", "b"))
    # A file named like the split: its outputs keep apart from the split's too.
    like_the_split = copied_test_file(data, tmp_path / "c" / "test")
    evaluate = ["evaluate", "classification", "--checkpoint", str(out), "--test"]
    rows = read_labelled_text(data / "test.csv", ("title", "body")).records
    jsonl = tmp_path / "test.jsonl"
    jsonl.write_text("".join(json.dumps({"text": r.text, "label": r.label}) + "\n" for r in rows), encoding="utf-8")
    for path in (first, second, first):
        assert main([*evaluate, str(path)]) == 0
    assert main([*evaluate, str(like_the_split), "--file-format", "csv"]) == 0
    assert main([*evaluate, str(jsonl), "--text-field", "text", "--label-field", "label"]) == 0
    capsys.readouterr()
    # Each file its own report and figure (was: b/test.csv replaced a/test.csv's, and
    # confusion.test.csv.png without a word; c/test those of the split "test").
    for path in (first, second, like_the_split, jsonl):
        report = json.loads((out / "best" / f"report.{file_test_name(path)}.json").read_text(encoding="utf-8"))
        assert report["file"] == str(path.resolve())
        assert (out / "best" / f"confusion.{file_test_name(path)}.png").is_file()
    assert not (out / "best" / "report.test.json").exists() and not (out / "best" / "report.test.csv.json").exists()
    # The card keeps a row for each file.
    splits = {test["split"] for test in read_card(out / "best")["test"]}
    assert {file_test_name(path) for path in (first, second, like_the_split, jsonl)} <= splits
    assert "test.csv" not in splits and "test" not in splits


def test_a_file_named_like_a_split_keeps_the_split_s_scores_in_the_card(
    chinese_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data, out = copied_run(chinese_run, tmp_path)
    # The split's scores, as `evaluate classification --split validation` records them.
    add_test_scores(out / "best", "validation", "argmax", {"accuracy": 0.125})
    own = copied_test_file(data, tmp_path / "own" / "validation")
    assert (
        main(["evaluate", "classification", "--checkpoint", str(out), "--test", str(own), "--file-format", "csv"]) == 0
    )
    report = out / "best" / f"report.{file_test_name(own)}.json"
    accuracy = json.loads(report.read_text(encoding="utf-8"))["accuracy"]
    rows = {test["split"]: test["metrics"] for test in read_card(out / "best")["test"]}
    assert rows["validation"] == {"accuracy": 0.125}  # was: replaced by the file's scores
    assert rows[file_test_name(own)]["accuracy"] == pytest.approx(accuracy, abs=1e-4)


def test_a_test_file_s_fields_and_format_are_refused_naming_the_options(
    chinese_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # They named the reader's keywords: "label_field must differ from the text fields", "(file_format, e.g. 'csv')".
    data, out = chinese_run
    evaluate = ["evaluate", "classification", "--checkpoint", str(out), "--test"]
    refused = {
        (str(data / "test.csv"), "--label-field", "title"): (
            "--label-field: expected a field other than the text fields (title, body), got 'title'"
        ),
        (str(data / "test.csv"), "--text-field", "label"): (
            "--text-field: expected fields other than the label field 'label', got it among them"
        ),
        # A column the file lacks, named by the option that asked for it (was: "named by data.label_field").
        (str(data / "test.csv"), "--label-field", "nope"): "(named by --label-field), got one that lacks it: ",
        # Was "text_fields must name each field once": the reader's keyword.
        (str(data / "test.csv"), "--text-field", "title", "--text-field", "title"): (
            "--text-field: expected each field once, got ['title', 'title']"
        ),
    }
    for arguments, message in refused.items():
        assert main([*evaluate, *arguments]) == 2
        error = capsys.readouterr().err.strip()
        assert error.endswith(message) or f"column 'nope' {message}" in error, error
    text = copied_test_file(data, tmp_path / "own" / "test.txt")
    assert main([*evaluate, str(text)]) == 2
    assert capsys.readouterr().err.strip().endswith("name the format explicitly (--file-format, e.g. 'csv')")
    # Training names the setting that holds the format.
    train = ["train", "classification", "--out", str(tmp_path / "run"), "--set", f"data.train_files={text}"]
    train += ["--set", f"data.cache_dir={tmp_path / 'cache'}"]
    assert main(train) == 2
    assert capsys.readouterr().err.strip().endswith("name the format explicitly (data.file_format, e.g. 'csv')")


def test_an_unseen_label_is_an_error_naming_file_line_and_label(
    chinese_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data, out = chinese_run
    test = tmp_path / "unseen.csv"
    test.write_text("title,body,label\n球赛,射门,体育\n天气,晴朗的今天,天气\n", encoding="utf-8")
    assert main(["evaluate", "classification", "--checkpoint", str(out), "--test", str(test)]) == 2
    error = capsys.readouterr().err
    assert f"{test}: line 3: field 'label':" in error and "got the unseen label '天气'" in error
    assert "Traceback" not in error
    # At training time too: a validation file whose label the training file lacks.
    train_config = apply_overrides(
        classification_train.default_config(),
        [f"data.train_files={data / 'train.csv'}", f"data.valid_files={test}", *TINY],
    )
    with pytest.raises(ValueError, match=r"unseen\.csv: line 3: field 'label': .*got the unseen label '天气'"):
        classification_train.train(train_config, tmp_path / "never")
    assert not (tmp_path / "never").exists()


def test_the_split_options_and_the_file_options_do_not_mix(
    chinese_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    data, out = chinese_run
    assert main(["evaluate", "classification", "--checkpoint", str(out)]) == 2  # no AG News test split here
    assert "has no named test split; score a labelled file instead (evaluate --test FILE)" in capsys.readouterr().err
    assert (
        main(
            [
                "evaluate",
                "classification",
                "--checkpoint",
                str(out),
                "--split",
                "test",
                "--test",
                str(data / "test.csv"),
            ]
        )
        == 2
    )
    assert "--split: expected either it or --test FILE, got both" in capsys.readouterr().err
    assert (
        main(["evaluate", "classification", "--checkpoint", str(out), "--split", "validation", "--label-field", "x"])
        == 2
    )
    assert "--label-field: expected only with --test FILE" in capsys.readouterr().err
    assert main(["evaluate", "classification", "--checkpoint", str(out), "--split", "validation"]) == 0
    assert ": 12 articles" in capsys.readouterr().out


def test_a_separate_validation_file_and_integer_labels(tmp_path: Path) -> None:
    lines = []
    generator = random.Random(3)
    for number in range(30):
        label = number % 3
        lines.append(json.dumps({"text": _sentence(list(TOPICS)[label], generator, 4, 2), "label": [7, 10, 9][label]}))
    train_file = tmp_path / "train.jsonl"
    train_file.write_text("\n".join(lines[:24]) + "\n", encoding="utf-8")
    valid_file = tmp_path / "valid.jsonl"
    valid_file.write_text("\n".join(lines[24:]) + "\n", encoding="utf-8")
    overrides = [f"data.train_files={train_file}", f"data.valid_files={valid_file}", *TINY[1:], "train.epochs=1"]
    result = classification_train.train(
        apply_overrides(classification_train.default_config(), overrides), tmp_path / "run"
    )
    assert result.config.class_names == ("7", "9", "10")  # integer labels, numerically sorted
    assert len(result.data.train_store) == 24 and len(result.data.validation_articles) == 6
    assert [example.line_number for example in result.data.validation_articles] == [1, 2, 3, 4, 5, 6]
    assert result.config.data.valid_files == (str(valid_file.resolve()),)


def test_a_validation_row_longer_than_the_model_reads_is_refused_before_training(tmp_path: Path) -> None:
    # A 10,001-letter word in the validation file only: no BPE learns from it, but the model reads 64 tokens.
    train_file = write_topic_csv(tmp_path / "train.csv", per_class=10, seed=0)
    valid_file = write_topic_csv(tmp_path / "valid.csv", per_class=2, seed=1)
    with valid_file.open("a", encoding="utf-8") as stream:
        stream.write(f"长题,{'长' * 10_001},{next(iter(TOPICS))}\n")
    overrides = [f"data.train_files={train_file}", f"data.valid_files={valid_file}", *TINY, "train.epochs=1"]
    with pytest.raises(ValueError, match=r"valid\.csv: line 8: expected at most 64 subword tokens \(model\.max_len\)"):
        classification_train.train(apply_overrides(classification_train.default_config(), overrides), tmp_path / "run")
    assert not (tmp_path / "run" / "last").exists()  # refused before a step was taken


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data.train_files=a.csv,b.csv"], "data.train_files: expected at most one training file"),
        (["data.valid_files=v.csv"], "data.valid_files: expected only together with data.train_files"),
        (["data.file_format=xlsx"], "data.file_format: expected one of csv, tsv, jsonl or ''"),
        # When set, not once the file is read and a BPE is to be learned (it said "vocab_size must be >= 260").
        (["data.vocab_size=200"], r"data\.vocab_size must be >= 260, got 200$"),
        (["data.vocab_size=99999999"], r"data\.vocab_size: expected at most 1,048,576 entries, got 99,999,999$"),
        (
            ["data.text_fields=title,text", "data.label_field=text"],
            r"^data\.label_field: expected a field other than the text fields \(title, text\), got 'text'$",
        ),
        # Named as set, not as "text_fields" once a corpus had been prepared from the file.
        (["data.text_fields=text,text"], r"^data\.text_fields: expected each field once, got \['text', 'text'\]$"),
        (["data.text_fields=title,"], r"^data\.text_fields: expected non-empty field names, got \['title', ''\]$"),
        (["data.label_field="], r"^data\.label_field: expected non-empty field names, got ''$"),
    ],
)
def test_bad_data_options_are_refused_when_set(overrides: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        apply_overrides(classification_train.default_config(), overrides)


def test_a_single_class_training_file_is_refused(tmp_path: Path) -> None:
    train_file = write_topic_csv(tmp_path / "one.csv", per_class=5, seed=0, labels=("体育",))
    config = apply_overrides(classification_train.default_config(), [f"data.train_files={train_file}", *TINY])
    with pytest.raises(
        ValueError, match=r"one\.csv: field 'label': expected at least 2 distinct labels to classify, got \['体育'\]"
    ):
        classification_data.build_data(config.data)


def test_a_carve_that_holds_out_nothing_says_it_is_per_class_and_one_that_starves_a_class_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Sixty classes of one row each: 10 % of every class rounds to none, though 10 % of 60 rows is 6.
    many = tmp_path / "many.csv"
    many.write_text("text,label\n" + "".join(f"row {number},c{number}\n" for number in range(60)), encoding="utf-8")
    config = apply_overrides(classification_train.default_config(), [f"data.train_files={many}", *TINY[1:3]])
    with pytest.raises(ValueError) as caught:
        classification_data.build_data(apply_overrides(config, ["data.validation_fraction=0.1"]).data)
    assert str(caught.value) == (
        "data.validation_fraction=0.1 of 60 rows leaves 60 training and 0 validation rows; both must be non-empty "
        "(it is taken class by class, round(0.1 x the class's rows), and the largest of the 60 classes has 1 row(s))"
    )
    # A share above one half takes the one row of a small class: that class would be in the model, never trained.
    rare = write_topic_csv(tmp_path / "rare.csv", per_class=10, seed=0, labels=("体育", "财经"))
    rare.write_text(rare.read_text(encoding="utf-8") + "射门,冠军,科技\n", encoding="utf-8")
    config = apply_overrides(
        classification_train.default_config(), [f"data.train_files={rare}", *TINY[:3], "data.validation_fraction=0.6"]
    )
    message = (
        r"^data\.validation_fraction=0\.6 holds out all 1 row\(s\) of the class '科技', which would then never be "
        r"trained; give validation rows \(data\.valid_files\), a smaller fraction, or more rows of it$"
    )
    with pytest.raises(ValueError, match=message):
        classification_data.build_data(config.data)
    with pytest.raises(ValueError, match=message):  # the corpus read whole, as evaluate's validation split is
        classification_data.corpus_spec(config.data).read()
    # The command names the validation rows as the user gave the training rows: --valid beside --train.
    fraction = ["--set", TINY[0], "--set", "data.validation_fraction=0.6", "--out", str(tmp_path / "out")]
    assert main(["prepare", "classification", "--train", str(rare), *fraction]) == 2
    assert "give validation rows (--valid), a smaller" in capsys.readouterr().err
    assert main(["prepare", "classification", "--set", f"data.train_files={rare}", *fraction]) == 2
    assert "give validation rows (data.valid_files), a smaller" in capsys.readouterr().err


def test_a_carve_whose_repeats_leave_a_class_or_all_training_untrained_is_refused(tmp_path: Path) -> None:
    # Training rows repeating a held-out text are left out; where that leaves a class (or everything) without
    # training rows, the carve is refused (was: a class trained on nothing, exit 0; the BPE's "texts must hold
    # at least one non-empty sentence, got 0 empty one(s)").
    varied = "".join(
        f"market report {number} stocks rally,Business\nteam {number} wins the final,Sports\n" for number in range(30)
    )
    starved = tmp_path / "starved.csv"
    starved.write_text("text,label\n" + varied + "Storm warning for the coast,Weather\n" * 10, encoding="utf-8")
    copied = tmp_path / "copied.csv"
    copied.write_text("text,label\n" + "Storm warning,Weather\nTeam wins the cup,Sports\n" * 10, encoding="utf-8")
    for path, message in (
        (
            starved,
            "the class 'Weather' keeps no training row: its rows outside validation all repeat a held-out row's text",
        ),
        (copied, "data.valid_files: expected validation rows, or training rows other than the held-out ones, got 18"),
    ):
        config = apply_overrides(classification_train.default_config(), [f"data.train_files={path}", *TINY[1:3]])
        with pytest.raises(ValueError) as caught:
            classification_data.build_data(config.data)
        assert str(caught.value).startswith(message)


def test_fine_tuning_keeps_the_tokenizer_and_the_class_order(
    chinese_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = chinese_run
    # Only two of the three classes in the new data: the indices must still mean the checkpoint's classes.
    subset = write_topic_csv(tmp_path / "two.csv", per_class=10, seed=5, labels=("财经", "体育"))
    # Without the run's data.vocab_size=300: the kept tokenizer's settings come from the checkpoint; without its
    # data.text_fields=title,body: the new file is read by the checkpoint's columns, as evaluate --test reads one.
    settings = [TINY[2], "train.epochs=1", "train.progress_bar=false"]
    overrides = [argument for item in settings for argument in ("--set", item)]
    assert (
        main(
            [
                "train",
                "classification",
                "--init-from",
                str(out),
                "--train",
                str(subset),
                "--out",
                str(tmp_path / "tuned"),
                *overrides,
            ]
        )
        == 0
    )
    config = json.loads((tmp_path / "tuned" / "last" / "config.json").read_text(encoding="utf-8"))
    assert config["class_names"] == list(CLASS_ORDER) and config["initialized_from"] == str(out / "best")
    original = json.loads((out / "best" / "config.json").read_text(encoding="utf-8"))
    assert (config["data"]["vocab_size"], config["data"]["lowercase"]) == (300, True)
    assert (config["data"]["text_fields"], config["data"]["label_field"]) == (["title", "body"], "label")
    for name in classification_train.VOCABULARY.settings:
        assert config["data"][name] == original["data"][name], name
    # Another value of such a setting is refused: the tokenizer that lowercases is kept whatever it says.
    capsys.readouterr()
    refused = ["--set", "data.lowercase=false", "--out", str(tmp_path / "cased")]
    assert main(["train", "classification", "--init-from", str(out), "--train", str(subset), *refused]) == 2
    assert (
        "--set data.lowercase=False: expected the value of the checkpoint it fine-tunes, True"
        in capsys.readouterr().err
    )
    tokenizer_file = classification_train.TOKENIZER_FILE
    assert (tmp_path / "tuned" / "last" / tokenizer_file).read_text(encoding="utf-8") == (
        out / "best" / tokenizer_file
    ).read_text(encoding="utf-8")
    unseen = write_topic_csv(tmp_path / "unseen.csv", per_class=5, seed=6)
    unseen.write_text(unseen.read_text(encoding="utf-8") + "球赛,射门,天气\n", encoding="utf-8")
    capsys.readouterr()
    assert (
        main(
            [
                "train",
                "classification",
                "--init-from",
                str(out),
                "--train",
                str(unseen),
                "--out",
                str(tmp_path / "no"),
                *overrides,
            ]
        )
        == 2
    )
    assert f"{unseen}: line 17: field 'label':" in capsys.readouterr().err


def test_a_corpus_prepared_with_the_checkpoints_tokenizer_fine_tunes_and_another_is_refused(
    chinese_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = chinese_run
    # Two of the three classes: a corpus prepared on its own would learn a new BPE and number them 0 and 1.
    subset = write_topic_csv(tmp_path / "two.csv", per_class=10, seed=5, labels=("财经", "体育"))
    data_settings = ["--set", TINY[0], "--set", TINY[3]]
    prepare = ["prepare", "classification", "--train", str(subset), *data_settings]
    folder, own = tmp_path / "prepared", tmp_path / "own"
    assert main([*prepare, "--init-from", str(out), "--out", str(folder)]) == 0
    assert f"--prepared {folder} --init-from {out} --out RUN_FOLDER" in capsys.readouterr().out
    tokenizer, class_names = classification_train.checkpoint_vocabulary(out / "best")
    assert tokenizer is not None and class_names == CLASS_ORDER
    prepared = open_prepared_labelled(folder)
    assert prepared.tokenizer.to_json() == tokenizer.to_json() and prepared.class_names == CLASS_ORDER
    # The checkpoint's data settings (its vocab_size 300, not the preset's 8000) read the new file.
    data = dataclasses.replace(classification_train.load_classifier(out)[2].data, train_files=(str(subset),))
    train_rows = read_whole(data, tokenizer, class_names).train_rows
    assert len(prepared.store) == len(train_rows)
    for index, article in enumerate(train_rows):
        assert prepared.store.ids("tokens", index).tolist() == tokenizer.encode(article.text)
        assert int(prepared.store.labels[index]) == article.label  # type: ignore[index]
    assert {article.label for article in train_rows} == {CLASS_ORDER.index("财经"), CLASS_ORDER.index("体育")}
    tune = ["train", "classification", "--init-from", str(out), "--set", "train.epochs=1", "--set", TINY[-1]]
    assert main([*tune, "--prepared", str(folder), "--out", str(tmp_path / "tuned")]) == 0
    config = json.loads((tmp_path / "tuned" / "last" / "config.json").read_text(encoding="utf-8"))
    assert (config["class_names"], config["data"]["vocab_size"]) == (list(CLASS_ORDER), 300)
    # A folder prepared with a tokenizer of its own: its ids mean other tokens to the checkpoint's model.
    assert main([*prepare, "--out", str(own)]) == 0
    capsys.readouterr()
    assert main([*tune, "--prepared", str(own), "--out", str(tmp_path / "refused")]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"transformer-lab train: error: --prepared {own}: expected a corpus prepared with the tokenizer of the "
        f"checkpoint {out / 'best'} (prepare classification --init-from {out / 'best'}), got one whose tokenizer "
        "was built from its own data"
    )
    # A setting of the tokenizer kept is the checkpoint's, in preparing as in training.
    vocab_size = ["--set", "data.vocab_size=500", "--out", str(tmp_path / "sized")]
    assert main([*prepare, "--init-from", str(out), *vocab_size]) == 2
    assert "--set data.vocab_size=500: expected the value of the checkpoint" in capsys.readouterr().err
    assert not (tmp_path / "sized").exists()


def test_a_label_the_fine_tuned_checkpoint_lacks_is_named_as_the_checkpoint_s_not_as_unseen_in_training(
    chinese_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = chinese_run
    # The new label is in this run's own training file: "seen in training" would say the opposite of the file.
    train_file = write_topic_csv(tmp_path / "train.csv", per_class=5, seed=7)
    train_file.write_text(train_file.read_text(encoding="utf-8") + "球赛,射门,天气\n", encoding="utf-8")
    valid_file = write_topic_csv(tmp_path / "valid.csv", per_class=2, seed=8)
    valid_file.write_text(valid_file.read_text(encoding="utf-8") + "球赛,射门,天气\n", encoding="utf-8")
    clean_train = write_topic_csv(tmp_path / "clean.csv", per_class=5, seed=9)
    settings = ["--set", TINY[0], "--set", "train.epochs=1", "--set", "train.progress_bar=false"]
    cases = ((train_file, None, train_file, 17), (clean_train, valid_file, valid_file, 8))
    for training, validation, at_fault, line in cases:
        given = [] if validation is None else ["--valid", str(validation)]
        arguments = ["train", "classification", "--init-from", str(out), "--train", str(training), *given]
        assert main([*arguments, "--out", str(tmp_path / "never"), *settings]) == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"transformer-lab train: error: {at_fault}: line {line}: field 'label': expected one of the checkpoint's "
            "classes ('体育', '科技', '财经'), got '天气', which it has no class for; a fine-tuned or resumed run "
            "keeps the classes of the checkpoint it starts from (train from scratch for new ones)"
        )
        assert not (tmp_path / "never").exists()


def test_the_python_classifier_gives_what_the_command_line_prints(
    chinese_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from transformer_lab import Classifier

    _, out = chinese_run
    classifier = Classifier(out)
    texts = ["股市 大涨 利率", "球队 比赛 冠军"]
    capsys.readouterr()
    assert main(["classify", "--checkpoint", str(out), *texts]) == 0
    printed = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    predictions = classifier.classify(texts)
    assert [prediction.label_name for prediction in predictions] == printed
    for prediction in predictions:
        assert set(prediction.probabilities) == set(classifier.class_names)
        assert abs(sum(prediction.probabilities.values()) - 1.0) < 1e-5
        assert prediction.label_name == max(prediction.probabilities, key=prediction.probabilities.__getitem__)
    assert classifier.classify(texts[0]).label_name == printed[0]
    with pytest.raises(ValueError, match=r"texts\[1\]: "):
        classifier.classify([texts[0], "   "])
