"""The ``explain`` subcommand prints the walk and turns bad input into one stderr line."""

from __future__ import annotations

import pytest

from transformer_lab.cli import main


def test_explain_prints_the_walk(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--nhead", "2", "--full"]) == 0
    output = capsys.readouterr().out
    assert "decoder.layers.0.multihead_attn" in output
    assert "scores = Q K^T / sqrt(head_dim)" in output


def test_explain_bad_input_is_one_line_and_exit_two(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--d-model", "10", "--nhead", "3"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "--d-model: expected a multiple of --nhead" in error[0] and "--nhead 3" in error[0]
