"""The AG News reader on tricky rows written here, and on the real files where present."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from transformer_lab.data.ag_news import (
    AG_NEWS_CLASSES,
    CLASSES_FILE,
    ag_news_path,
    join_title_and_description,
    read_ag_news_csv,
    read_classes_file,
    resolve_ag_news_dir,
    split_csv_line,
    unescape_field,
)

DATA_DIR = Path(os.environ.get("TRANSFORMER_LAB_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")
needs_data = pytest.mark.skipif(
    not (DATA_DIR / "ag_news" / "test.csv").is_file(),
    reason=f"the AG News files are not in {DATA_DIR} (the team's shared data folder; or set TRANSFORMER_LAB_DATA)",
)


def write(tmp_path: Path, text: str, name: str = "rows.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


# Rows in the release's own serialisation, each with what it must read as.
TRICKY = [
    ('"3","Plain title","Plain description."', (2, "Plain title", "Plain description.")),
    ('"1","Commas, inside","a, b, and c"', (0, "Commas, inside", "a, b, and c")),
    ('"2","Say ""hi""","He said ""no, never"" twice"', (1, 'Say "hi"', 'He said "no, never" twice')),
    ('"4","""Quoted"" first","ends with a quote"""', (3, '"Quoted" first', 'ends with a quote"')),
    # A backslash is a line break; the letter after it is the next word's ("network").
    ('"4","t","social\\network and\\no indication"', (3, "t", "social\nnetwork and\nno indication")),
    ('"3","t","over \\$1 billion, down \\$2"', (2, "t", "over $1 billion, down $2")),
    ('"4","t","Filters\\\\FOAF and more.\\\\""Quote"" here"', (3, "t", 'Filters\nFOAF and more.\n"Quote" here')),
    ('"1","",""', (0, "", "")),
    ('2,minimal quoting,"still, fine"', (1, "minimal quoting", "still, fine")),
]


def test_tricky_rows_read_as_the_release_means_them(tmp_path: Path) -> None:
    path = write(tmp_path, "".join(line + "\n" for line, _ in TRICKY))
    articles = read_ag_news_csv(path).articles
    assert [(a.label, a.title, a.description) for a in articles] == [expected for _, expected in TRICKY]
    assert [a.line_number for a in articles] == list(range(1, len(TRICKY) + 1))
    assert (
        articles[0].text
        == "Plain title\nPlain description."
        == join_title_and_description("Plain title", "Plain description.")
    )


def test_unescape_false_keeps_the_fields_byte_for_byte(tmp_path: Path) -> None:
    path = write(tmp_path, '"4","a\\b","over \\$1\\\\x"\n')
    article = read_ag_news_csv(path, unescape=False).articles[0]
    assert (article.title, article.description) == ("a\\b", "over \\$1\\\\x")
    assert unescape_field(article.description) == "over $1\nx"


def test_crlf_bom_and_a_missing_final_newline_are_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, '\ufeff"1","a","b"\r\n"2","c","d"')
    assert [(a.label, a.title, a.description) for a in read_ag_news_csv(path).articles] == [
        (0, "a", "b"),
        (1, "c", "d"),
    ]


BAD_ROWS = [
    ('"3","only two fields"', "expected 3 fields .* got 2"),
    ('"3","a","b","c"', "expected 3 fields .* got 4"),
    ("", "expected 3 fields .* got 1 in an empty line"),
    ('"5","a","b"', "expected a class id in 1, 2, 3, 4, got '5'"),
    ('"0","a","b"', "expected a class id .* got '0'"),
    ('"World","a","b"', "expected a class id .* got 'World'"),
    ('"3","never closed,"b"', "bad quoting at column 20: expected ',' or the end .* got 'b'"),
    ('"3","a","unterminated', "bad quoting at column 9: a quoted field that is never closed"),
    ('"3",a"b,"c"', "bad quoting at column 6: a '\"' inside an unquoted field"),
    ('"3","a" ,"b"', "bad quoting at column 8: expected ',' or the end of the line after a closing quote, got ' '"),
]


