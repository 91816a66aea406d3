"""--config FILE.yaml: the preset as YAML round-trips, the file applies before --set, and bad files are one line."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, TypeVar

import pytest

from transformer_lab.cli import main
from transformer_lab.cli.overrides import resolved_config
from transformer_lab.tasks.synthetic import train as synthetic_train
from transformer_lab.tasks.translation import train as translation_train
from transformer_lab.training.config_file import config_file_settings, config_to_yaml
from transformer_lab.training.config_io import config_to_dict, merge_settings, settings_of

ConfigType = TypeVar("ConfigType")


def apply_config_file(config: ConfigType, path: Path) -> ConfigType:
    """``config`` with the YAML file's values laid over it, as ``--config`` lays them."""
    return merge_settings(type(config), [*settings_of(config), *config_file_settings(path)])[0]


def test_a_preset_printed_as_yaml_reads_back_to_the_same_config(tmp_path: Path) -> None:
    for preset in (translation_train.default_config(), translation_train.base_config()):
        (tmp_path / "preset.yaml").write_text(config_to_yaml(preset), encoding="utf-8")
        assert apply_config_file(translation_train.default_config(), tmp_path / "preset.yaml") == preset


def test_a_text_that_yaml_1_2_reads_as_a_number_round_trips_as_text(tmp_path: Path) -> None:
    # PyYAML's dumper quotes only YAML 1.1's numbers; "1e-3" and "0o17" went out bare and came back as numbers.
    for text in ("1e-3", "0o17", "0x1F", ".5", "010"):
        preset = translation_train.default_config()
        preset = dataclasses.replace(preset, train=dataclasses.replace(preset.train, best_metric=text))
        (tmp_path / "preset.yaml").write_text(config_to_yaml(preset), encoding="utf-8")
        assert apply_config_file(translation_train.default_config(), tmp_path / "preset.yaml") == preset


def test_the_config_command_prints_what_config_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "translation", "--preset", "base"]) == 0
    (tmp_path / "base.yaml").write_text(capsys.readouterr().out, encoding="utf-8")
    assert (
        apply_config_file(translation_train.default_config(), tmp_path / "base.yaml") == translation_train.base_config()
    )


def test_a_printed_preset_other_than_the_first_is_fed_back_by_the_command_its_first_line_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Over the default preset each value of base's would count as given: its carve size beside --valid
    # was refused ("data.num_carved_validation: expected it only without --valid ..., got 3000").
    capsys.readouterr()
    assert main(["config", "translation", "--preset", "base"]) == 0
    printed = capsys.readouterr().out
    (tmp_path / "base.yaml").write_text(printed, encoding="utf-8")
    header = printed.splitlines()[0]
    assert header.startswith("# transformer-lab train translation ") and " --config FILE: " in header
    options = header.removeprefix("# transformer-lab train translation ").split("--config FILE")[0].split()
    pairs = [("Ein Hund läuft.", "A dog runs."), ("Zwei Katzen schlafen.", "Two cats sleep.")] * 6
    for name, side in (("train.de", 0), ("train.en", 1), ("dev.de", 0), ("dev.en", 1)):
        (tmp_path / name).write_text("".join(pair[side] + "\n" for pair in pairs), encoding="utf-8")
    files = ["--train", str(tmp_path / "train.de"), str(tmp_path / "train.en")]
    files += ["--valid", str(tmp_path / "dev.de"), str(tmp_path / "dev.en")]
    # `prepare` reads --preset and --config as `train` does, and refuses the same unused settings.
    command = ["prepare", "translation", *options, "--config", str(tmp_path / "base.yaml"), *files, "--no-progress"]
    assert main([*command, "--out", str(tmp_path / "out")]) == 0, capsys.readouterr().err
    # The first preset's file needs no --preset.
    capsys.readouterr()
    assert main(["config", "translation"]) == 0
    assert capsys.readouterr().out.startswith("# transformer-lab train translation --config FILE: ")


