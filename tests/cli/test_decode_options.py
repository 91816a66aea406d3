"""The decoding options shared by translate, couplet and evaluate."""

from __future__ import annotations

import argparse

import pytest

from transformer_lab.cli.decode_options import add_decode_arguments, decode_keywords
from transformer_lab.decoding import DecodeConfig
from transformer_lab.decoding.search_settings import with_search


def with_decode_arguments(decode_config: DecodeConfig, arguments: argparse.Namespace) -> DecodeConfig:
    """What translate, couplet and evaluate do with their decoding options."""
    return with_search(decode_config, **decode_keywords(arguments))


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_decode_arguments(parser)
    return parser.parse_args(argv)


def test_absent_options_keep_the_checkpoints_decoding() -> None:
    saved = DecodeConfig(strategy="beam", beam_size=4, length_penalty=0.6)
    assert with_decode_arguments(saved, parse()) == saved


def test_beam_precision_and_length_penalty_replace_the_checkpoints() -> None:
    saved = DecodeConfig(strategy="greedy", length_penalty=0.6)
    chosen = with_decode_arguments(saved, parse("--beam", "5", "--precision", "bf16", "--length-penalty", "1.0"))
    assert (chosen.strategy, chosen.beam_size, chosen.precision, chosen.length_penalty) == ("beam", 5, "bf16", 1.0)
    assert with_decode_arguments(saved, parse("--length-penalty", "0")).length_penalty == 0.0


def test_a_non_finite_length_penalty_is_named() -> None:
    with pytest.raises(ValueError, match=r"length_penalty: expected a float in \[0, 10\]"):
        with_decode_arguments(DecodeConfig(), parse("--length-penalty", "nan"))


def test_beam_stop_replaces_the_checkpoints_and_is_checked() -> None:
    saved = DecodeConfig(strategy="beam")
    assert saved.beam_stop == "exact"
    assert with_decode_arguments(saved, parse("--beam-stop", "finished")).beam_stop == "finished"
    with pytest.raises(SystemExit):
        parse("--beam-stop", "never")  # argparse names the choices
    with pytest.raises(ValueError, match="stop: expected one of"):
        DecodeConfig(beam_stop="never")
