"""Each lab claim about masks, checked on a tiny real model and a real padded batch."""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path

import pytest
import torch

from tests.lab.conftest import write_tiny_checkpoint
from transformer_lab.cli import lab_command, main
from transformer_lab.lab import mask_experiments
from transformer_lab.lab.mask_experiments import (
    EXPERIMENTS,
    Comparison,
    GuardCheck,
    LabResult,
    LabSetup,
    build_lab_setup,
    decoder_rows_experiment,
    encoder_row_mask_experiment,
    key_padding_polarity_experiment,
    run_experiment,
    tgt_padding_mask_experiment,
)
from transformer_lab.lab.mask_report import format_lab_result


def _rows(result: LabResult) -> dict[str, Comparison]:
    return {row.quantity: row for row in result.comparisons}


def test_the_batch_has_padding_on_both_sides(tiny_setup: LabSetup) -> None:
    pad_id = tiny_setup.model.pad_id
    assert (tiny_setup.batch.src_ids == pad_id).any()
    assert (tiny_setup.batch.tgt_out_ids == pad_id).any()
    assert not tiny_setup.model.training  # eval: the two runs differ only in the mask


def test_decoder_needs_no_target_key_padding_mask(tiny_setup: LabSetup) -> None:
    result = tgt_padding_mask_experiment(tiny_setup)
    rows = _rows(result)
    assert result.holds, format_lab_result(result)
    assert rows["loss (ignore_index = pad)"].difference <= 1e-6
    assert rows["every parameter's gradient"].difference <= 1e-6
    assert rows["logits at real target positions"].difference <= 1e-6
    assert rows["logits at padded target positions"].difference > 1e-3  # they do differ
    assert rows["loss summed with padded positions counted"].difference > 1e-4  # and ignore_index is why it is fine


def test_encoder_row_mask_changes_nothing_that_reaches_the_loss(tiny_setup: LabSetup) -> None:
    result = encoder_row_mask_experiment(tiny_setup)
    rows = _rows(result)
    assert result.holds, format_lab_result(result)
    assert rows["non-finite memory values with rows hidden"].difference == 0.0  # zero mixture, not NaN
    assert rows["loss"].difference <= 1e-6
    assert rows["every parameter's gradient"].difference <= 1e-6
    assert rows["memory at padded source positions"].difference > 1e-3
    assert rows["logits without memory_key_padding_mask vs with"].difference > 1e-3


def test_ignore_index_plays_the_part_of_hiding_decoder_rows(tiny_setup: LabSetup) -> None:
    result = decoder_rows_experiment(tiny_setup)
    rows = _rows(result)
    assert result.holds, format_lab_result(result)
    assert rows["every parameter's gradient (ignore_index = pad)"].difference <= 1e-6
    assert rows["every parameter's gradient without ignore_index"].difference > 1e-4


def test_key_padding_polarity_mixups_show_and_are_refused(tiny_setup: LabSetup) -> None:
    result = key_padding_polarity_experiment(tiny_setup)
    rows = _rows(result)
    assert result.holds, format_lab_result(result)
    assert rows["keep_to_hidden(Annotated mask) vs padding_mask: entries"].difference == 0.0
    assert rows["mixed: weight on real keys (rows with padding)"].difference == 0.0  # attends only to padding
    assert rows["mixed: logits 0..1 after changing later tokens"].difference > 1e-3  # the future leaks
    assert rows["logits 0..1 after changing later tokens, causal_mask"].difference <= 1e-6
    assert len(result.guards) == 3 and all(guard.error for guard in result.guards)
    assert "[batch, src_len]" in (result.guards[0].error or "")


def test_every_experiment_holds_with_a_four_head_model_too() -> None:
    setup = build_lab_setup(batch_size=4, d_model=16, nhead=4, num_layers=1, seed=3)
    for name in EXPERIMENTS:
        assert run_experiment(name, setup).holds, name


def test_result_verdicts_follow_the_rows() -> None:
    equal_failing = Comparison("x", difference=1.0, tolerance=1e-5, expect_equal=True)
    differ_failing = Comparison("y", difference=0.0, tolerance=1e-5, expect_equal=False)
    assert not equal_failing.holds and not differ_failing.holds
    assert Comparison("z", 0.0, 1e-5, True).holds and Comparison("w", 2.0, 1e-5, False).holds
    result = LabResult("name", "claim", "setup", [Comparison("z", 0.0, 1e-5, True)], [GuardCheck("g", None)])
    assert not result.holds
    assert "NOT refused" in format_lab_result(result) and "claim does NOT hold" in format_lab_result(result)


def test_lab_command_prints_the_table_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["lab", "decoder-rows", "--d-model", "16", "--num-layers", "1", "--batch-size", "4"])
    output = capsys.readouterr().out
    assert code == 0
    assert "every parameter's gradient (ignore_index = pad)" in output
    assert output.rstrip().endswith("claim holds")


