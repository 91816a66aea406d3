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


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90m", 5400), ("1h30m", 5400), ("1h 30m 15s", 5415), ("1h30.5m", 5430), ("8784h", 366 * 86400), ("5400", 5400)],
)
def test_a_duration_reads_in_h_m_s_within_a_year(text: str, seconds: float) -> None:
    from transformer_lab.training.time_budget import parse_duration

    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1e308", "longer than 0 and at most 8784h, got '1e308'"),
        ("1e20", "at most 8784h, got '1e20'"),
        ("99999999999h", "at most 8784h, got '99999999999h'"),
        ("8785h", "at most 8784h"),
        ("nan", "got 'nan'"),
        (float("inf"), "at most 8784h, got inf"),
        ("1h90m", "below 60 after the first part, got 90m in '1h90m'"),
        ("5M", "with the units h, m and s (lowercase), got 'M' in '5M'"),
        ("5min", "got 'min' in '5min'"),
        ("1.5h30m", "a fraction only in the last part"),
        ("30m1h", "each unit once in the order h, m, s"),
        ("1h1h", "each unit once in the order h, m, s"),
    ],
)
def test_a_duration_out_of_range_or_with_loose_units_is_refused_naming_the_key(text: object, message: str) -> None:
    from transformer_lab.training.time_budget import parse_duration

    with pytest.raises(ValueError, match=r"^train\.time_budget: expected a duration such as 90m") as error:
        parse_duration(text)  # type: ignore[arg-type]
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("value", ["1e308", "1e20", "99999999999h", "1h90m", "5M", "20s"])
def test_time_budget_is_refused_by_argparse_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    started = time.perf_counter()
    out = tmp_path / "run"
    assert run_cli(["train", "copy", "--out", str(out), "--time-budget", value, *tiny_copy_options()]) == 2
    # Refused as the command line is read, not after the 30 s that measure the machine's speed.
    assert time.perf_counter() - started < 5
    error = one_error_line(capsys)
    assert "argument --time-budget: expected " in error and f"'{value}'" in error
    assert not out.exists()


@pytest.mark.parametrize(
    ("arguments", "option", "message"),
    [
        (["download", "multi30k", "--timeout", "1e308"], "--timeout", "at most 1h, got '1e308'"),
        (["download", "multi30k", "--timeout", "nan"], "--timeout", "got 'nan'"),
        (["download", "multi30k", "--timeout", "inf"], "--timeout", "got 'inf'"),
        (["download", "multi30k", "--timeout", "0"], "--timeout", "longer than 0"),
        (["serve", "--checkpoint", "absent", "--wait-limit", "1e308"], "--wait-limit", "at most 1h"),
        (["serve", "--checkpoint", "absent", "--wait-limit", "nan"], "--wait-limit", "got 'nan'"),
        (["--threads", "100000", "explain"], "--threads", "got 100000"),
        (["--threads", "2000", "explain"], "--threads", "got 2000"),
        (["--threads", "500", "explain"], "--threads", "got 500"),
        (["--threads", "0", "explain"], "--threads", "got 0"),
        (["lab", "tgt-padding-mask", "--seed", "100000000000000000000000"], "--seed", "got 100000000000000000000000"),
    ],
)
def test_timeouts_thread_counts_and_seeds_on_the_command_line_are_bounded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arguments: list[str], option: str, message: str
) -> None:
    assert run_cli([*arguments, *(["--to", str(tmp_path / "data")] if arguments[0] == "download" else [])]) == 2
    error = one_error_line(capsys)
    assert f"argument {option}: expected " in error and message in error, error
    assert not (tmp_path / "data").exists()


def test_the_thread_bound_is_a_few_per_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    import os

    from transformer_lab.cli.bounds import MAX_THREADS_PER_CPU

    high = MAX_THREADS_PER_CPU * (os.cpu_count() or 1)
    assert run_cli(["--threads", str(high + 1), "explain"]) == 2
    assert f"expected an int in [1, {high:,}] ({MAX_THREADS_PER_CPU} per CPU" in one_error_line(capsys)
    assert run_cli(["--threads", "1", "explain"]) == 0


def test_the_library_bounds_timeouts_and_waits_too(tmp_path: Path) -> None:
    from transformer_lab.cli.serve_command import MAX_WAIT_SECONDS as CLI_MAX_WAIT
    from transformer_lab.data.datasets import download_dataset
    from transformer_lab.serve.admission import MAX_WAIT_SECONDS, Admission

    for timeout in (1e308, float("nan"), float("inf"), 0.0, -1.0):
        with pytest.raises(ValueError, match=r"^timeout: expected a number of seconds in \(0, 3600\], got "):
            download_dataset("multi30k", tmp_path / "data", timeout=timeout, progress=False)
    assert not (tmp_path / "data").exists()
    for wait in (1e308, float("nan"), float("inf"), 0.0):
        with pytest.raises(ValueError, match=r"^lock_timeout: expected a number of seconds in \(0, 3600\]"):
            Admission(1, wait)
    assert CLI_MAX_WAIT == MAX_WAIT_SECONDS


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("train.seed=100000000000000000000000", "seed: expected an int in [0, 9,223,372,036,854,775,807], got "),
        ("train.seed=-5", "seed: expected an int in [0, "),
        ("data.seed=100000000000000000000000", "data.seed: expected an int in [0, 9,223,372,036,854,775,807]"),
    ],
)
def test_a_seed_out_of_range_is_one_line_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, message: str
) -> None:
    out = tmp_path / "run"
    assert run_cli(["train", "copy", "--out", str(out), *tiny_copy_options(), "--set", option]) == 2
    error = one_error_line(capsys)
    assert option.split("=")[0] in error and message in error, error
    assert not (out / "last").exists()