def test_prepare_names_the_config_keys_it_leaves_to_train(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Was: model.d_model and data.max_tokens from the file dropped without a word (a --set of them is refused).
    pairs = [("Ein Hund läuft.", "A dog runs."), ("Zwei Katzen schlafen.", "Two cats sleep.")] * 6
    for name, side in (("train.de", 0), ("train.en", 1)):
        (tmp_path / name).write_text("".join(pair[side] + "\n" for pair in pairs), encoding="utf-8")
    config = tmp_path / "run.yaml"
    config.write_text("model:\n  d_model: 64\ndata:\n  max_tokens: 5000\n  vocab_size: 300\n", encoding="utf-8")
    files = ["--train", str(tmp_path / "train.de"), str(tmp_path / "train.en"), "--out", str(tmp_path / "out")]
    with caplog.at_level("WARNING"):
        assert main(["prepare", "translation", "--config", str(config), *files, "--no-progress"]) == 0
    assert [record.getMessage() for record in caplog.records if record.getMessage().startswith("--config")] == [
        "--config: data.max_tokens, model.d_model: read by train, not by prepare (which reads the data settings "
        "that make the corpus); give the file to train --prepared too"
    ]


def test_a_set_key_with_a_character_no_key_has_names_it_and_the_key_it_may_stand_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for typed, character, meant in (
        ("train.max\u00a0steps=2", "U+00A0 NO-BREAK SPACE at character 4", "max_steps"),
        ("train.max-steps=2", "U+002D HYPHEN-MINUS at character 4", "max_steps"),
        ("tr\u0430in.max_steps=2", "U+0430 CYRILLIC SMALL LETTER A at character 3", "train"),
    ):
        assert main(["train", "copy", "--out", str(tmp_path / "out"), "--set", typed]) == 2
        error = capsys.readouterr().err.strip()
        assert "\n" not in error and "unknown key for" in error, error
        assert error.endswith(
            f"holds {character}, and a key is only ASCII letters, digits and _; did you mean {meant!r}?"
        )
    # A key of plain letters that is no key is said as before, without a character to blame.
    assert main(["train", "copy", "--out", str(tmp_path / "out"), "--set", "train.max_step=2"]) == 2
    assert capsys.readouterr().err.strip().endswith("'tensorboard', 'time_budget', 'warmup_steps']")


def test_train_applies_the_files_in_order_then_set_wins(tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text(
        "model:\n  d_model: 16\n  nhead: 2\n  num_encoder_layers: 1\n  num_decoder_layers: 1\n"
        "  dim_feedforward: 32\ntrain:\n  max_steps: 3\n  epochs: 0\n  progress_bar: false\n"
        "data:\n  num_train: 32\n  num_validation: 16\n",
        encoding="utf-8",
    )
    (tmp_path / "more.yaml").write_text("data:\n  num_train: 64\n", encoding="utf-8")
    out = tmp_path / "run"
    arguments = ["train", "copy", "--out", str(out), "--config", str(tmp_path / "run.yaml")]
    assert main([*arguments, "--config", str(tmp_path / "more.yaml"), "--set", "train.max_steps=2"]) == 0
    saved = json.loads((out / "last" / "config.json").read_text(encoding="utf-8"))
    assert saved["model"]["d_model"] == 16 and saved["model"]["num_encoder_layers"] == 1
    assert saved["train"]["max_steps"] == 2  # --set wins over the files
    assert saved["data"]["num_train"] == 64  # the second file over the first
    assert saved["data"]["num_validation"] == 16  # what the second file does not name stays the first's


@pytest.mark.parametrize(
    "text, message",
    [
        ("model:\n  width: 3\n", r"run.yaml: model\.width: unknown key for ModelConfig"),
        ("model:\n  d_model: sixty\n", r"run.yaml: model\.d_model: expected an int"),
        # A key with nothing after it is YAML's null, said as the file spells it (was: "got None").
        ("train:\n  max_steps:\n", r"run.yaml: train\.max_steps: expected an int, got null \(no value; .*\)$"),
        ("train:\n  precision: null\n", r"run.yaml: train\.precision: expected one of .*, got null \(no value"),
        ("model: [1, 2\n", r"run.yaml: line \d+: expected YAML, got an error"),
        ("- model\n", r"run.yaml: expected sections of keys"),
        # An empty file was read as no settings, without a word: likely emptied, or not the file meant.
        *[
            (empty, r"run\.yaml: expected a mapping of settings \(model:, train:, data:, \.\.\.\), got an empty file$")
            for empty in ("", "# model:\n#   d_model: 64\n\n", "---\n")
        ],
        ("model: 3\n", r"run.yaml: model: expected a mapping of its keys \(such as .*\), got 3$"),
        ("train:\n", r"run.yaml: train: expected a mapping of its keys \(such as seed, .*\), got nothing$"),
        (
            b"train:\n  max_steps: caf\xe9\n",
            r"run.yaml: line 2: expected UTF-8 text, got invalid byte\(s\) b'\\xe9' at byte column 17 "
            r"\(invalid continuation byte\)$",
        ),
        # PyYAML keeps the last of a repeated key: the first would be dropped without a word.
        (
            "train:\n  max_steps: 2\ntrain:\n  epochs: 1\n",
            r"run.yaml: line 3: expected each key once in a mapping, got 'train' again \(first at line 1\)",
        ),
        ("train:\n  max_steps: 2\n  max_steps: 4\n", r"run.yaml: line 3: .*got 'max_steps' again \(first at line 2\)"),
        # Two merge keys: PyYAML merged both, the later's max_steps winning without a word.
        (
            "train:\n  <<: &a {max_steps: 2}\n  <<: {max_steps: 4}\n",
            r"run.yaml: line 3: expected one merge key '<<' in a mapping \(several mappings as a list: "
            r"'<<: \[\*a, \*b\]'\), got another \(first at line 2\)$",
        ),
        # A key that is no name: was said as the key "train.None".
        ("train:\n  ~: 3\n", r"run.yaml: expected keys that are names under train, got None \(NoneType\)$"),
        ("1: 3\n", r"run.yaml: expected keys that are names at the top, got 1 \(int\)$"),
        # Two mappings of one merge list giving a key: PyYAML kept the last, YAML's rule keeps the first.
        (
            "train:\n  <<: [{max_steps: 3}, {max_steps: 4}]\n",
            r"run.yaml: line 2: expected the mappings of a merge list to give each key once, got 'max_steps' in "
            r"mapping 1 and mapping 2; set it in the mapping itself to choose$",
        ),
        # A key pasted from a page: printed as it is, it looked like one of the keys the message listed.
        (
            "train:\n  max\u200b_steps: 2\n",
            r"run.yaml: train\.max\u200b_steps: unknown key for TrainConfig; expected one of \[.*\]; "
            r"'max\\u200b_steps' holds U\+200B ZERO WIDTH SPACE at character 4, and a key is only ASCII letters, "
            r"digits and _; did you mean 'max_steps'\?$",
        ),
        (
            "tr\u0430in:\n  max_steps: 2\n",
            r"run.yaml: tr\u0430in: unknown key .*; 'tr\u0430in' holds U\+0430 CYRILLIC SMALL LETTER A at character 3, "
            r".*; did you mean 'train'\?$",
        ),
    ],
)
def test_a_bad_config_file_is_one_line_naming_the_file_and_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | bytes, message: str
) -> None:
    path = tmp_path / "run.yaml"
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text, encoding="utf-8")
    code = main(["train", "copy", "--out", str(tmp_path / "out"), "--config", str(tmp_path / "run.yaml")])
    error = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in error, error
    assert error.startswith("transformer-lab train: error: ")
    assert re.search(message, error), error
    assert not (tmp_path / "out" / "last").exists()


