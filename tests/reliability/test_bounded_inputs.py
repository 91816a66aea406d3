"""Every input is parsed within stated bounds before any work: one line naming the file or option.

YAML (a run's ``--config``, a model card's front matter) is read with a size cap, a depth
cap and a cap on its values with every alias expanded; a value quoted in a message is cut
short. Durations, timeouts and thread counts are finite and in range, with strict units.
A text that BPE learns from holds no word past `MAX_WORD_CHARACTERS`, whose training time
grows with the square of its length; a line of any text file holds at most `MAX_LINE_BYTES`.
"""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path

import pytest
from tokenizers import pre_tokenizers

from tests.reliability.tiny_runs import tiny_copy_options
from transformer_lab.cli import main
from transformer_lab.data import line_stream, parallel_text
from transformer_lab.data.line_stream import stream_lines
from transformer_lab.data.parallel_text import MAX_LINE_BYTES, read_lines
from transformer_lab.data.prepared_cache import MANIFEST_FILE
from transformer_lab.data.subword import MAX_WORD_CHARACTERS, SubwordTokenizer, check_word_lengths
from transformer_lab.tasks.translation.data import TranslationDataConfig, corpus_kind
from transformer_lab.training.config_file import MAX_YAML_BYTES, load_bounded_yaml
from transformer_lab.training.run.once_per_machine import prepared_corpus


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
    from transformer_lab.training.time_budget import check_budget

    assert check_budget(text) == seconds


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
    from transformer_lab.training.time_budget import check_budget

    with pytest.raises(ValueError, match=r"^train\.time_budget: expected a duration such as 90m") as error:
        check_budget(text)  # type: ignore[arg-type]
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


@pytest.mark.parametrize("key", ["warmup_steps", "grad_accum_steps", "cooldown_steps", "log_every_steps", "keep_last"])
def test_a_step_count_past_64_bits_is_one_line_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    # The schedule raised warmup_steps ** -1.5 and the loss divided by grad_accum_steps as floats:
    # an OverflowError traceback at the first step.
    out = tmp_path / "run"
    huge = 10**30
    assert run_cli(["train", "copy", "--out", str(out), *tiny_copy_options(), "--set", f"train.{key}={huge}"]) == 2
    error = one_error_line(capsys)
    low = 0 if key in ("cooldown_steps", "keep_last") else 1
    assert f"train.{key}: expected an int in [{low}, 9,223,372,036,854,775,807], got {huge}" in error, error
    assert not out.exists()


# A word past the bound: training on it would take a second; on 2 million letters it took hours.
TOO_LONG = "x" * (MAX_WORD_CHARACTERS + 1)


def word_too_long(where: str, column: int) -> str:
    return (
        f"{where}: expected words of at most {MAX_WORD_CHARACTERS:,} characters (BPE training takes time that "
        f"grows with the square of a word's length), got one of {MAX_WORD_CHARACTERS + 1:,} characters at column "
        f"{column} ('xxxxxxxxxxxxxxxxxxxx'...); split it or leave that text out"
    )


def test_prepare_translation_refuses_a_word_too_long_for_bpe_naming_the_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {name: tmp_path / name for name in ("train.de", "train.en", "valid.de", "valid.en")}
    german = [f"ein hund läuft {number}" for number in range(40)]
    english = [f"a dog runs {number}" for number in range(40)]
    english[30] = f"a {TOO_LONG} runs"
    for name, lines in (("train.de", german), ("train.en", english), ("valid.de", german[:3]), ("valid.en", ["x"] * 3)):
        files[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "prepared"
    code = run_cli(
        ["prepare", "translation", "--train", str(files["train.de"]), str(files["train.en"]), "--valid"]
        + [str(files["valid.de"]), str(files["valid.en"]), "--out", str(out), "--no-progress"]
        + ["--set", "data.vocab_size=300", "--set", "data.min_frequency=1"]
    )
    assert code == 2
    expected = word_too_long(f"{files['train.en']}: line 31", 3)
    assert one_error_line(capsys) == f"transformer-lab prepare: error: {expected}"
    assert not out.exists()


def test_prepare_classification_refuses_a_word_too_long_for_bpe_naming_the_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"text": f"news {number} of {label}", "label": label} for number in range(10) for label in ("a", "b")]
    rows[7]["text"] = f"{TOO_LONG} news"
    train_file, valid_file = tmp_path / "train.jsonl", tmp_path / "valid.jsonl"
    train_file.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    valid_file.write_text("".join(json.dumps(row) + "\n" for row in rows[:2]), encoding="utf-8")
    out = tmp_path / "prepared"
    code = run_cli(
        ["prepare", "classification", "--train", str(train_file), "--valid", str(valid_file), "--out", str(out)]
        + ["--no-progress", "--set", "data.vocab_size=300"]
    )
    assert code == 2
    assert one_error_line(capsys) == "transformer-lab prepare: error: " + word_too_long(f"{train_file}: line 8", 1)
    assert not out.exists()


