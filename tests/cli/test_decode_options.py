"""The decoding options that translate and couplet declare (``DECODE_OPTIONS``) and read back as keywords."""

from __future__ import annotations

import argparse

import pytest

from transformer_lab.cli.task_options import add_task_options, given_options
from transformer_lab.decoding import DecodeConfig
from transformer_lab.decoding.search_settings import with_search
from transformer_lab.tasks.evaluation import DECODE_OPTIONS, search_keywords


def with_decode_arguments(decode_config: DecodeConfig, arguments: argparse.Namespace) -> DecodeConfig:
    """What translate and couplet do with their decoding options."""
    return with_search(decode_config, **search_keywords(given_options(arguments, arguments.destinations)))


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.set_defaults(destinations=add_task_options(parser, DECODE_OPTIONS))
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
    with pytest.raises(ValueError, match="^beam_stop: expected one of 'exact', 'finished', got 'never'$"):
        DecodeConfig(beam_stop="never")  # the field named, once