@pytest.mark.parametrize(
    "key, text, expected",
    [
        ("train.max_steps", "010", 10),  # YAML 1.1: octal 8
        ("train.max_steps", "0o17", 15),  # YAML 1.1: the text '0o17'
        ("train.max_steps", "0x1F", 31),
        ("train.max_steps", "+12", 12),
        ("train.lr_factor", "1e-3", 0.001),  # YAML 1.1: the text '1e-3' (its floats need a dot)
        ("train.lr_factor", ".5", 0.5),
        ("train.lr_factor", "2", 2.0),
        ("train.eval_every_steps", "1:04", r"train\.eval_every_steps: expected an int, got '1:04'$"),  # 1.1: 64
        ("train.max_steps", "0b101", r"train\.max_steps: expected an int, got '0b101'$"),  # 1.1: 5
        ("train.max_steps", "1_000", r"train\.max_steps: expected an int, got '1_000'$"),  # 1.1: 1000
        ("train.lr_factor", "1_0.5", r"train\.lr_factor: expected a float, got '1_0\.5'$"),  # --set: 10.5
        ("train.lr_factor", ".inf", r"train\.lr_factor: expected a finite float, got (inf|'\.inf')$"),
        ("model.dropout", "0e-5", 0.0),
    ],
)
def test_a_config_file_reads_numbers_as_yaml_1_2_and_as_set_does(
    tmp_path: Path, key: str, text: str, expected: Any
) -> None:
    section, name = key.split(".")
    path = tmp_path / "run.yaml"
    path.write_text(f"{section}:\n  {name}: {text}\n", encoding="utf-8")
    from_file = argparse.Namespace(config=[path], overrides=[])
    from_set = argparse.Namespace(config=[], overrides=[f"{key}={text}"])
    preset = synthetic_train.default_config()
    if isinstance(expected, str):
        for arguments in (from_file, from_set):
            with pytest.raises(ValueError, match=expected):
                resolved_config(preset, arguments)
        return
    config = resolved_config(preset, from_file)[0]
    assert getattr(getattr(config, section), name) == expected
    assert type(getattr(getattr(config, section), name)) is type(expected)
    assert config == resolved_config(preset, from_set)[0]


