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


def test_explain_walks_a_source_of_one_position(capsys: pytest.CaptureFixture[str]) -> None:
    """--src-len 1 is within the option's bounds: the walk has no padded key then, instead of a refusal."""
    assert main(["explain", "--src-len", "1", "--d-model", "16", "--nhead", "2"]) == 0
    printed = capsys.readouterr()
    assert printed.err == ""
    assert "[2, 2, 3, 1]" in printed.out  # the scores: [batch, heads, tgt_len, src_len]
