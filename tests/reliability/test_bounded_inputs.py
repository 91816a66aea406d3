"""Every input is parsed within stated bounds before any work: one line naming the file or option.

YAML (a run's ``--config``, a model card's front matter) is read with a size cap, a depth
cap and a cap on its values with every alias expanded; a value quoted in a message is cut
short. Durations, timeouts and thread counts are finite and in range, with strict units.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.reliability.tiny_runs import tiny_copy_options
from transformer_lab.cli import main
from transformer_lab.training.config_file import MAX_YAML_BYTES, load_bounded_yaml


def run_cli(arguments: list[str]) -> int:
    """``main``'s exit code, whether the error came from argparse (SystemExit) or from the command."""
    try:
        return main(arguments)
    except SystemExit as exit_:
        return int(exit_.code or 0)


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "Traceback" not in error, error
    return error


# Seven levels of nine aliases each: 4.8 million values from 317 bytes, under a typed key
# (a message that quoted the value whole took minutes and gigabytes).
ALIAS_BOMB = "model:\n  d_model:\n" + "".join(
    f"  - &{name} [{', '.join([f'*{previous}' if previous else 'x'] * 9)}]\n"
    for previous, name in zip(["", "a", "b", "c", "d", "e", "f"], "abcdefg")
)


def train_with_config(tmp_path: Path, text: str) -> list[str]:
    config = tmp_path / "run.yaml"
    config.write_text(text, encoding="utf-8")
    return ["train", "copy", "--out", str(tmp_path / "run"), "--config", str(config), *tiny_copy_options()]


def test_nested_aliases_are_refused_by_their_expanded_size_in_well_under_a_second(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert len(ALIAS_BOMB.encode()) < 400
    started = time.perf_counter()
    assert run_cli(train_with_config(tmp_path, ALIAS_BOMB)) == 2
    assert time.perf_counter() - started < 5
    error = one_error_line(capsys)
    assert f"{tmp_path / 'run.yaml'}: line " in error
    assert "expected at most 100,000 values (aliases expanded), got more" in error
    assert not (tmp_path / "run" / "metrics.jsonl").exists() and not (tmp_path / "run" / "last").exists()


def test_a_value_within_the_bounds_is_quoted_short_in_the_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Five levels: 59,049 values, within the cap, refused for its type with a short quote.
    text = "\n".join(ALIAS_BOMB.splitlines()[:7]) + "\n"
    assert run_cli(train_with_config(tmp_path, text)) == 2
    error = one_error_line(capsys)
    assert "model.d_model: expected an int, got [[" in error and error.endswith("...")
    assert len(error) < 400


def test_yaml_nested_100000_deep_is_one_line_naming_the_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(train_with_config(tmp_path, "model:\n  d_model: " + "[" * 100_000 + "]" * 100_000 + "\n")) == 2
    error = one_error_line(capsys)
    assert f"{tmp_path / 'run.yaml'}: line 2: expected values nested at most 32 levels deep, got deeper" in error


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # An alias inside the value it names would expand forever.
        ("model:\n  d_model: &a [1, *a]\n", "line 2: expected no alias inside the value it names"),
        # Aliases that nest one another 40 deep, each shallow where it is written.
        (
            "x0: &a0 [1]\n" + "".join(f"x{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 40)) + "model: *a39\n",
            "nested at most 32 levels deep (aliases expanded)",
        ),
        ("model:\n  d_model: " + "1" * 5000 + "\n", "expected YAML values Python can hold"),
    ],
    ids=["an alias inside itself", "aliases nested 40 deep", "an integer of 5,000 digits"],
)
def test_other_unbounded_yaml_is_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    assert run_cli(train_with_config(tmp_path, text)) == 2
    error = one_error_line(capsys)
    assert f"{tmp_path / 'run.yaml'}: " in error and message in error


def test_a_yaml_file_over_the_size_cap_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("# " + "x" * MAX_YAML_BYTES + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"big\.yaml: expected a YAML file of at most 1,048,576 bytes"):
        load_bounded_yaml(path)


def test_a_small_alias_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("sizes: &s {d_model: 16, nhead: 2}\nmodel: *s\nlist: [&n 3, *n]\n", encoding="utf-8")
    assert load_bounded_yaml(path) == {
        "sizes": {"d_model": 16, "nhead": 2},
        "model": {"d_model": 16, "nhead": 2},
        "list": [3, 3],
    }