@pytest.mark.parametrize(("line", "message"), BAD_ROWS)
def test_a_malformed_row_is_an_error_naming_the_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path, f'"1","good","row"\n{line}\n"2","good","row"\n', name="news.csv")
    with pytest.raises(ValueError, match=rf"news\.csv: line 2: {message}"):
        read_ag_news_csv(path)


def test_skip_mode_skips_counts_and_reports_every_bad_row(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    lines = ['"1","a","b"'] + [line for line, _ in BAD_ROWS] + ['"4","c","d"']
    path = write(tmp_path, "".join(line + "\n" for line in lines))
    read = read_ag_news_csv(path, skip_malformed=True)
    assert [(a.label, a.line_number) for a in read.articles] == [(0, 1), (3, len(lines))]
    assert read.num_skipped == len(BAD_ROWS)
    assert [number for number, _ in read.malformed] == list(range(2, 2 + len(BAD_ROWS)))
    assert "class id" in read.malformed[3][1]
    assert f"skipped {len(BAD_ROWS)} malformed line(s)" in caplog.text


def test_a_file_without_any_article_or_missing_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="expected at least one article, got none"):
        read_ag_news_csv(write(tmp_path, '"9","a","b"\n'), skip_malformed=True)
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        read_ag_news_csv(tmp_path / "nope.csv")
    with pytest.raises(ValueError, match="skip_malformed must be a bool"):
        read_ag_news_csv(write(tmp_path, '"1","a","b"\n'), skip_malformed="yes")  # type: ignore[arg-type]


def test_split_csv_line_is_the_inverse_of_full_quoting() -> None:
    fields = ['x "y" z', "", ",", '""', "a\\nb"]
    line = ",".join('"' + field.replace('"', '""') + '"' for field in fields)
    assert split_csv_line(line) == fields


def test_files_are_found_in_the_data_root_or_the_folder_itself(tmp_path: Path) -> None:
    folder = tmp_path / "ag_news"
    (folder / "train_subset").mkdir(parents=True)
    write(folder, '"1","a","b"\n', name="test.csv")
    write(folder / "train_subset", '"1","a","b"\n', name="train_subset_12k.csv")
    assert ag_news_path("test", tmp_path) == folder / "test.csv"
    assert ag_news_path("train", folder) == folder / "train_subset" / "train_subset_12k.csv"
    write(folder, '"1","a","b"\n', name="train.csv")  # the full file wins when present
    assert ag_news_path("train", tmp_path) == folder / "train.csv"
    assert (
        ag_news_path("train", tmp_path, train_file="train_subset/train_subset_12k.csv").name == "train_subset_12k.csv"
    )
    with pytest.raises(FileNotFoundError, match="other.csv"):
        ag_news_path("train", tmp_path, train_file="other.csv")
    with pytest.raises(ValueError, match="split must be one of"):
        ag_news_path("validation", tmp_path)
    # No classes.txt: the release's names.
    assert read_classes_file(resolve_ag_news_dir(tmp_path) / CLASSES_FILE) == AG_NEWS_CLASSES
    write(folder, "A\nB\nC\n", name="classes.txt")
    with pytest.raises(ValueError, match="classes.txt: expected 4 non-empty class names"):
        read_classes_file(resolve_ag_news_dir(tmp_path) / CLASSES_FILE)


@needs_data
def test_the_real_files_read_completely_with_the_published_counts() -> None:
    test = read_ag_news_csv(ag_news_path("test", DATA_DIR))
    assert hashlib.md5(test.path.read_bytes()).hexdigest() == "d52ea96a97a2d943681189a97654912d"
    assert len(test) == 7600 and test.num_skipped == 0
    assert [sum(a.label == label for a in test.articles) for label in range(4)] == [1900] * 4
    train = read_ag_news_csv(DATA_DIR / "ag_news" / "train_subset" / "train_subset_12k.csv")
    assert [sum(a.label == label for a in train.articles) for label in range(4)] == [2967, 3044, 3027, 2962]
    assert read_classes_file(resolve_ag_news_dir(DATA_DIR) / CLASSES_FILE) == AG_NEWS_CLASSES
    # No escape survives decoding, and no word lost its first letter to a "\n" reading.
    assert not any("\\" in a.title + a.description for a in test.articles)
    assert any("social\nnetwork" in a.description for a in test.articles)
