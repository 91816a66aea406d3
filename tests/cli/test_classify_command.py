"""`transformer-lab train/classify/evaluate classification` on made-up news; bad input never a traceback."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest

from tests.tasks.news_fixture import tiny_overrides, write_news_folder
from transformer_lab import Classifier, hardware
from transformer_lab.cli import main
from transformer_lab.tasks.classification import predict as classification_predict


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = write_news_folder(tmp_path_factory.mktemp("news"), train_per_class=30, test_per_class=5)
    out = tmp_path_factory.mktemp("runs") / "news"
    overrides = [argument for item in tiny_overrides(data_dir, epochs=2) for argument in ("--set", item)]
    assert main(["train", "classification", "--data-dir", str(data_dir), "--out", str(out), *overrides]) == 0
    return out


def test_classify_prints_a_label_and_every_probability(run_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["classify", "--checkpoint", str(run_folder), "shares profit merger", "goal 🚀⚽ league"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    for line in lines:
        label, shares = line.split("\t")
        probabilities = dict(item.split("=") for item in shares.split(" "))
        assert list(probabilities) == ["World", "Sports", "Business", "Sci/Tech"] and label in probabilities
        assert sum(float(value) for value in probabilities.values()) == pytest.approx(1.0, abs=1e-3)


def test_bad_inputs_get_one_message_each_and_the_rest_is_classified(
    run_folder: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    output = tmp_path / "out.jsonl"
    texts = ["", "   \t ", "goal " * 500, "profit shares"]
    assert main(["classify", "--checkpoint", str(run_folder), "--output", str(output), *texts]) == 2
    captured = capsys.readouterr()
    stdout, stderr = captured.out.splitlines(), captured.err.splitlines()
    assert [line.split("\t")[0] for line in stdout][:3] == ["-", "-", "-"] and stdout[3].split("\t")[0] != "-"
    assert len(stderr) == 3 and "Traceback" not in captured.err
    assert "input 1: the text is empty" in stderr[0] and "input 2: the text is empty" in stderr[1]
    too_long = r"input 3: the text is (at least )?\d+ subword tokens.*, more than the model reads \(128"
    assert re.search(too_long, stderr[2])
    records = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [("error" in record) for record in records] == [True, True, True, False]
    assert main(["classify", "--checkpoint", str(run_folder), "--truncate", "goal " * 500]) == 0
    assert re.search(r"input 1: read only the first 128 of its \d+ subword tokens", capsys.readouterr().err)


def test_stdin_and_input_file_modes(
    run_folder: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("goal match\r\n\nprofit\n".encode("utf-8"))))
    assert main(["classify", "--checkpoint", str(run_folder)]) == 2  # the blank middle line is refused
    assert [line.split("\t")[0] == "-" for line in capsys.readouterr().out.splitlines()] == [False, True, False]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"ok\n\xff\xfe\n")))
    assert main(["classify", "--checkpoint", str(run_folder)]) == 2
    assert capsys.readouterr().err.strip() == (
        "transformer-lab classify: error: stdin: line 2: expected UTF-8 text, got invalid byte(s) b'\\xff' "
        "at byte column 1 (invalid start byte)"
    )
    lines = tmp_path / "lines.txt"
    lines.write_text("goal match\nprofit shares\n", encoding="utf-8")
    assert main(["classify", "--checkpoint", str(run_folder), "--input", str(lines)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2


class _Terminal(io.TextIOWrapper):
    """Lines typed at a terminal: stdin that says it is one."""

    def isatty(self) -> bool:
        return True


def test_lines_typed_at_a_terminal_are_asked_for_in_one_line(
    run_folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", _Terminal(io.BytesIO(b"goal match\n")))
    assert main(["classify", "--checkpoint", str(run_folder)]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == ["reading the lines to classify from the terminal, one a line; end with Ctrl-D"]
    assert len(captured.out.splitlines()) == 1


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--checkpoint", "{missing}", "text"], "expected a checkpoint folder"),
        (["--checkpoint", "{run}", "--input", "{missing}"], "does not exist"),
        (
            ["--checkpoint", "{run}", "--input", "{run}/metrics.jsonl", "text"],
            "either text arguments or --input, got both",
        ),
    ],
)
def test_unusable_arguments_are_one_stderr_line_and_exit_2(
    run_folder: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path, arguments: list[str], message: str
) -> None:
    filled = [item.format(run=run_folder, missing=tmp_path / "missing") for item in arguments]
    assert main(["classify", *filled]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and message in error[0]


def test_evaluate_prints_the_scores_and_draws_the_confusion_matrix(
    run_folder: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    picture = tmp_path / "confusion.png"
    assert main(["evaluate", "classification", "--checkpoint", str(run_folder), "--confusion-png", str(picture)]) == 0
    output = capsys.readouterr().out
    assert "test: 20 articles" in output and "accuracy" in output and "Sci/Tech" in output
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = json.loads((run_folder / "best" / "report.test.json").read_text(encoding="utf-8"))
    assert sum(sum(row) for row in report["confusion"]) == 20
    assert main(["evaluate", "classification", "--checkpoint", str(run_folder), "--split", "nope"]) == 2
    # Named as typed (was: "split must be ...", the library's keyword).
    assert capsys.readouterr().err.splitlines() == [
        "transformer-lab evaluate: error: --split: expected one of test, validation for the classification task, "
        "got 'nope'"
    ]
    # A figure name that cannot be drawn is refused before the evaluation, not after it.
    for bad in (tmp_path / "confusion.txt", tmp_path):
        arguments = ["evaluate", "classification", "--checkpoint", str(run_folder), "--confusion-png", str(bad)]
        assert main([*arguments, "--output", str(tmp_path / "not-written.json")]) == 2
        assert f"--confusion-png: expected a file name ending in .png, got '{bad}'" in capsys.readouterr().err
        assert not (tmp_path / "not-written.json").exists()
    # An --output at the figure's default path: the figure drawn after it would replace the report (was: exit 0).
    default_figure = run_folder / "best" / "confusion.validation.png"
    arguments = ["evaluate", "classification", "--checkpoint", str(run_folder), "--split", "validation"]
    assert main([*arguments, "--output", str(default_figure)]) == 2
    assert f"--output: expected a file other than the confusion matrix's picture {default_figure}, which is drawn " in (
        capsys.readouterr().err
    )
    for option, value in (("--beam", "2"), ("--length-penalty", "1.0")):
        assert main(["evaluate", "classification", "--checkpoint", str(run_folder), option, value]) == 2
        readers = "couplet, copy, reverse, sort and translation tasks"
        assert f"{option}: expected only with the {readers}" in capsys.readouterr().err


def test_an_article_of_a_split_too_long_for_the_model_is_named_by_its_file_and_line(
    run_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: "article of line 21: ...", no file: the test split's file is read from the data folder.
    data_dir = write_news_folder(tmp_path / "news", train_per_class=2, test_per_class=5)
    test_file = data_dir / "ag_news" / "test.csv"
    test_file.write_text(
        test_file.read_text(encoding="utf-8") + '"2","long","' + "goal " * 300 + '"\n', encoding="utf-8"
    )
    assert main(["evaluate", "classification", "--checkpoint", str(run_folder), "--data-dir", str(data_dir)]) == 2
    refused = rf"error: {re.escape(str(test_file))}: line 21: the text is (at least )?\d+ subword tokens"
    assert re.search(refused, capsys.readouterr().err)


def test_the_command_and_the_python_classifier_default_to_the_same_precision(
    run_folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on a CPU with bf16 instructions, where "auto" is bf16 and the defaults once differed.
    monkeypatch.setattr(hardware, "bf16_support", lambda device: hardware.Bf16Support(True, "bf16 for the test"))
    text = "shares profit merger league"
    classifier = Classifier(run_folder)
    default = classifier.classify(text)
    assert default.probabilities == classifier.classify(text, precision="bf16").probabilities
    assert default.probabilities == classifier.classify(text, precision="auto").probabilities
    assert main(["classify", "--checkpoint", str(run_folder), text]) == 0
    shares = " ".join(f"{name}={probability:.4f}" for name, probability in default.probabilities.items())
    assert capsys.readouterr().out == f"{default.label_name}\t{shares}\n"
    # fp32 is still there when asked for, and the bf16 copy really ran above.
    assert classifier.classify(text, precision="fp32").probabilities != default.probabilities


def test_a_line_of_many_classes_prints_the_most_probable_and_a_count() -> None:
    # 30 classes: a line of every probability would be hundreds of columns; --output keeps them all.
    probabilities = {f"class{index}": (index + 1) / 465 for index in range(30)}
    shares = classification_predict.printed_shares(probabilities)
    assert shares == (
        "class29=0.0645 class28=0.0624 class27=0.0602 class26=0.0581 class25=0.0559 "
        "(+25 more classes; --output keeps all)"
    )
    few = {"World": 0.1, "Sports": 0.6, "Business": 0.2, "Sci/Tech": 0.1}
    assert classification_predict.printed_shares(few) == "World=0.1000 Sports=0.6000 Business=0.2000 Sci/Tech=0.1000"