def test_the_library_names_the_text_with_a_word_too_long_and_trains_on_one_at_the_bound() -> None:
    sentences = ["a dog runs", "a cat sleeps"] * 5
    with pytest.raises(ValueError) as raised:
        SubwordTokenizer.train([*sentences, f"a {TOO_LONG}"], vocab_size=300)
    assert str(raised.value) == word_too_long("texts[10]", 3)
    with pytest.raises(ValueError) as raised:
        SubwordTokenizer.train_from_pairs([("ein hund", "a dog"), ("kurz", TOO_LONG)], vocab_size=300)
    assert str(raised.value) == word_too_long("pairs[1][1]", 1)
    # At the bound, and many words as long as the bound together, are words as any other.
    at_bound = "x" * MAX_WORD_CHARACTERS
    tokenizer = SubwordTokenizer.train([*sentences, at_bound, " ".join([at_bound] * 3)], vocab_size=300)
    assert tokenizer.decode(tokenizer.encode(at_bound)) == at_bound


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ("春风" * 6_000, True),  # letters with no space or mark between them are one word
        ("春风。" * 4_000, False),  # punctuation splits them, as the pre-tokenizer does
        (" " * (MAX_WORD_CHARACTERS + 1), True),  # a run of spaces is one piece too
        ("1" * (MAX_WORD_CHARACTERS + 1), True),
        ("=" * (MAX_WORD_CHARACTERS + 1), True),
        ("a1" * MAX_WORD_CHARACTERS, False),  # letters then digits: two pieces each time
        ("word " * 400_000, False),  # a long line of short words is no long word
    ],
    ids=["han-run", "han-with-punctuation", "spaces", "digits", "symbols", "letters-and-digits", "many-words"],
)
def test_a_word_is_a_run_the_byte_level_pre_tokenizer_keeps_whole(text: str, refused: bool) -> None:
    if refused:
        with pytest.raises(ValueError, match=r"^line 1: expected words of at most 10,000 characters"):
            check_word_lengths(text, "line 1")
    else:
        check_word_lengths(text, "line 1")
    # What the BPE trainer's own pre-tokenizer makes one piece agrees (the long line: its start).
    pieces = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True).pre_tokenize_str(text[:30_000])
    assert (max(end - start for _, (start, end) in pieces) > MAX_WORD_CHARACTERS) == refused


def a_line_of(size: int) -> str:
    """A line of ``size`` bytes of short words (no word too long for BPE): one sentence it is not."""
    words = "ein haus " * (size // 9 + 1)
    return words[:size].rstrip() + "x" * (size - len(words[:size].rstrip()))


@pytest.mark.parametrize("command", ["prepare", "train"])
@pytest.mark.parametrize("block_bytes", [line_stream.BLOCK_BYTES, 1 << 16])
def test_a_line_past_the_bound_is_refused_naming_the_file_and_line_and_nothing_is_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str, block_bytes: int
) -> None:
    # It was prepared (41 MB: a minute and 5.6 GB), then refused by training as longer than model.max_len.
    monkeypatch.setattr(line_stream, "BLOCK_BYTES", block_bytes)  # one read, or the line across many blocks
    german = [f"ein hund läuft {number}" for number in range(40)]
    german[30] = a_line_of(MAX_LINE_BYTES + 1)
    source, target = tmp_path / "train.de", tmp_path / "train.en"
    source.write_text("\n".join(german) + "\n", encoding="utf-8")
    target.write_text("".join(f"a dog runs {number}\n" for number in range(40)), encoding="utf-8")
    out, cache = tmp_path / "out", tmp_path / "cache"
    settings = ["--set", "data.vocab_size=300"] + (["--set", f"data.cache_dir={cache}"] if command == "train" else [])
    code = run_cli([command, "translation", "--train", str(source), str(target), "--out", str(out), *settings])
    assert code == 2
    assert one_error_line(capsys) == (
        f"transformer-lab {command}: error: {source}: line 31: expected lines of at most {MAX_LINE_BYTES:,} bytes, "
        f"got one of {MAX_LINE_BYTES + 1:,} bytes; split it or leave it out"
    )
    assert not out.exists()
    assert not cache.exists() or not [path for path in cache.rglob("*") if path.is_dir()]


