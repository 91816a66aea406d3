"""Sentence pairs from the user's files: two line files, TSV and JSON Lines, each strict."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from transformer_lab.cli import main
from transformer_lab.data.pair_files import is_tsv_header, pair_file_format, read_pair_files
from transformer_lab.data.pair_stream import PairFiles, count_pairs

PAIRS = [("Ein Hund.", "A dog."), ("Zwei  Katzen ", "Two cats"), ("Straße", "street")]


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


def test_the_three_forms_give_the_same_pairs(tmp_path: Path) -> None:
    source = write(tmp_path / "corpus.de", "".join(f"{de}\n" for de, _ in PAIRS))
    target = write(tmp_path / "corpus.en", "".join(f"{en}\n" for _, en in PAIRS))
    tsv = write(tmp_path / "pairs.tsv", "".join(f"{de}\t{en}\n" for de, en in PAIRS))
    flat = write(tmp_path / "flat.jsonl", "".join(json.dumps({"de": de, "en": en, "id": 1}) + "\n" for de, en in PAIRS))
    nested = write(
        tmp_path / "hf.json",
        "".join(json.dumps({"translation": {"de": de, "en": en}}, ensure_ascii=False) + "\n" for de, en in PAIRS),
    )
    for paths in ([source, target], [tsv], [flat], [nested]):
        assert read_pair_files(paths, "de", "en").pairs == PAIRS, paths
    # The languages pick the JSON keys, so the reverse direction is the same file.
    assert read_pair_files([flat], "en", "de").pairs == [(en, de) for de, en in PAIRS]


def test_a_tsv_header_naming_the_languages_is_skipped_and_counted(tmp_path: Path) -> None:
    tsv = write(tmp_path / "pairs.tsv", "de\ten\r\n" + "".join(f"{de}\t{en}\r\n" for de, en in PAIRS))
    text = read_pair_files([tsv], "de", "en")
    assert text.pairs == PAIRS and text.header_lines == 1
    # Two other language codes are the header of another pair: refused (the test below), not read as a pair.
    with pytest.raises(ValueError, match="the header of another language pair"):
        read_pair_files([tsv], "fr", "en")


def test_files_that_name_the_languages_the_other_way_round_are_refused_not_trained_backwards(tmp_path: Path) -> None:
    reversed_tsv = write(tmp_path / "rev.tsv", "en\tde\n" + "".join(f"{en}\t{de}\n" for de, en in PAIRS))
    german = write(tmp_path / "train.de", "".join(f"{de}\n" for de, _ in PAIRS))
    english = write(tmp_path / "train.en", "".join(f"{en}\n" for _, en in PAIRS))
    header = r"rev\.tsv: line 1: expected the columns de<TAB>en .*got the header 'en\\tde'.*--source-language en"
    with pytest.raises(ValueError, match=header):
        read_pair_files([reversed_tsv], "de", "en")
    with pytest.raises(ValueError, match=header):
        count_pairs(PairFiles.of([reversed_tsv], "de", "en"))
    order = r"--train: expected the de file first \(the source, de -> en\), got '.*train\.en' then '.*train\.de'"
    with pytest.raises(ValueError, match=order):
        read_pair_files([english, german], "de", "en", name="--train")
    with pytest.raises(ValueError, match=order):
        PairFiles.of([english, german], "de", "en", name="--train")
    # The same files in the direction they name are read, the header skipped.
    assert read_pair_files([reversed_tsv], "en", "de").pairs == [(en, de) for de, en in PAIRS]
    assert read_pair_files([english, german], "en", "de").pairs == [(en, de) for de, en in PAIRS]
    assert count_pairs(PairFiles.of([reversed_tsv], "en", "de")) == len(PAIRS)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("p.tsv", "a\tb\nc\td\te\n", r"p\.tsv: line 2: expected 2 tab-separated fields \(source<TAB>target\), got 3"),
        ("p.tsv", "a\tb\nno tab here\n", r"p\.tsv: line 2: expected 2 tab-separated fields .*got 1"),
        ("p.tsv", "a\tb\n \tb\n", r"p\.tsv: line 2: expected a non-empty source sentence, got ' '"),
        ("p.tsv", "a\t\n", r"p\.tsv: line 1: expected a non-empty target sentence"),
        ("p.tsv", "", r"p\.tsv: expected at least one pair, got an empty file"),
        ("p.tsv", "de\ten\n", r"p\.tsv: expected at least one pair after the header, got none"),
        (
            "p.jsonl",
            '{"de": "a", "en": "b"}\n{"de": "a", "en": \n',
            r"p\.jsonl: line 2: expected one JSON object, got invalid JSON",
        ),
        ("p.jsonl", '["a", "b"]\n', r"p\.jsonl: line 1: expected a JSON object, got list"),
        (
            "p.jsonl",
            '{"de": "a", "fr": "b"}\n',
            r"p\.jsonl: line 1: expected the key 'en' \(the target language\), got the keys \['de', 'fr'\]",
        ),
        ("p.jsonl", '{"de": "a", "en": 3}\n', r"p\.jsonl: line 1: expected a string under 'en', got int"),
        ("p.jsonl", '{"de": "a", "en": "b"}\n\n', r"p\.jsonl: line 2: expected one JSON object, got invalid JSON"),
        (
            "p.jsonl",
            '{"translation": {"de": "", "en": "b"}}\n',
            r"p\.jsonl: line 1: expected a non-empty source sentence",
        ),
        # json.loads keeps the last of a repeated key, so these lines were read as ("a", "c") and ("x", "b").
        (
            "p.jsonl",
            '{"de": "a", "en": "b"}\n{"de": "a", "en": "b", "en": "c"}\n',
            r"p\.jsonl: line 2: key 'en' appears twice$",
        ),
        (
            "p.jsonl",
            '{"translation": {"de": "a", "en": "b", "de": "x"}}\n',
            r"p\.jsonl: line 1: key 'de' appears twice$",
        ),
        # Half an escaped pair has no UTF-8 form: it was a bare codec error while the corpus was written.
        (
            "p.jsonl",
            '{"de": "a", "en": "b"}\n{"de": "hu\\ud800nd", "en": "b"}\n',
            r"p\.jsonl: line 2: expected valid Unicode text in the source sentence, got the lone surrogate U\+D800 "
            r"at character 2",
        ),
    ],
)
def test_a_malformed_line_is_one_error_naming_file_and_line(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    path = write(tmp_path / name, content)
    with pytest.raises(ValueError, match=message):
        read_pair_files([path], "de", "en")


def test_invalid_utf8_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "p.tsv"
    path.write_bytes(b"a\tb\nc\t\xff\n")
    with pytest.raises(ValueError, match=r"p\.tsv: line 2: expected UTF-8 text"):
        read_pair_files([path], "de", "en")


def test_misaligned_line_files_are_an_error(tmp_path: Path) -> None:
    source = write(tmp_path / "a.de", "a\nb\n")
    target = write(tmp_path / "a.en", "a\n")
    with pytest.raises(
        ValueError, match=r"expected aligned files with the same number of lines, got 2 line\(s\) in .*a\.de and 1"
    ):
        read_pair_files([source, target], "de", "en")


def test_blank_lines_at_the_end_of_the_longer_file_are_said_to_be_where_it_runs_past(tmp_path: Path) -> None:
    """(Was: only the two counts, "62 line(s) in b.de and 60", which read as a misalignment inside.)"""
    target = write(tmp_path / "a.en", "".join(f"sentence {number}\n" for number in range(60)))
    source = write(tmp_path / "b.de", "".join(f"Satz {number}\n" for number in range(60)) + "\n \r\n")
    said = r"got 62 line\(s\) in .*b\.de and 60 line\(s\) in .*a\.en; the last 2 line\(s\) of .*b\.de are blank: remove"
    with pytest.raises(ValueError, match=said):
        read_pair_files([source, target], "de", "en")  # read whole
    with pytest.raises(ValueError, match=said):
        count_pairs(PairFiles.of([source, target], "de", "en"))  # counted before a corpus is prepared
    # Shorter by lines of text: the counts alone, nothing said of blank lines.
    short = write(tmp_path / "c.de", "".join(f"Satz {number}\n" for number in range(50)))
    with pytest.raises(ValueError, match=r"got 50 line\(s\) in .*c\.de and 60 line\(s\) in .*a\.en$"):
        read_pair_files([short, target], "de", "en")


def test_the_form_comes_from_the_files_or_is_refused_clearly(tmp_path: Path) -> None:
    assert pair_file_format(["a.de", "a.en"]) == "lines"
    assert pair_file_format(["a.TSV"]) == "tsv"
    assert pair_file_format(["a.json"]) == "jsonl"
    assert pair_file_format(["a.txt"], "tsv") == "tsv"
    with pytest.raises(ValueError, match=r"--train: cannot tell the form of 'a\.txt' from its suffix"):
        pair_file_format(["a.txt"], name="--train")
    with pytest.raises(ValueError, match=r"--train: expected two aligned line files .* got 3 paths"):
        pair_file_format(["a", "b", "c"], name="--train")
    with pytest.raises(
        ValueError, match=r"^--valid: expected one file for the format 'tsv', got 2 paths \('a', 'b'\)$"
    ):
        pair_file_format(["a", "b"], "tsv", name="--valid")
    # "lines" reads a source file and a target file: one path is refused, not unpacked later.
    with pytest.raises(
        ValueError, match=r"^--train: expected two files \(source then target\) for the format 'lines', got 1 path"
    ):
        pair_file_format(["a.de"], "lines", name="--train")
    with pytest.raises(
        ValueError, match=r"^file_format: expected one of lines, tsv, jsonl or '' \(from the number of files"
    ):
        pair_file_format(["a.tsv"], "csv")
    with pytest.raises(ValueError, match=r"expected a list of one or two paths, got the single path 'a\.tsv'"):
        pair_file_format("a.tsv")
    with pytest.raises(FileNotFoundError, match=r"absent\.tsv"):
        read_pair_files([tmp_path / "absent.tsv"], "de", "en")


@pytest.mark.parametrize("suffix", [".tsv", ".jsonl", ".json", ".csv"])
def test_two_files_with_a_table_suffix_are_refused_not_read_as_line_files(tmp_path: Path, suffix: str) -> None:
    # Read as line files, each whole row (or JSON text) was both the source and the target.
    table = write(tmp_path / f"pairs{suffix}", "".join(json.dumps({"de": de, "en": en}) + "\n" for de, en in PAIRS))
    german = write(tmp_path / "train.de", "".join(f"{de}\n" for de, _ in PAIRS))
    message = (
        rf"^--train: expected two aligned line files \(source then target, one sentence per line\), "
        rf"got '.*pairs{suffix}' and '.*{{second}}', and {suffix} is the suffix of a one-file format; "
        r"give one \.tsv or \.jsonl file alone \(a pair per line\), or set data\.file_format=lines if these are "
        r"line files$"
    )
    for second in (table, german):
        with pytest.raises(ValueError, match=message.replace("{second}", second.name.replace(".", r"\."))):
            read_pair_files([table, second], "de", "en", name="--train")
        with pytest.raises(ValueError, match=r"^--train: expected two aligned line files"):
            PairFiles.of([table, second], "de", "en", name="--train")
    with pytest.raises(ValueError, match=rf"got '.*train\.de' and '.*pairs{suffix}', and {suffix} is the suffix"):
        pair_file_format([german, table], name="--train")
    # Said to be line files, they are read as such.
    other = write(tmp_path / f"other{suffix}", "x\n" * len(PAIRS))
    assert pair_file_format([table, other], "lines") == "lines"


@pytest.mark.parametrize("command", ["train", "prepare"])
@pytest.mark.parametrize("task", ["translation", "couplet"])
def test_the_command_refuses_two_table_files_in_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, task: str
) -> None:
    rows = "".join(json.dumps({"de": de, "en": en, "upper": de, "lower": en}) + "\n" for de, en in PAIRS * 4)
    first, second = write(tmp_path / "a.jsonl", rows), write(tmp_path / "b.jsonl", rows)
    out = tmp_path / "out"
    assert main([command, task, "--train", str(first), str(second), "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and error.startswith(
        f"transformer-lab {command}: error: --train: data.train_files: expected two aligned line files"
    ), error
    assert "a.jsonl' and '" in error and "b.jsonl', and .jsonl is the suffix of a one-file format" in error
    assert not out.exists()


def test_the_same_file_for_both_sides_is_refused(tmp_path: Path) -> None:
    german = write(tmp_path / "train.de", "".join(f"{de}\n" for de, _ in PAIRS))
    link = tmp_path / "link.txt"
    link.symlink_to(german)
    (tmp_path / "sub").mkdir()
    for second in (german, link, tmp_path / "sub" / ".." / "train.de"):
        with pytest.raises(
            ValueError,
            match=r"^--train: expected two different files \(source then target\), got the same file twice "
            r"\('.*train\.de' and '.*(train\.de|link\.txt)'\)$",
        ):
            PairFiles.of([german, second], "de", "en", name="--train")
    with pytest.raises(ValueError, match=r"^upper: expected two different files \(upper then lower\)"):
        pair_file_format([german, german], "lines", name="upper", sides=("upper", "lower"))


def test_a_line_file_whose_suffix_names_the_other_sides_language_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    german = write(tmp_path / "a" / "train.de", "".join(f"{de}\n" for de, _ in PAIRS))
    other_german = write(tmp_path / "b" / "train.DE", "".join(f"{de}\n" for de, _ in PAIRS))
    english = write(tmp_path / "a" / "train.en", "".join(f"{en}\n" for _, en in PAIRS))
    other_english = write(tmp_path / "b" / "train.en", "".join(f"{en}\n" for _, en in PAIRS))
    with pytest.raises(
        ValueError,
        match=r"^--train: expected the en file second \(the target, de -> en\), got '.*train\.DE', whose suffix "
        r"names the source language de; give the en file as the target, or pass --source-language and "
        r"--target-language for the languages the files hold$",
    ):
        read_pair_files([german, other_german], "de", "en", name="--train")
    with pytest.raises(
        ValueError,
        match=r"^--valid: expected the de file first \(the source, de -> en\), got '.*b/train\.en', whose suffix "
        r"names the target language en",
    ):
        PairFiles.of([other_english, english], "de", "en", name="--valid")
    # Files that name their languages the right way, or name none, are read.
    assert read_pair_files([german, other_english], "de", "en").pairs == PAIRS
    assert (
        read_pair_files(
            [german, write(tmp_path / "b" / "train.txt", "".join(f"{en}\n" for _, en in PAIRS))], "de", "en"
        ).pairs
        == PAIRS
    )


@pytest.mark.parametrize("header", ["DE\tEN", "de\ten ", " De \t eN\r", "source\ttarget", "SOURCE\tTarget"])
def test_a_tsv_header_is_known_whatever_its_case_and_spaces(tmp_path: Path, header: str) -> None:
    tsv = write(tmp_path / "pairs.tsv", f"{header}\n" + "".join(f"{de}\t{en}\n" for de, en in PAIRS))
    text = read_pair_files([tsv], "de", "en")
    assert text.pairs == PAIRS and text.header_lines == 1
    assert count_pairs(PairFiles.of([tsv], "de", "en")) == len(PAIRS)


@pytest.mark.parametrize("header", ["EN\tDE", "en \tde", "Target\tSource"])
def test_a_tsv_header_the_other_way_round_is_refused_whatever_its_case(tmp_path: Path, header: str) -> None:
    tsv = write(tmp_path / "pairs.tsv", f"{header}\n" + "".join(f"{en}\t{de}\n" for de, en in PAIRS))
    message = r"pairs\.tsv: line 1: expected the columns de<TAB>en .*got the header " + re.escape(repr(header))
    with pytest.raises(ValueError, match=message):
        read_pair_files([tsv], "de", "en")
    with pytest.raises(ValueError, match=message):
        count_pairs(PairFiles.of([tsv], "de", "en"))


def test_a_first_line_of_two_other_words_is_a_pair_not_a_header(tmp_path: Path) -> None:
    tsv = write(tmp_path / "pairs.tsv", "Quelle\tsource\nsrc\ttgt\n")
    assert read_pair_files([tsv], "de", "en").pairs == [("Quelle", "source"), ("src", "tgt")]


@pytest.mark.parametrize(
    "task, train, valid",
    [
        ("translation", ["t.de", "t.en"], ["./t.de", "v.en"]),
        ("translation", ["t.de", "t.en"], ["v.de", "link.en"]),  # another name for t.en
        ("classification", ["c.csv"], ["c.csv"]),
    ],
)
@pytest.mark.parametrize("command", ["train", "prepare"])
def test_a_validation_file_that_is_a_training_file_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    task: str,
    train: list[str],
    valid: list[str],
    command: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("t.de", "t.en", "v.de", "v.en"):
        (tmp_path / name).write_text("Ein Hund läuft.\nZwei Katzen.\n", encoding="utf-8")
    (tmp_path / "c.csv").write_text("text,label\nrain,weather\nsun,weather\ngoal,sport\n", encoding="utf-8")
    (tmp_path / "link.en").symlink_to(tmp_path / "t.en")
    out = tmp_path / "out"
    assert main([command, task, "--train", *train, "--valid", *valid, "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    # Was: trained (or prepared), validating on training text: best/ rewarded memorising.
    assert len(error.splitlines()) == 1 and "--valid: expected files held out from --train's" in error, error
    assert not out.exists()


@pytest.mark.parametrize(
    ("task", "train", "valid", "extra", "message"),
    [
        (
            "translation",
            ["t.de", "t.en"],
            ["v.de", "v.en"],
            ["--set", "data.num_carved_validation=7"],
            "data.num_carved_validation: expected it only without --valid (how many training pairs to hold out for "
            "validation, unused with --valid), got 7 (--set)",
        ),
        (
            "translation",
            ["t.de", "t.en"],
            [],
            ["--data-dir", "elsewhere"],
            "data.data_dir: expected it only without --train (the folder of Multi30k, unused with --train), "
            "got --data-dir 'elsewhere'",
        ),
        (
            # Was: trained on --train's file, and config.json recorded train_file t2.csv.
            "classification",
            ["c.csv"],
            [],
            ["--set", "data.train_file=t2.csv"],
            "data.train_file: expected it only without --train (which of AG News's files to train on, unused with "
            "--train), got 't2.csv' (--set)",
        ),
        (
            "classification",
            ["c.csv"],
            ["w.csv"],
            ["--set", "data.validation_fraction=0.5"],
            "data.validation_fraction: expected it only without --valid (the share of the training rows to hold "
            "out for validation, unused with --valid), got 0.5 (--set)",
        ),
        (
            "couplet",
            ["t.de", "t.en"],
            ["v.de", "v.en"],
            ["--config", "run.yaml"],
            "data.num_validation: expected it only without --valid (how many training couplets to hold out for "
            "validation, unused with --valid), got 5 (--config run.yaml)",
        ),
        (
            "couplet",
            ["t.de", "t.en"],
            [],
            ["--set", "data.train_split=train"],
            "data.train_split: expected it only without --train (the split of the data folder trained on, "
            "unused with --train), got 'train' (--set)",
        ),
    ],
)
@pytest.mark.parametrize("command", ["train", "prepare"])
def test_a_setting_the_users_files_leave_unused_is_refused_not_recorded(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    task: str,
    train: list[str],
    valid: list[str],
    extra: list[str],
    message: str,
) -> None:
    # Given beside the files, each was ignored by the run and written into its config.json as if used.
    monkeypatch.chdir(tmp_path)
    for name in ("t.de", "v.de"):
        write(tmp_path / name, "".join(f"{de}\n" for de, _ in PAIRS * 5))
    for name in ("t.en", "v.en"):
        write(tmp_path / name, "".join(f"{en}\n" for _, en in PAIRS * 5))
    for name in ("c.csv", "w.csv"):
        write(tmp_path / name, "label,text\n" + "".join(f"{en},{de}\n" for de, en in PAIRS * 5))
    write(tmp_path / "run.yaml", "data:\n  num_validation: 5\n")
    files = ["--train", *train, *(["--valid", *valid] if valid else [])]
    assert main([command, task, *files, *extra, "--out", "out"]) == 2
    assert capsys.readouterr().err.strip() == f"transformer-lab {command}: error: {message}"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["train", "prepare"])
def test_the_file_checks_name_the_files_by_key_where_they_came_by_set_or_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    # It was "--valid: expected files held out from --train's ..." and "... only without --valid ...", options
    # the user never typed.
    monkeypatch.chdir(tmp_path)
    for name, side in (("t.de", 0), ("t.en", 1), ("v.de", 0), ("v.en", 1)):
        write(tmp_path / name, "".join(f"{pair[side]}\n" for pair in PAIRS * 5))
    write(tmp_path / "run.yaml", "data:\n  train_files: [t.de, t.en]\n  valid_files: [t.de, v.en]\n")
    assert main([command, "translation", "--config", "run.yaml", "--out", "out"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"transformer-lab {command}: error: data.valid_files: expected files held out from data.train_files's "
        "(validation on training text measures nothing held out), got 't.de', which is data.train_files's 't.de'"
    )
    files = ["--set", "data.train_files=t.de,t.en", "--set", "data.valid_files=v.de,v.en"]
    assert main([command, "translation", *files, "--set", "data.num_carved_validation=7", "--out", "out"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"transformer-lab {command}: error: data.num_carved_validation: expected it only without data.valid_files "
        "(how many training pairs to hold out for validation, unused with data.valid_files), got 7 (--set)"
    )
    # Validation files by --valid beside training files by --set are named by the option that gave them.
    files = ["--set", "data.train_files=t.de,t.en", "--valid", "v.de", "v.en"]
    assert main([command, "translation", *files, "--set", "data.num_carved_validation=7", "--out", "out"]) == 2
    assert "expected it only without --valid (how many" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_printed_preset_fed_back_with_validation_files_is_no_setting_of_the_carve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `config translation` lists num_carved_validation at the preset's value: that is no choice to refuse.
    monkeypatch.chdir(tmp_path)
    for name, side in (("t.de", 0), ("t.en", 1), ("v.de", 0), ("v.en", 1)):
        write(tmp_path / name, "".join(f"{pair[side]}\n" for pair in PAIRS * 5))
    assert main(["config", "translation"]) == 0
    write(tmp_path / "run.yaml", capsys.readouterr().out)
    files = ["--train", "t.de", "t.en", "--valid", "v.de", "v.en"]
    settings = ["--set", "data.vocab_size=300", "--set", "data.min_frequency=1"]
    assert main(["prepare", "translation", *files, "--config", "run.yaml", *settings, "--out", "out"]) == 0
    assert (tmp_path / "out" / "manifest.json").is_file()


# The training files by each channel, and how the validation files are then named: as the user works.
TRAINING_FILES_GIVEN = {
    "--train": (["--train", "t.de", "t.en"], "--valid"),
    "--set": (["--set", "data.train_files=t.de,t.en"], "data.valid_files"),
    "--config": (["--config", "run.yaml"], "data.valid_files"),
}


def write_training_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, copies: int) -> None:
    """t.de and t.en (``copies`` times PAIRS) and run.yaml naming them, in ``tmp_path``, the working folder."""
    monkeypatch.chdir(tmp_path)
    for name, side in (("t.de", 0), ("t.en", 1)):
        write(tmp_path / name, "".join(f"{pair[side]}\n" for pair in PAIRS * copies))
    write(tmp_path / "run.yaml", "data:\n  train_files: [t.de, t.en]\n")


@pytest.mark.parametrize("channel", sorted(TRAINING_FILES_GIVEN))
@pytest.mark.parametrize("command", ["train", "prepare"])
def test_a_carve_of_no_pairs_is_refused_naming_the_setting_not_the_number_of_pairs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str, channel: str
) -> None:
    # It was "--valid: expected validation files, or at least 10 training pairs ..., got 15 training pair(s)".
    write_training_files(tmp_path, monkeypatch, copies=5)
    files, valid = TRAINING_FILES_GIVEN[channel]
    carve = ["--set", "data.num_carved_validation=0"]
    assert main([command, "translation", *files, *carve, "--out", "out"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"transformer-lab {command}: error: data.num_carved_validation: expected at least 1 without {valid} (how many "
        f"training pairs to hold out for validation), got 0; give validation files ({valid}) to hold none out"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("channel", sorted(TRAINING_FILES_GIVEN))
@pytest.mark.parametrize("command", ["train", "prepare"])
def test_too_few_pairs_to_carve_name_the_validation_files_as_the_training_files_were_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str, channel: str
) -> None:
    # It was "--valid: ..." and "... and no --valid" whichever way the training files came (--set, --config).
    write_training_files(tmp_path, monkeypatch, copies=2)
    files, valid = TRAINING_FILES_GIVEN[channel]
    assert main([command, "translation", *files, "--set", "data.vocab_size=300", "--out", "out"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"transformer-lab {command}: error: {valid}: expected validation files, or at least 10 training pairs to "
        f"carve validation from, got 6 training pair(s) and no {valid}"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("task", "files"),
    [("translation", ["t.de", "t.en"]), ("classification", ["c.csv"]), ("couplet", ["u.txt", "l.txt"])],
)
def test_a_batch_budget_below_the_longest_example_is_refused_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], task: str, files: list[str]
) -> None:
    # It was "lengths[0] is [8, 10], longer than max_tokens=4 (...); raise max_tokens or filter long examples".
    monkeypatch.chdir(tmp_path)
    pairs = [(f"{de} {number}", f"{en} {number}") for number in range(12) for de, en in PAIRS]
    write(tmp_path / "t.de", "".join(f"{de}\n" for de, _ in pairs))
    write(tmp_path / "t.en", "".join(f"{en}\n" for _, en in pairs))
    write(tmp_path / "c.csv", "label,text\n" + "".join(f"{en.split()[0]},{de}\n" for de, en in pairs))
    upper, lower = "春风得意明月照人", "秋雨连绵清风拂面"
    lines = [(upper[start:] + upper[:start], lower[start:] + lower[:start]) for start in range(8)]
    write(tmp_path / "u.txt", "".join(f"{up}\n" for up, _ in lines))
    write(tmp_path / "l.txt", "".join(f"{low}\n" for _, low in lines))
    settings = ["--set", "data.max_tokens=4", "--set", "train.max_steps=1", "--set", "train.progress_bar=false"]
    settings += ["--set", "data.num_validation=2"] if task == "couplet" else ["--set", "data.min_frequency=1"]
    assert main(["train", task, "--train", *files, *settings, "--out", "out"]) == 2
    error = capsys.readouterr().err.strip()
    assert re.fullmatch(
        r"transformer-lab train: error: data\.max_tokens: expected at least \d+, the padded tokens of the longest "
        r"training example \(\d+ of the \d+ are longer than 4\), got 4; raise it",
        error,
    ), error
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("task", "setting", "message"),
    [
        (
            "translation",
            "data.num_carved_validation=5",
            "data.num_carved_validation: expected it only with --train (how many pairs of the training files to hold "
            "out for validation; the task's own dataset is read as it is), got 5 (--set) without training files",
        ),
        (
            "translation",
            "data.file_format=jsonl",
            "data.file_format: expected it only with --train (the format of the training files; the task's own "
            "dataset is read as it is), got 'jsonl' (--set) without training files",
        ),
        ("classification", "data.text_fields=zzz", "data.text_fields: expected it only with --train (the training "),
        ("classification", "data.label_field=stars", "data.label_field: expected it only with --train (the training "),
        ("couplet", "data.file_format=tsv", "data.file_format: expected it only with --train (the format of the "),
    ],
)
@pytest.mark.parametrize("command", ["train", "prepare"])
def test_a_setting_of_the_users_files_given_without_them_is_refused_not_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, task: str, setting: str, message: str
) -> None:
    # Was: the task's own dataset trained on as it is (text_fields=zzz named no column of AG News),
    # and config.json recording the setting as if it had been used.
    out = tmp_path / "out"
    assert main([command, task, "--data-dir", str(tmp_path / "data"), "--set", setting, "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"transformer-lab {command}: error: {message}"), error
    assert len(error.splitlines()) == 1 and not out.exists()


def test_a_tsv_header_of_another_language_pair_is_refused_not_trained_as_a_pair(tmp_path: Path) -> None:
    # Was: with --source-language fr, the header de<TAB>en read as the first sentence pair.
    path = write(tmp_path / "pairs.tsv", "de\ten\nEin Hund.\tA dog.\nZwei Katzen.\tTwo cats.\n")
    with pytest.raises(ValueError) as error:
        read_pair_files([str(path)], source_language="fr", target_language="en")
    assert str(error.value) == (
        f"{path}: line 1: expected the header fr<TAB>en or a sentence pair, got 'de\\ten', the header of another "
        "language pair; pass --source-language de --target-language en, or correct the header"
    )
    assert is_tsv_header("de\ten", "de", "en", path) and is_tsv_header("pt-BR\ten", "pt-BR", "en", path)
    # Sentences stay sentences: a capital, a third letter, a space.
    for line in ("Ja\tYes", "ja\tyes", "ja ja\tja"):
        assert not is_tsv_header(line, "fr", "en", path)
