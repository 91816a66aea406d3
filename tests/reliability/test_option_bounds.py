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


def run_cli(arguments: list[str]) -> int:
    """``main``'s exit code, whether the error came from argparse (SystemExit) or from the command."""
    try:
        return main(arguments)
    except SystemExit as exit_:
        return int(exit_.code or 0)


COPY_OPTIONS = {
    "data.num_train=1000000000000": r"data\.num_train: expected an int in \[1, 1,000,000\], got 1000000000000",
    "data.num_validation=1000000000000": r"data\.num_validation: expected an int in \[1, 1,000,000\]",
    "data.num_test=1000000000000": r"data\.num_test: expected an int in \[1, 1,000,000\]",
    "data.max_length=100000000": r"data\.max_length: expected an int in \[1, 65,534\], got 100000000",
    "data.vocab_size=100000000": r"data\.vocab_size: expected an int in \[6, 1,048,576\], got 100000000",
    "data.batch_size=0": r"data\.batch_size: expected an int in \[1, 1,000,000\], got 0",
    "model.d_model=1000000": r"d_model: expected an int in \[2, 65,536\], got 1000000",
    "model.dim_feedforward=100000000000": r"dim_feedforward: expected an int in \[1, 1,048,576\]",
    "model.num_encoder_layers=100000": r"num_encoder_layers: expected an int in \[1, 1,024\], got 100000",
    "model.d_model=60000": r"model: expected at most 4,294,967,296 parameters, got a config of about [\d,]+ \(",
}