def test_a_set_number_too_small_for_a_float_is_refused_as_typed_not_read_as_0() -> None:
    # Was: "train.lr_factor: expected a finite float > 0, got 0.0", a value nobody typed (dropout: 0, silently).
    preset = synthetic_train.default_config()
    for key in ("train.lr_factor", "model.dropout"):
        arguments = argparse.Namespace(config=[], overrides=[f"{key}=1e-400"])
        with pytest.raises(
            ValueError, match=rf"^{re.escape(key)}: expected a number a float can hold .*, got '1e-400'"
        ):
            resolved_config(preset, arguments)


def test_a_yaml_number_too_small_for_a_float_is_refused_by_its_line_not_read_as_0(tmp_path: Path) -> None:
    # Was: "train.lr_factor: expected a finite float > 0, got 0.0"; a dropout of 1e-400 became 0 silently.
    preset = synthetic_train.default_config()
    for text in ("1e-400", "!!float 2.5e-999", "-0.001e-400"):
        path = tmp_path / "tiny.yaml"
        path.write_text(f"train:\n  max_steps: 3\nmodel:\n  dropout: {text}\n", encoding="utf-8")
        typed = text.split()[-1]
        with pytest.raises(ValueError) as raised:
            resolved_config(preset, argparse.Namespace(config=[path], overrides=[]))
        assert str(raised.value) == (
            f"{path}: line 4: expected YAML, got an error: expected a number a float can hold (0, or at "
            f"least about 5e-324 in size), got {typed!r}, which reads as 0"
        )
    # Zero spelt any way is still zero.
    path.write_text("model:\n  dropout: 0.0e-400\n", encoding="utf-8")
    assert resolved_config(preset, argparse.Namespace(config=[path], overrides=[]))[0].model.dropout == 0.0


def test_a_yaml_boolean_word_where_text_is_expected_says_how_to_write_the_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `no` is Norwegian's ISO code, and YAML 1.1's false; the message said only "got False".
    (tmp_path / "norway.yaml").write_text("data:\n  source_language: no\n", encoding="utf-8")
    arguments = ["train", "translation", "--out", str(tmp_path / "never"), "--config", str(tmp_path / "norway.yaml")]
    assert main(arguments) == 2
    assert capsys.readouterr().err == (
        f"transformer-lab train: error: --config {tmp_path / 'norway.yaml'}: data.source_language: expected a str, "
        "got the boolean False (an unquoted no, off or false in YAML; quote it to mean the text)\n"
    )
    assert not (tmp_path / "never").exists()
    preset = translation_train.default_config()
    for text, message in (
        (
            "train: {precision: off}",
            r"train\.precision: expected one of \[.*\], got the boolean False \(an unquoted no,",
        ),
        (
            "data: {train_files: [yes]}",
            r"data\.train_files\[0\]: expected a str, got the boolean True \(an unquoted yes,",
        ),
    ):
        (tmp_path / "run.yaml").write_text(text + "\n", encoding="utf-8")
        with pytest.raises(ValueError, match=message):
            resolved_config(preset, argparse.Namespace(config=[tmp_path / "run.yaml"], overrides=[]))
    # Quoted, the word is text; a boolean field still reads YAML 1.1's words.
    (tmp_path / "run.yaml").write_text("data: {source_language: 'no'}\ntrain: {progress_bar: off}\n", encoding="utf-8")
    config = resolved_config(preset, argparse.Namespace(config=[tmp_path / "run.yaml"], overrides=[]))[0]
    assert (config.data.source_language, config.train.progress_bar) == ("no", False)