@pytest.mark.parametrize("start, end", [("", "\n"), ("\ufeff", "\r\n"), ("", "")])
def test_every_reader_takes_a_line_at_the_bound_and_measures_one_past_it_without_its_end(
    tmp_path: Path, start: str, end: str
) -> None:
    path = tmp_path / "lines.txt"
    at_bound = a_line_of(MAX_LINE_BYTES - 2) + "ä"  # a letter of two bytes: bytes are counted, not characters
    assert len(at_bound.encode("utf-8")) == MAX_LINE_BYTES
    path.write_text(f"{start}kurz{end or chr(10)}{at_bound}{end}", encoding="utf-8")
    assert read_lines(path)[1] == at_bound
    assert [line for lines in stream_lines(path, 1 << 16) for line in lines][1] == at_bound
    path.write_text(f"{start}kurz{end or chr(10)}{at_bound}x{end}", encoding="utf-8")
    message = (
        f"{path}: line 2: expected lines of at most {MAX_LINE_BYTES:,} bytes, got one of {MAX_LINE_BYTES + 1:,} bytes"
    )
    for read in (read_lines, lambda path: list(stream_lines(path, 1 << 16)), lambda path: list(stream_lines(path))):
        with pytest.raises(ValueError, match=f"^{re.escape(message)}; split it or leave it out$"):
            read(path)


def test_a_cached_corpus_read_before_the_line_bound_is_prepared_again_and_its_long_line_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Its files unchanged, such an entry was reused: the line a fresh read refuses was served from it.
    german = [f"ein hund läuft {number}" for number in range(40)]
    german[30] = a_line_of(MAX_LINE_BYTES + 1)
    source, target = tmp_path / "train.de", tmp_path / "train.en"
    source.write_text("\n".join(german) + "\n", encoding="utf-8")
    target.write_text("".join(f"a dog runs {number}\n" for number in range(40)), encoding="utf-8")
    files = (str(source), str(target))
    config = TranslationDataConfig(train_files=files, vocab_size=300, cache_dir=str(tmp_path / "cache"))
    with monkeypatch.context() as earlier:  # the readers as they were before lines were bounded
        earlier.setattr(parallel_text, "_refuse_long_line", lambda lines, name, first_line: None)
        earlier.setattr(line_stream, "_LONGEST_PENDING", 1 << 40)
        entry = prepared_corpus(corpus_kind(config, progress=False), "", config.cache_dir).folder
    manifest_path = entry / MANIFEST_FILE
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest.pop("input_checks", None)  # as those readers' manifests were written
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")

    caplog.set_level(logging.INFO, logger="transformer_lab")
    bound, size = f"{MAX_LINE_BYTES:,}", f"{MAX_LINE_BYTES + 1:,}"
    message = f"{source}: line 31: expected lines of at most {bound} bytes, got one of {size} bytes"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}; split it or leave it out$"):
        prepared_corpus(corpus_kind(config, progress=False), "", config.cache_dir)
    assert (
        f"preparing the corpus again in {entry}: its files were read before the readers' checks added since "
        "(a carriage return inside a line refused; a NUL character refused; a line past 1 MiB refused; "
        "a byte-order mark past a file's start refused; a training example repeating a carved validation example "
        "left out)"
    ) in caplog.messages