@pytest.mark.parametrize("option", sorted(COPY_OPTIONS))
def test_a_size_no_machine_can_hold_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    import re

    from tests.reliability.tiny_runs import tiny_copy_options

    out = tmp_path / "run"
    assert run_cli(["train", "copy", "--out", str(out), *tiny_copy_options(), "--set", option]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and re.search(COPY_OPTIONS[option], error), error
    assert not (out / "metrics.jsonl").exists() and not (out / "last").exists()


@pytest.mark.parametrize(
    ("task", "option", "message"),
    [
        ("translation", "data.max_tokens=1000000000000", r"data\.max_tokens: expected an int in \[1, 1,048,576\]"),
        ("translation", "data.min_frequency=-5", r"data\.min_frequency: expected an int in \[1, "),
        ("translation", "data.tokenizer_sample=-1", r"data\.tokenizer_sample: expected an int in \[0, "),
        ("couplet", "data.max_tokens=0", r"data\.max_tokens: expected an int in \[1, 1,048,576\], got 0"),
        ("couplet", "data.max_length=100000", r"data\.max_length: expected an int in \[1, 65,535\]"),
        ("classification", "data.max_tokens=1000000000000", r"data\.max_tokens: expected an int in \[1, 1,048,576\]"),
        # Was "fraction must be a number in [0, 1), got 1.0", once the corpus was being prepared.
        ("classification", "data.validation_fraction=1", r"data\.validation_fraction: expected a number in \[0, 1\)"),
    ],
)
def test_batch_and_corpus_sizes_of_the_real_data_tasks_are_bounded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], task: str, option: str, message: str
) -> None:
    import re

    arguments = ["train", task, "--out", str(tmp_path / "run"), "--data-dir", str(tmp_path / "absent")]
    assert run_cli([*arguments, "--set", option]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and re.search(message, error), error


@pytest.mark.parametrize(
    ("arguments", "option"),
    [
        (["explain", "--d-model", "10000000"], "--d-model"),
        (["explain", "--src-len", "1000000"], "--src-len"),
        (["explain", "--batch", "10000000"], "--batch"),
        (["explain", "--full", "--num-layers", "100000"], "--num-layers"),
        (["lab", "--batch-size", "1000000"], "--batch-size"),
        (["lab", "--d-model", "10000000"], "--d-model"),
        (["plot", "masks", "--length", "1000000", "--out", "x.png"], "--length"),
        (["plot", "positions", "--max-len", "10000000", "--out", "x.png"], "--max-len"),
        (["plot", "lr-schedule", "--steps", "10000000000", "--out", "x.png"], "--steps"),
        (["plot", "masks", "--dpi", "1000000", "--out", "x.png"], "--dpi"),
        (["plot", "masks", "--width", "1e6", "--out", "x.png"], "--width"),
        (["translate", "--checkpoint", "absent", "--nbest", "100000", "Hallo"], "--nbest"),
        (["couplet", "--checkpoint", "absent", "--num-candidates", "100000", "春风"], "--num-candidates"),
        (["serve", "absent", "--max-body-bytes", "1000000000000000"], "--max-body-bytes"),
        (["serve", "absent", "--max-queue", "1000000000"], "--max-queue"),
    ],
)
def test_command_line_sizes_are_bounded_naming_the_option(
    capsys: pytest.CaptureFixture[str], arguments: list[str], option: str
) -> None:
    assert run_cli(arguments) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error
    assert f"argument {option}: expected " in error and "see transformer-lab" in error


@pytest.mark.parametrize("typed", ["1e400", "0", "-1", "nan"])
def test_a_schedule_factor_out_of_range_is_named_as_typed(capsys: pytest.CaptureFixture[str], typed: str) -> None:
    # Parsed by float() first, 1e400 was said back as "got inf" and 0 as "got 0.0": not what the user typed.
    assert run_cli(["plot", "lr-schedule", "--factor", typed, "--out", "x.png"]) == 2
    error = capsys.readouterr().err.strip()
    assert f"argument --factor: expected a number in (0, 1e+06], got {typed} (see " in error and "\n" not in error


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["explain", "--d-model", "4096", "--nhead", "16", "--src-len", "512", "--tgt-len", "512", "--batch", "16"],
            "--d-model, --nhead, --src-len, --tgt-len and --batch: expected sizes whose tensors hold at most "
            "268,435,456 floats together (1 GiB), got about 369,098,752; make one of them smaller",
        ),
        (
            ["explain", "--full", "--d-model", "4096", "--num-layers", "12"],
            "--d-model, --nhead, --src-len, --tgt-len, --batch and --num-layers: expected sizes whose tensors hold "
            "at most 268,435,456 floats together (1 GiB), got about 4,026,613,960; make one of them smaller",
        ),
        (
            ["plot", "masks", "--width", "54", "--height", "54", "--dpi", "1200", "--out", "masks.png"],
            "--width, --height and --dpi: expected a figure of at most 100,000,000 pixels (width x dpi by "
            "height x dpi), got 4,199,040,000; make one of them smaller",
        ),
    ],
    ids=["explain", "explain --full", "plot masks"],
)
def test_sizes_each_in_bounds_whose_product_no_machine_holds_are_refused_before_allocating(
    arguments: list[str], message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformer_lab.cli import explain_command
    from transformer_lab.lab import figures

    # The work itself is replaced: reaching it is the failure (the real one asks for gigabytes).
    reached: list[str] = []
    for module, name in [
        (explain_command, "explain_attention"),
        (explain_command, "explain_transformer"),
        (figures, "plot_masks"),
    ]:
        monkeypatch.setattr(module, name, lambda *_, _name=name, **__: reached.append(_name) or [])
    assert run_cli(arguments) == 2
    assert capsys.readouterr().err == f"transformer-lab {arguments[0]}: error: {message}\n"
    assert reached == []


def test_lab_sizes_whose_product_no_machine_holds_are_refused_before_the_model_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformer_lab.lab import mask_experiments

    # Building the model is replaced: reaching it is the failure (the real runs ask for 12 GB and more).
    built: list[object] = []
    monkeypatch.setattr(mask_experiments.Seq2SeqTransformer, "from_config", lambda config: built.append(config))
    sizes = ["--d-model", "1024", "--nhead", "64", "--num-layers", "12", "--batch-size", "256"]
    assert run_cli(["lab", "tgt-padding-mask", *sizes]) == 2
    assert capsys.readouterr().err == (
        "transformer-lab lab: error: --d-model, --nhead, --num-layers and --batch-size: expected sizes whose "
        "tensors hold at most 536,870,912 floats together (2 GiB), got about 3,104,434,176 with sequences of up "
        "to 11 positions; make one of them smaller\n"
    )
    # Default sizes, but sentences of 3,000 words from --data-dir.
    for language in ("de", "en"):
        (tmp_path / f"train.{language}").write_text(("word " * 3000).strip() + "\n" + "word\n", encoding="utf-8")
    assert run_cli(["lab", "tgt-padding-mask", "--data-dir", str(tmp_path), "--batch-size", "2"]) == 2
    error = capsys.readouterr().err
    where = f"(line 1 of {tmp_path / 'train.de'}, the longest sentence)"
    assert f"got about 871,095,104 with sequences of up to 3,001 positions {where}; make one of them smaller" in error
    assert built == []


def test_the_largest_sizes_the_combined_bounds_let_through_still_run(capsys: pytest.CaptureFixture[str]) -> None:
    # Each bound alone at its largest, the others at their defaults: what the options are for.
    for arguments in (["explain", "--src-len", "512", "--tgt-len", "512"], ["explain", "--full", "--num-layers", "12"]):
        assert run_cli(arguments) == 0
        assert "==" in capsys.readouterr().out