def test_train_reads_a_config_file_of_leading_zeros_as_set_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `max_steps: 010` trained 8 steps and `eval_every_steps: 1:04` was 64; --set read 010 as 10.
    (tmp_path / "oct.yaml").write_text("train: {max_steps: 010, eval_every_steps: 1:04}\n", encoding="utf-8")
    arguments = ["train", "copy", "--out", str(tmp_path / "refused"), "--config", str(tmp_path / "oct.yaml")]
    assert main([*arguments, "--set", "train.progress_bar=false"]) == 2
    assert "train.eval_every_steps: expected an int, got '1:04'" in capsys.readouterr().err
    (tmp_path / "run.yaml").write_text(
        "model: {d_model: 16, nhead: 2, num_encoder_layers: 1, num_decoder_layers: 1, dim_feedforward: 32}\n"
        "train: {max_steps: 010, eval_every_steps: 005, epochs: 0, progress_bar: false}\n"
        "data: {num_train: 32, num_validation: 16}\n",
        encoding="utf-8",
    )
    out = tmp_path / "run"
    assert main(["train", "copy", "--out", str(out), "--config", str(tmp_path / "run.yaml")]) == 0
    saved = json.loads((out / "last" / "config.json").read_text(encoding="utf-8"))
    assert (saved["train"]["max_steps"], saved["train"]["eval_every_steps"]) == (10, 5)
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert max(steps) == 10


def test_a_missing_config_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "copy", "--out", str(tmp_path / "out"), "--config", str(tmp_path / "none.yaml")]) == 2
    assert "--config: expected an existing YAML file" in capsys.readouterr().err


