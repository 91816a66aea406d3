"""The labelled-text reader: CSV, TSV and JSON Lines read the same examples; every malformed case is one clear error."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from transformer_lab.data import (
    LabelledText,
    join_title_and_description,
    labelled_text_format,
    read_labelled_text,
    sorted_class_names,
)

# (title, body, label): string labels, a comma, a quote, a tab-free Chinese text.
ROWS = [
    ("Markets rally", 'Stocks rose, "sharply", on Monday', "business"),
    ("两岸猿声啼不住", "轻舟已过万重山", "诗"),
    ("Goal!", "The striker scored twice", "sports"),
]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def csv_field(value: str) -> str:
    return '"' + value.replace('"', '""') + '"' if any(mark in value for mark in ',"\n') else value


def csv_text(rows: list[tuple[str, str, str]]) -> str:
    lines = ["title,body,label", *(",".join(csv_field(value) for value in row) for row in rows)]
    return "\n".join(lines) + "\n"


def tsv_text(rows: list[tuple[str, str, str]]) -> str:
    return "title\tbody\tlabel\n" + "".join("\t".join(row) + "\n" for row in rows)


def jsonl_text(rows: list[tuple[str, str, str]]) -> str:
    return "".join(
        json.dumps({"title": t, "body": b, "label": label}, ensure_ascii=False) + "\n" for t, b, label in rows
    )


EXPECTED = [
    LabelledText(join_title_and_description(t, b), label, number) for number, (t, b, label) in enumerate(ROWS, 2)
]


@pytest.mark.parametrize(
    ("name", "make", "first_line"),
    [
        ("news.csv", csv_text, 2),
        ("news.tsv", tsv_text, 2),
        ("news.jsonl", jsonl_text, 1),
    ],
)
def test_every_format_reads_the_same_examples_with_their_lines(
    tmp_path: Path, name: str, make, first_line: int
) -> None:
    path = write(tmp_path, name, make(ROWS))
    read = read_labelled_text(path, text_fields=("title", "body"), label_field="label")
    assert read.file_format == name.rsplit(".", 1)[1] and read.path == path and len(read) == 3
    # Several text fields are joined the way AG News joins title and description.
    assert [(r.text, r.label) for r in read.records] == [(e.text, e.label) for e in EXPECTED]
    assert [r.line_number for r in read.records] == [first_line, first_line + 1, first_line + 2]
    only_title = read_labelled_text(path, text_fields=("title",), label_field="label")
    assert [r.text for r in only_title.records] == [row[0] for row in ROWS]


def test_the_format_comes_from_the_suffix_or_is_given(tmp_path: Path) -> None:
    assert [labelled_text_format(f"a.{suffix}") for suffix in ("csv", "TSV", "jsonl")] == ["csv", "tsv", "jsonl"]
    path = write(tmp_path, "rows.txt", tsv_text(ROWS))
    with pytest.raises(ValueError, match=r"rows\.txt: expected a suffix \.csv, \.tsv, \.jsonl .* got '\.txt'"):
        read_labelled_text(path, ("title",))
    assert read_labelled_text(path, ("title",), file_format="tsv").labels == ["business", "诗", "sports"]
    with pytest.raises(ValueError, match="file_format must be one of csv, tsv, jsonl .* got 'xml'"):
        read_labelled_text(path, ("title",), file_format="xml")


def test_csv_quoting_bom_crlf_and_a_field_over_two_lines(tmp_path: Path) -> None:
    text = '\ufefftext,label\r\n"one, two",a\r\n"first line\nsecond line",b\r\nplain,a\r\n'
    read = read_labelled_text(write(tmp_path, "q.csv", text))
    assert [r.text for r in read.records] == ["one, two", "first line\nsecond line", "plain"]
    # The record over lines 3-4 is named by the line it starts on; the next one is line 5.
    assert [r.line_number for r in read.records] == [2, 3, 5]


def test_a_quote_left_open_is_said_where_it_merged_rows_and_a_text_over_lines_is_not(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Line 2 opens a quote that line 4 closes: lines 2-4 are one record of the right width, which
    # the reader cannot refuse, as a text may span lines. Line 3 alone reads as a record with one
    # of the file's labels, so the merge is said; line 6's text over two lines is not.
    text = 'text,label\n"an open quote,sports\nsecond row,business\nthird",sports\nfourth,business\n'
    text += '"a text\non two lines, with a comma",sports\n'
    path = write(tmp_path, "open.csv", text)
    with caplog.at_level("WARNING", logger="transformer_lab.data.labelled_text"):
        records = read_labelled_text(path).records
    assert [record.line_number for record in records] == [2, 5, 6]
    assert [record.getMessage() for record in caplog.records] == [
        f"{path}: line 2: a quoted field runs on over line 3, which reads as a record of its own (label "
        "'business'): a quote left open merges the rows up to the next quote into one record; close it (a quote "
        'inside a text is written twice, ""), or write the file as JSON Lines'
    ]
    caplog.clear()
    with caplog.at_level("WARNING", logger="transformer_lab.data.labelled_text"):
        read_labelled_text(write(tmp_path, "closed.csv", "text,label\n" + text.split("\n", 5)[-1]))
    assert caplog.records == []


def test_tsv_keeps_quotes_as_ordinary_characters(tmp_path: Path) -> None:
    read = read_labelled_text(write(tmp_path, "q.tsv", 'text\tlabel\n"quoted" and, comma\tx\n'))
    assert read.records == [LabelledText('"quoted" and, comma', "x", 2)]


def test_integer_labels_become_strings_and_sort_numerically(tmp_path: Path) -> None:
    lines = [
        {"text": "a", "label": 10},
        {"text": "b", "label": "2"},
        {"text": "c", "label": 2},
        {"text": "d", "label": -1},
    ]
    read = read_labelled_text(write(tmp_path, "n.jsonl", "".join(json.dumps(line) + "\n" for line in lines)))
    assert read.labels == ["10", "2", "2", "-1"]
    assert sorted_class_names(read.labels) == ("-1", "2", "10")  # not the string order "-1", "10", "2"
    assert sorted_class_names(["下联", "上联", "7", "b", "07", "a"]) == ("07", "7", "a", "b", "上联", "下联")
    assert read.label_ids(("-1", "2", "10")) == [2, 1, 1, 0]


def test_an_unseen_label_names_the_file_the_line_and_the_label(tmp_path: Path) -> None:
    read = read_labelled_text(write(tmp_path, "v.csv", "text,label\nx,pos\ny,neutral\n"))
    with pytest.raises(
        ValueError, match=r"v\.csv: line 3: field 'label': .* \('neg', 'pos'\), got the unseen label 'neutral'"
    ):
        read.label_ids(("neg", "pos"))


def test_max_records_reads_only_the_first(tmp_path: Path) -> None:
    read = read_labelled_text(write(tmp_path, "n.tsv", tsv_text(ROWS)), ("body",), max_records=2)
    assert read.labels == ["business", "诗"]


# (a label, the same class spelt another way, how they differ as the error says it)
SPELT_TWO_WAYS = [
    ("sci tech", "sci  tech", "whitespace"),
    ("sci tech", "sci\xa0tech", "whitespace"),
    ("tech", "tech\u200b", r"zero-width or format characters \(U\+200B\)"),
    ("caf\u00e9", "cafe\u0301", r"Unicode composition \(NFC/NFD\)"),
    ("cafe\u0301", "caf\u00e9\u2060", r"zero-width or format characters \(U\+2060\) and Unicode composition"),
    ("pos", '"pos"', "surrounding quotes"),
    ('"sci tech"', "sci  tech", "surrounding quotes and whitespace"),
    # A full-width digit, as a Chinese input method writes it (was: a second class).
    ("1", "\uff11", r"full-width or other compatibility forms \(NFKC\)"),
]


@pytest.mark.parametrize(("label", "variant", "difference"), SPELT_TWO_WAYS)
def test_a_class_spelt_another_way_is_refused_naming_its_first_spelling_and_line(
    tmp_path: Path, label: str, variant: str, difference: str
) -> None:
    labels = [label, "sport", "world", variant, label, "sport"]
    path = write(
        tmp_path,
        "topics.jsonl",
        "".join(json.dumps({"text": f"text {number}", "label": name}) + "\n" for number, name in enumerate(labels)),
    )
    expected = (
        rf"^{re.escape(str(path))}: line 4: field 'label': expected each class spelt one way, got "
        rf"{re.escape(repr(variant))}, which differs from the label {re.escape(repr(label))} of line 1 only in "
        rf"{difference}.*: it would be a class of its own; write it as on line 1$"
    )
    with pytest.raises(ValueError, match=expected):
        read_labelled_text(path)


def test_a_tsv_label_quoted_as_csv_quotes_it_is_refused_beside_the_unquoted_one(tmp_path: Path) -> None:
    # TSV has no quoting: pandas' to_csv(sep="\\t") quoting one label made '"pos"' a class beside 'pos'.
    path = write(tmp_path, "a.tsv", 'text\tlabel\ngood\tpos\nbad\tneg\nfine\t"pos"\n')
    with pytest.raises(ValueError) as caught:
        read_labelled_text(path)
    assert str(caught.value) == (
        f"{path}: line 4: field 'label': expected each class spelt one way, got '\"pos\"', which differs from the "
        "label 'pos' of line 2 only in surrounding quotes: it would be a class of its own; write it as on line 2"
    )
    # A label that is all quotes, or quoted everywhere, is left as it is.
    quoted = write(tmp_path, "b.tsv", 'text\tlabel\ngood\t"pos"\nbad\t"neg"\nodd\t""\n')
    assert read_labelled_text(quoted).labels == ['"pos"', '"neg"', '""']


def test_labels_that_differ_in_more_than_their_spelling_stay_classes(tmp_path: Path) -> None:
    labels = ["sci tech", "scitech", "Sci tech", "sci-tech", "cafe", "caf\u00e9", "7", "07"]
    path = write(tmp_path, "a.csv", "text,label\n" + "".join(f"t,{label}\n" for label in labels))
    assert sorted_class_names(read_labelled_text(path).labels) == tuple(sorted_class_names(labels))
    assert len(sorted_class_names(labels)) == len(labels)


MALFORMED = [
    # (file name, content, expected message after "<file>: line N: ")
    ("a.csv", "text,label\nok,a\nthree,fields,here\n", r"line 3: expected 2 CSV fields as in the header, got 3"),
    ("a.tsv", "text\tlabel\nok\ta\nno tab here\n", r"line 3: expected 2 TSV fields as in the header, got 1"),
    ("a.csv", "text,label\nok,a\n\nok,b\n", r"line 3: expected 2 CSV fields as in the header, got an empty line"),
    # The fields' defaults name the setting that renames them (was: the column alone, no word of the setting).
    (
        "a.csv",
        "sentence,label\nok,a\n",
        r"line 1: expected a header with a column 'text' \(named by data\.text_fields\), got one that lacks it",
    ),
    (
        "a.tsv",
        "text\tcategory\nok\ta\n",
        r"line 1: expected a header with a column 'label' \(named by data\.label_field\), got one that lacks it",
    ),
    ("a.csv", "text,label,text\nok,a,b\n", r"line 1: .* column 'text' \(.*\), got one that has 2 columns named it"),
    ("a.csv", 'text,label\n"unclosed,a\n', r"line 2: bad CSV quoting: unexpected end of data"),
    ("a.csv", 'text,label\nok,a\n"closed"then,b\n', r"line 3: bad CSV quoting: ',' expected after '\"'"),
    # Well quoted, but longer than the csv module reads: said as the length, not as quoting.
    (
        "a.csv",
        'text,label\nok,a\n"' + "x" * 131_073 + '",b\n',
        r"line 3: expected fields of at most 131,072 characters \(the CSV reader's limit\), got a longer one; "
        "shorten it, or write the file as JSON Lines",
    ),
    ("a.csv", "text,label\n   ,a\n", r"line 2: field 'text': expected a non-empty text, got '   '"),
    ("a.csv", "text,label\nok,\n", r"line 2: field 'label': expected a non-empty label, got ''"),
    ("a.csv", "text,label\nok, a\n", r"line 2: field 'label': expected a label without leading or trailing whitespace"),
    # classify prints a label a line, tab-separated: a quoted line break or a tab in it would break the output.
    (
        "a.csv",
        'text,label\nok,"Busi\nness"\n',
        r"line 2: field 'label': expected a label on one line, without tabs or control characters, got 'Busi\\nness'",
    ),
    ("a.tsv", "text\tlabel\nok\tSp\u2028orts\n", r"line 2: field 'label': expected a label on one line"),
    ("a.jsonl", '{"text": "ok", "label": "Sp\\torts"}\n', r"line 1: field 'label': expected a label on one line"),
    (
        "a.jsonl",
        '{"text": "ok", "label": "a"}\n{"text": "ok", "label": "a"\n',
        r"line 2: expected a JSON object, got bad JSON",
    ),
    ("a.jsonl", '{"text": "ok", "label": "a"}\n["ok", "a"]\n', r"line 2: expected a JSON object, got list"),
    ("a.jsonl", '{"text": "ok", "label": "a"}\n\n', r"line 2: expected a JSON object, got an empty line"),
    (
        "a.jsonl",
        '{"text": "ok"}\n',
        r"line 1: expected the key 'label' \(named by data\.label_field\), got only the keys \['text'\]",
    ),
    (
        "a.jsonl",
        '{"txt": "ok", "label": "a"}\n',
        r"line 1: expected the key 'text' \(named by data\.text_fields\), got only the keys",
    ),
    (
        "a.jsonl",
        '{"text": "ok", "label": 1.5}\n',
        r"line 1: field 'label': expected a label that is a string or an integer, got 1\.5 \(float\)",
    ),
    (
        "a.jsonl",
        '{"text": "ok", "label": true}\n',
        r"line 1: field 'label': .* string or an integer, got True \(bool\)",
    ),
    ("a.jsonl", '{"text": "ok", "label": null}\n', r"line 1: field 'label': .* got None \(NoneType\)"),
    ("a.jsonl", '{"text": 42, "label": "a"}\n', r"line 1: field 'text': expected a string, got 42 \(int\)"),
    ("a.jsonl", '{"text": ["x"], "label": "a"}\n', r"line 1: field 'text': expected a string, got \['x'\] \(list\)"),
    ("a.jsonl", '{"text": "", "label": "a"}\n', r"line 1: field 'text': expected a non-empty text, got ''"),
    # json.loads keeps the last of a repeated key: this line was read as label "1".
    (
        "a.jsonl",
        '{"text": "ok", "label": "a"}\n{"label": "2", "text": "ok", "label": "1"}\n',
        "line 2: key 'label' appears twice$",
    ),
    # Half an escaped pair has no UTF-8 form: it was a bare codec error while the corpus was written.
    (
        "a.jsonl",
        '{"text": "ok", "label": "a"}\n{"text": "ok", "label": "p\\ud800"}\n',
        r"line 2: field 'label': expected valid Unicode text, got the lone surrogate U\+D800 at character 1",
    ),
    (
        "a.jsonl",
        '{"text": "go\\udc80od", "label": "a"}\n',
        r"line 1: field 'text': expected valid Unicode text, got the lone surrogate U\+DC80 at character 2",
    ),
]


@pytest.mark.parametrize(("name", "content", "message"), MALFORMED)
def test_each_malformed_case_is_one_error_naming_file_and_line(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    path = write(tmp_path, name, content)
    with pytest.raises(ValueError, match=rf"^{path}: {message}"):
        read_labelled_text(path)


def test_invalid_utf8_names_the_line_and_an_empty_or_header_only_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes("text,label\nok,a\n".encode() + b"caf\xe9,b\n")
    with pytest.raises(ValueError, match=r"bad\.csv: line 3: expected UTF-8 text, got invalid byte"):
        read_labelled_text(path)
    with pytest.raises(
        ValueError, match=r"empty\.csv: line 1: expected a header row naming the columns, got an empty file"
    ):
        read_labelled_text(write(tmp_path, "empty.csv", ""))
    with pytest.raises(ValueError, match=r"header\.tsv: expected at least one labelled record, got none"):
        read_labelled_text(write(tmp_path, "header.tsv", "text\tlabel\n"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_labelled_text(tmp_path / "missing.csv")


def test_the_field_names_are_checked(tmp_path: Path) -> None:
    path = write(tmp_path, "a.csv", "text,label\nok,a\n")
    with pytest.raises(ValueError, match="text_fields must be a non-empty sequence of field names, got 'text'"):
        read_labelled_text(path, "text")  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"^label_field: expected a field other than the text fields \(text\), got 'text'$"
    ):
        read_labelled_text(path, ("text",), "text")
    with pytest.raises(ValueError, match=r"text_fields must name each field once"):
        read_labelled_text(path, ("text", "text"))