def test_lab_command_exits_one_when_the_claim_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def failing(setup: LabSetup, tolerance: float) -> LabResult:
        return LabResult("tgt-padding-mask", "claim", "setup", [Comparison("q", 1.0, tolerance, True)])

    monkeypatch.setitem(mask_experiments.EXPERIMENTS, "tgt-padding-mask", failing)
    code = main(["lab", "tgt-padding-mask", "--d-model", "16", "--num-layers", "1"])
    assert code == 1
    assert "claim does NOT hold" in capsys.readouterr().out


def test_lab_command_reports_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["lab", "tgt-padding-mask", "--tolerance", "-1"])
    assert refused.value.code == 2
    assert "argument --tolerance: expected a number in (0, 0.01], got -1" in capsys.readouterr().err
    assert main(["lab", "tgt-padding-mask", "--checkpoint", "/nonexistent/folder"]) == 2


@pytest.mark.parametrize(("option", "value"), [("--d-model", "64"), ("--nhead", "3"), ("--num-layers", "7")])
def test_lab_command_refuses_model_sizes_with_a_checkpoint(
    tiny_checkpoint: Path, option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The checkpoint fixes the model: a size given with it would be ignored.
    assert main(["lab", "tgt-padding-mask", "--checkpoint", str(tiny_checkpoint), option, value]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"transformer-lab lab: error: {option}: expected only without --checkpoint (the checkpoint fixes the model), "
        f"got {value}"
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--d-model", "30", "--nhead", "4"], "--nhead: expected a divisor of --d-model 30"),
        (["--nhead", "3"], "--nhead: expected a divisor of --d-model 32"),  # the default d_model
        (
            ["--d-model", "3", "--nhead", "1"],
            "--d-model: expected an even int (the positions are sin/cos pairs), got 3",
        ),
    ],
)
def test_lab_command_names_the_options_of_model_sizes_that_build_no_model(
    options: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lab", "tgt-padding-mask", *options]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"transformer-lab lab: error: {message}")
    with pytest.raises(ValueError, match=r"^nhead: expected a divisor of d_model 30 \(each head .*\), got 4$"):
        build_lab_setup(d_model=30, nhead=4)  # the API names its keywords


def test_lab_runs_on_a_checkpoint(tiny_checkpoint: Path) -> None:
    setup = build_lab_setup(checkpoint=tiny_checkpoint, batch_size=4)
    assert f"from {tiny_checkpoint}" in setup.description
    assert encoder_row_mask_experiment(setup).holds


def test_lab_draws_a_batch_that_fits_the_checkpoints_positional_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The synthetic batch was drawn up to 9 symbols whatever the checkpoint: a model of max_len 8
    # refused it, "sequence length must be <= max_len=8 (the positional table), got positions up to 9".
    short = write_tiny_checkpoint(tmp_path / "short", max_len=8)
    setup = build_lab_setup(checkpoint=short)
    assert setup.batch.tgt_in_ids.shape[1] <= 8 and setup.batch.src_ids.shape[1] <= 8
    assert tgt_padding_mask_experiment(setup).holds
    assert main(["lab", "encoder-row-mask", "--checkpoint", str(short)]) == 0
    assert "claim holds" in capsys.readouterr().out
    tiny = write_tiny_checkpoint(tmp_path / "tiny", max_len=2)
    assert main(["lab", "encoder-row-mask", "--checkpoint", str(tiny)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "transformer-lab lab: error: --checkpoint: expected a model whose positional table holds at least 3 "
        f"positions (sequences of two lengths, and bos), got max_len 2 in {tiny}"
    ]


def test_lab_runs_on_a_parallel_text_folder(tmp_path: Path) -> None:
    (tmp_path / "train.de").write_text(
        "ein Hund läuft .\nzwei Männer\ndie Katze schläft auf dem Sofa .\n", encoding="utf-8"
    )
    (tmp_path / "train.en").write_text("a dog runs .\ntwo men\nthe cat sleeps on the sofa .\n", encoding="utf-8")
    setup = build_lab_setup(data_dir=tmp_path, batch_size=3, d_model=16, num_layers=1)
    assert setup.batch.src_ids.shape == (3, 7)
    assert tgt_padding_mask_experiment(setup).holds
    with pytest.raises(FileNotFoundError, match="missing"):
        build_lab_setup(data_dir=tmp_path / "missing", batch_size=3)
    with pytest.raises(ValueError, match="^data_dir: expected at least batch_size 5 training pairs, got 3$"):
        build_lab_setup(data_dir=tmp_path, batch_size=5)


def test_lab_command_names_its_options_and_offers_no_option_it_lacks(
    tmp_path: Path, tiny_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "train.de").write_text("ein Hund\n\ndie Katze schläft\n", encoding="utf-8")
    (tmp_path / "train.en").write_text("a dog\ntwo men\nthe cat sleeps\n", encoding="utf-8")
    cases = [
        # Neither the command nor build_lab_setup can skip an empty line: no skip_empty=True advice.
        (
            ["--data-dir", str(tmp_path)],
            f"{tmp_path / 'train.de'}: line 2: expected a non-empty sentence, got ''; fix the file",
        ),
        (
            ["--batch-size", "1"],
            "--batch-size: expected at least 2 (a batch needs sequences of different lengths), got 1",
        ),
        (
            ["--checkpoint", str(tiny_checkpoint), "--data-dir", str(tmp_path)],
            "--checkpoint and --data-dir: expected at most one of them (the checkpoint's vocabulary is not rebuilt "
            f"from text here), got both (--checkpoint {str(tiny_checkpoint)!r}, --data-dir {str(tmp_path)!r})",
        ),
    ]
    for options, message in cases:
        assert main(["lab", "tgt-padding-mask", *options]) == 2
        assert capsys.readouterr().err.splitlines() == [f"transformer-lab lab: error: {message}"]
    (tmp_path / "train.de").write_text("ein Hund\nzwei\n", encoding="utf-8")
    (tmp_path / "train.en").write_text("a dog\ntwo men\n", encoding="utf-8")
    assert main(["lab", "tgt-padding-mask", "--data-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.endswith("--data-dir: expected at least --batch-size 6 training pairs, got 2\n")
    # The Python API names its keywords.
    with pytest.raises(ValueError, match=r"^batch_size: expected at least 2 \(a batch"):
        build_lab_setup(batch_size=1)


def test_setup_refuses_a_batch_without_padding() -> None:
    with pytest.raises(ValueError, match="expected sequences of different lengths"):
        build_lab_setup(batch_size=3, min_length=4, max_length=4, d_model=16, num_layers=1)
    with pytest.raises(ValueError, match="experiment: expected one of"):
        run_experiment("no-such-experiment", build_lab_setup(batch_size=3, d_model=16, num_layers=1))


def test_row_mask_helper_hides_whole_rows_and_keeps_the_causal_part() -> None:
    from transformer_lab.nn import masks

    padding = masks.lengths_to_padding_mask(torch.tensor([2, 3]), 3)  # [2, 3]
    rows = masks.padded_query_rows_mask(padding, num_heads=2, attn_mask=masks.causal_mask(3))  # [4, 3, 3]
    assert rows.shape == (4, 3, 3)
    assert rows[0, 2].all() and rows[1, 2].all()  # sequence 0, both heads: padded row 2 hidden
    assert torch.equal(rows[2], masks.causal_mask(3)) and torch.equal(rows[3], masks.causal_mask(3))
    with pytest.raises(ValueError, match=r"query_padding_mask must be a bool tensor of shape \[batch, query_len\]"):
        masks.padded_query_rows_mask(padding.long(), num_heads=2)
    with pytest.raises(ValueError, match=r"attn_mask must be a bool tensor of shape \[3, 3\]"):
        masks.padded_query_rows_mask(padding, num_heads=2, attn_mask=masks.causal_mask(2))
    keep = torch.tensor([[True, False]])
    assert torch.equal(masks.keep_to_hidden(keep), torch.tensor([[False, True]]))
    with pytest.raises(ValueError, match="keep_mask must be a bool tensor"):
        masks.keep_to_hidden(keep.float())


def test_lab_command_help_gives_the_library_model_sizes() -> None:
    # The options default to None and leave the sizes to build_lab_setup; the help quotes its numbers.
    defaults = inspect.signature(build_lab_setup).parameters
    actions = {action.dest: action for action in lab_parser()._actions}
    for keyword in ("d_model", "nhead", "num_layers"):
        assert actions[keyword].default is None
        assert f"(default {defaults[keyword].default})" in str(actions[keyword].help)


def lab_parser() -> argparse.ArgumentParser:
    subparsers = argparse.ArgumentParser().add_subparsers()
    lab_command.register(subparsers)
    return subparsers.choices["lab"]


def test_sizes_too_large_for_one_sentence_name_its_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A line of 20,000 words (lines run together) is what to fix, not the model's sizes the refusal names.
    german = [
        "ein Hund läuft",
        "zwei Kinder spielen im Park",
        " ".join(["Wort"] * 20_000),
        "eine Frau",
        "ein Mann",
        "Ball",
    ]
    english = ["a dog runs", "two children play", "a long line", "a woman", "a man", "ball"]
    (tmp_path / "train.de").write_text("".join(line + "\n" for line in german), encoding="utf-8")
    (tmp_path / "train.en").write_text("".join(line + "\n" for line in english), encoding="utf-8")
    assert main(["lab", "tgt-padding-mask", "--data-dir", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip()
    assert (
        f"with sequences of up to 20,000 positions (line 3 of {tmp_path / 'train.de'}, the longest sentence)" in error
    )
    assert error.endswith("make one of them smaller, or that sentence")