def test_a_folder_as_the_config_file_is_named_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # It said "expected an existing YAML file", as for a path where nothing is.
    folder = tmp_path / "settings"
    folder.mkdir()
    assert main(["train", "copy", "--out", str(tmp_path / "out"), "--config", str(folder)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.endswith(f"--config: expected a YAML file, got {str(folder)!r}, which is a folder"), error
    assert not (tmp_path / "out").exists()


def test_yaml_holds_every_section_of_the_preset() -> None:
    assert set(config_to_dict(translation_train.default_config())) == {"data", "model", "train", "decode"}


def test_config_into_a_pipe_closed_early_is_quiet() -> None:
    # `config translation | head -1`: the reader is gone before the preset is written.
    process = subprocess.Popen(
        [sys.executable, "-m", "transformer_lab", "config", "translation"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    error = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141, error
    assert error == ""  # was: "failed: [Errno 32] Broken pipe", exit 1


def test_an_unknown_preset_is_refused_naming_the_presets_as_words(capsys: pytest.CaptureFixture[str]) -> None:
    # The refusal is read by someone typing a command: no Python list in it.
    assert main(["config", "classification", "--preset", "base"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.endswith("--preset: expected 'default', the only preset of classification, got 'base'")
    assert main(["config", "translation", "--preset", "big"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.endswith("--preset: expected a preset of translation (base or default), got 'big'")
    assert "[" not in error


@pytest.mark.parametrize("character", ["\x00", "\x07", "\x1b", "\x7f"])
def test_a_control_character_in_a_config_file_is_one_line_naming_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], character: str
) -> None:
    # PyYAML refuses it as its reader is made, which was outside the handled errors: a traceback, exit 1.
    path = tmp_path / "run.yaml"
    path.write_text(f"train: {{max_steps: 2}}\n# {character}\n", encoding="utf-8")
    assert main(["train", "copy", "--out", str(tmp_path / "run"), "--config", str(path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"transformer-lab train: error: {path}: line 2: expected YAML, got the character {character!r} "
        f"(U+{ord(character):04X}), which YAML does not allow"
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("key", ["train.device", "train.best_metric", "decode.strategy", "model.activation"])
def test_a_huge_value_in_a_config_file_is_quoted_cut_short(
    key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was one error line of about 1,000,100 bytes: the value quoted whole.
    section, field = key.split(".")
    config = tmp_path / "run.yaml"
    config.write_text(f"{section}:\n  {field}: {'x' * 1_000_000}\n", encoding="utf-8")
    assert main(["train", "copy", "--out", str(tmp_path / "out"), "--config", str(config)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and len(error) < 1_000 and f"{field}" in error and "xxx..." in error, error[:300]


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_setting_given_twice_in_one_file_under_its_section_and_dotted_is_refused(
    suffix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: trained 5 steps, the 3 dropped without a word (YAML's own duplicate-key check sees two different keys).
    config = tmp_path / f"run{suffix}"
    text = (
        '{"train": {"max_steps": 3}, "train.max_steps": 5}'
        if suffix == ".json"
        else "train:\n  max_steps: 3\ntrain.max_steps: 5\n"
    )
    config.write_text(text, encoding="utf-8")
    assert main(["train", "copy", "--out", str(tmp_path / "out"), "--config", str(config)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"transformer-lab train: error: --config {config}: train.max_steps: expected each setting once in a file, "
        "got it twice (under its section and as a dotted key); keep one"
    )
    assert not (tmp_path / "out").exists()


def test_a_config_from_a_pipe_is_read_as_a_file_is(tmp_path: Path) -> None:
    # `--config <(printf ...)` or /dev/stdin: was "expected an existing YAML file, got '/dev/fd/63'".
    fifo = tmp_path / "run.yaml"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_text, args=("train:\n  max_steps: 2\n",), kwargs={"encoding": "utf-8"})
    writer.start()
    try:
        settings = config_file_settings(fifo)
    finally:
        writer.join(timeout=30)
    assert [(setting.key, setting.value) for setting in settings] == [("train", {"max_steps": 2})]


def test_prepare_draws_no_progress_bar_into_a_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Without --no-progress, stderr sent to a file got the bar's "\r" updates; training's bar shows on a terminal only.
    pairs = [("Ein Hund läuft.", "A dog runs."), ("Zwei Katzen schlafen.", "Two cats sleep.")] * 6
    for name, side in (("train.de", 0), ("train.en", 1)):
        (tmp_path / name).write_text("".join(pair[side] + "\n" for pair in pairs), encoding="utf-8")
    files = ["--train", str(tmp_path / "train.de"), str(tmp_path / "train.en"), "--out", str(tmp_path / "out")]
    assert main(["prepare", "translation", *files, "--set", "data.vocab_size=300"]) == 0
    error = capsys.readouterr().err
    assert "\r" not in error and "preparing:" not in error, error


def test_a_file_that_declares_yaml_1_1_is_refused_not_read_as_1_2(tmp_path: Path) -> None:
    # Was: read as YAML 1.2 without a word, so the file's max_steps 010 (8 in YAML 1.1) trained 10 steps.
    path = tmp_path / "run.yaml"
    path.write_text("%YAML 1.1\n---\ntrain:\n  max_steps: 010\n", encoding="utf-8")
    with pytest.raises(ValueError) as error:
        resolved_config(synthetic_train.default_config(), argparse.Namespace(config=[path], overrides=[]))
    assert str(error.value) == (
        f"{path}: line 1: expected YAML 1.2 (how this file is read: 010 is 10, yes is a string), got a %YAML 1.1 "
        "directive; remove it, and write the values as YAML 1.2 reads them"
    )
    path.write_text("%YAML 1.2\n---\ntrain:\n  max_steps: 010\n", encoding="utf-8")
    config = resolved_config(synthetic_train.default_config(), argparse.Namespace(config=[path], overrides=[]))[0]
    assert config.train.max_steps == 10
