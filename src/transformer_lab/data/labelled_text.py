"""Read labelled text files: CSV, TSV or JSON Lines, one example (text and label) a record.

The formats, chosen from the file's suffix (`.csv`, `.tsv`, `.jsonl`) or given explicitly:

- **CSV** (`.csv`): a header row naming the columns, then one record per row, RFC 4180
  quoting (a field with a comma, a quote or a line break is written `"..."`, an inner
  quote `""`), as pandas' `to_csv(index=False)` and spreadsheets write it. A quoted field
  may span lines; the record is then named by the line it starts on, and a warning says
  where a line inside it reads alone as a record ending in one of the file's labels (the
  mark of a quote left open, which merges the rows up to the next quote).
- **TSV** (`.tsv`): a header row, then one record per line, fields split on the tab and
  nothing else (the IANA `text/tab-separated-values` rule: no quoting, so a `"` is an
  ordinary character; a text with a tab or a line break needs CSV or JSON Lines).
- **JSON Lines** (`.jsonl`): one JSON object per line, no header.

The caller names one or several text fields (several are joined with "\\n", as AG News
joins title and description, so where one field ends stays visible to the tokenizer) and
one label field. A text field holds a string; a label a string or an integer, kept as its
string form (`3` and `"3"` are the same class "3").

The reader is strict, like `parallel_text.py`: the file must be UTF-8 (a BOM at its start
and CRLF line ends are accepted), and each of these is a ValueError naming the file, the
1-based line and, where one is at fault, the field: a wrong column count, a header that
lacks a named column (or names it twice), a blank line, bad CSV quoting, bad JSON, a line
that is not a JSON object, a missing key, a value of another type (a float, a bool, a
list, null), an empty or whitespace-only text, an empty label, a label with leading or
trailing whitespace (which would silently make a second class), and, for the same reason,
a label that equals an earlier one of the file once one pair of surrounding double quotes,
zero-width and format characters (Unicode category Cf) are removed, whitespace runs are one
space and both are composed (NFC): '"pos"' beside "pos", "sci  tech" beside "sci tech",
"tech\u200b" beside "tech", a decomposed "é" beside a composed one. Nothing is dropped,
stripped or skipped.

`sorted_class_names` gives the classes of a training file in a stable order, and
`LabelledTextFile.label_ids` maps labels to class indices, with an error naming the file,
the line and the label for a label the classes lack.
"""

from __future__ import annotations

import csv
import itertools
import json
import logging
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformer_lab import strict_json
from transformer_lab.data._checks import check_integer, is_integer, lone_surrogate
from transformer_lab.data.line_stream import stream_lines
from transformer_lab.data.parallel_text import MAX_LINE_BYTES

LABELLED_TEXT_FORMATS: tuple[str, ...] = ("csv", "tsv", "jsonl")
TEXT_FIELD_SEPARATOR = "\n"
# What errors call the text fields and the label field: the settings, or the options a command gave instead.
FieldNames = tuple[str, str]
SETTING_NAMES: FieldNames = ("data.text_fields", "data.label_field")
_SUFFIX_FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl"}

logger = logging.getLogger(__name__)
_INTEGER_LABEL = re.compile(r"-?[0-9]+")


@dataclass(frozen=True)
class LabelledText:
    """One example of a labelled text file.

    Attributes:
        text: the text field(s), joined with "\\n" when several were named.
        label: the label as a string (an integer label in JSON becomes its decimal form).
        line_number: the 1-based line of the file the record starts on.
    """

    text: str
    label: str
    line_number: int


@dataclass(frozen=True)
class LabelledExample:
    """One record with its label as a class index: its text, its class index, its 1-based line."""

    text: str
    label: int
    line_number: int


@dataclass
class LabelledTextFile:
    """The examples read from one labelled text file, in file order.

    Attributes:
        records: every record of the file (none is ever dropped).
        path: the file read.
        file_format: "csv", "tsv" or "jsonl", the format it was read as.
        text_fields, label_field: the fields the texts and labels came from.
    """

    records: list[LabelledText]
    path: Path
    file_format: str
    text_fields: tuple[str, ...]
    label_field: str

    def __len__(self) -> int:
        return len(self.records)

    @property
    def labels(self) -> list[str]:
        """The label of every record, in file order."""
        return [record.label for record in self.records]

    def label_ids(self, class_names: Sequence[str], *, from_checkpoint: bool = False) -> list[int]:
        """The index in `class_names` of every record's label, in file order.

        ``from_checkpoint``: the classes are a checkpoint's that a fine-tuned or resumed run
        keeps, so a label they lack is named as such, not as one that training never saw.

        Raises:
            ValueError: a label is not in `class_names` (e.g. a validation or test label
                that training never saw); the message names the file, the line, the label
                and the known classes.
        """
        label_id = LabelIds(class_names, self.path, self.label_field, from_checkpoint=from_checkpoint)
        return [label_id(record) for record in self.records]

    def examples(self, class_names: Sequence[str], *, from_checkpoint: bool = False) -> list[LabelledExample]:
        """Every record with its label as its index in `class_names` (`label_ids`, its errors)."""
        labels = self.label_ids(class_names, from_checkpoint=from_checkpoint)
        return [LabelledExample(record.text, label, record.line_number) for record, label in zip(self.records, labels)]


class LabelIds:
    """A record's label as its index in ``class_names``; an unseen label is a ValueError naming the file and line."""

    def __init__(
        self, class_names: Sequence[str], path: Path, label_field: str, *, from_checkpoint: bool = False
    ) -> None:
        self.index_of = {name: index for index, name in enumerate(class_names)}
        self.class_names = tuple(class_names)
        self.path = path
        self.label_field = label_field
        self.from_checkpoint = from_checkpoint

    def __call__(self, record: LabelledText) -> int:
        index = self.index_of.get(record.label)
        if index is None:
            known = ", ".join(repr(name) for name in self.class_names)
            if self.from_checkpoint:
                # The label may well be in this run's training file: "seen in training" would contradict it.
                raise ValueError(
                    f"{self.path}: line {record.line_number}: field {self.label_field!r}: expected one of the "
                    f"checkpoint's classes ({known}), got {record.label!r}, which it has no class for; a "
                    "fine-tuned or resumed run keeps the classes of the checkpoint it starts from (train from "
                    "scratch for new ones)"
                )
            raise ValueError(
                f"{self.path}: line {record.line_number}: field {self.label_field!r}: expected one of the "
                f"classes seen in training ({known}), got the unseen label {record.label!r}"
            )
        return index


def sorted_class_names(labels: Iterable[str]) -> tuple[str, ...]:
    """The distinct labels in a stable order: integer-looking ones numerically first, then the rest sorted.

    So "2" comes before "10", and the order never depends on which label the file shows
    first. Labels that are the same number in another spelling ("7", "07") stay distinct
    classes, ordered by their text.
    """

    def key(label: str) -> tuple[int, int, str]:
        if _INTEGER_LABEL.fullmatch(label):
            return (0, int(label), label)
        return (1, 0, label)

    return tuple(sorted(set(labels), key=key))


def format_of_suffix(path: str | os.PathLike[str]) -> str | None:
    """The format a file's suffix names (".csv" -> "csv"), or None where it names none."""
    return _SUFFIX_FORMATS.get(Path(path).suffix.lower())


def labelled_text_format(path: str | os.PathLike[str], file_format: str = "", *, name: str = "file_format") -> str:
    """The format to read `path` as: `file_format` if given, else the one its suffix names.

    Raises ValueError for an unknown `file_format`, or (with none given) a suffix that is
    not .csv, .tsv or .jsonl, whose message advises `name` (what the caller calls the format:
    an option, a setting).
    """
    if not isinstance(file_format, str):
        raise ValueError(f"file_format must be a str, got {file_format!r} ({type(file_format).__name__})")
    if file_format:
        if file_format not in LABELLED_TEXT_FORMATS:
            raise ValueError(
                f"file_format must be one of {', '.join(LABELLED_TEXT_FORMATS)} (or '' for the file's suffix), "
                f"got {file_format!r}"
            )
        return file_format
    suffix = Path(path).suffix.lower()
    if suffix not in _SUFFIX_FORMATS:
        raise ValueError(
            f"{path}: expected a suffix {', '.join(_SUFFIX_FORMATS)} to choose the format, got "
            f"{suffix or 'no suffix'!r}; name the format explicitly ({name}, e.g. 'csv')"
        )
    return _SUFFIX_FORMATS[suffix]


def check_field_names(text_fields: Sequence[str], label_field: str, text_name: str, label_name: str) -> None:
    """Refuse an empty field name, or a text field named twice, naming ``text_name`` or ``label_name`` (the
    settings or options that chose them), before any file is read."""
    if not all(text_fields):
        raise ValueError(f"{text_name}: expected non-empty field names, got {list(text_fields)!r}")
    if not label_field:
        raise ValueError(f"{label_name}: expected non-empty field names, got {label_field!r}")
    if len(set(text_fields)) != len(text_fields):
        raise ValueError(f"{text_name}: expected each field once, got {list(text_fields)!r}")


def check_label_apart(
    text_fields: Sequence[str], label_field: str, label_name: str = "label_field", text_name: str = ""
) -> None:
    """Refuse a label field that is one of the text fields, naming ``label_name`` (the setting or option
    that chose it), or ``text_name`` where it is the text fields' that was given."""
    if label_field not in text_fields:
        return
    if text_name:
        raise ValueError(f"{text_name}: expected fields other than the label field {label_field!r}, got it among them")
    fields = ", ".join(text_fields)
    raise ValueError(f"{label_name}: expected a field other than the text fields ({fields}), got {label_field!r}")


def _check_fields(text_fields: Sequence[str], label_field: str) -> tuple[str, ...]:
    if isinstance(text_fields, str) or not isinstance(text_fields, Sequence) or not text_fields:
        raise ValueError(f"text_fields must be a non-empty sequence of field names, got {text_fields!r}")
    fields = tuple(text_fields)
    for name, value in [*(("text_fields", field) for field in fields), ("label_field", label_field)]:
        if not isinstance(value, str) or not value:
            raise ValueError(f"{name} must hold non-empty field names (str), got {value!r}")
    if len(set(fields)) != len(fields):
        raise ValueError(f"text_fields must name each field once, got {list(fields)!r}")
    check_label_apart(fields, label_field)
    return fields


class _RecordError(ValueError):
    """What is wrong with one record (private; the reader adds the file and the line)."""


class _LineError(ValueError):
    """A record error found while splitting rows, with the line it belongs to (private)."""

    def __init__(self, line_number: int, message: str) -> None:
        super().__init__(message)
        self.line_number = line_number


def _check_unicode(value: str, field: str) -> None:
    surrogate = lone_surrogate(value)
    if surrogate is not None:
        # Only a JSON escape makes one (a file's bytes are decoded strictly): it has no UTF-8 form to store.
        raise _RecordError(
            f"field {field!r}: expected valid Unicode text, got {surrogate} (half of a \\u escaped pair)"
        )


def _text_of(values: Sequence[Any], fields: Sequence[str]) -> str:
    for value, name in zip(values, fields):
        if not isinstance(value, str):
            raise _RecordError(f"field {name!r}: expected a string, got {value!r:.60} ({type(value).__name__})")
        _check_unicode(value, name)
    text = TEXT_FIELD_SEPARATOR.join(values)
    if not text.strip():
        named = "field " + repr(fields[0]) if len(fields) == 1 else "fields " + ", ".join(map(repr, fields))
        raise _RecordError(f"{named}: expected a non-empty text, got {text!r}")
    return text


# Control characters (tab, line feed, ...) and the line and paragraph separators.
_BREAKING_CATEGORIES = ("Cc", "Zl", "Zp")


def _label_of(value: Any, field: str) -> str:
    if is_integer(value):
        return str(int(value))
    if not isinstance(value, str):
        raise _RecordError(
            f"field {field!r}: expected a label that is a string or an integer, "
            f"got {value!r:.60} ({type(value).__name__})"
        )
    if not value.strip():
        raise _RecordError(f"field {field!r}: expected a non-empty label, got {value!r}")
    _check_unicode(value, field)
    if value != value.strip():
        raise _RecordError(
            f"field {field!r}: expected a label without leading or trailing whitespace, got {value!r} "
            f"(it would be a class of its own beside {value.strip()!r})"
        )
    if any(unicodedata.category(character) in _BREAKING_CATEGORIES for character in value):
        # classify prints a label on its line, its columns apart by tabs: a break there would add lines.
        raise _RecordError(
            f"field {field!r}: expected a label on one line, without tabs or control characters, got {value!r}"
        )
    return value


def _unquoted(label: str) -> str:
    # A TSV field is never unquoted (a quote is an ordinary character there): '"pos"' beside 'pos'
    # is a spreadsheet's or pandas' quoting, not a class of its own.
    return label[1:-1] if len(label) > 2 and label[0] == label[-1] == '"' else label


def _without_format(label: str) -> str:
    return "".join(character for character in label if unicodedata.category(character) != "Cf")


def _collapsed(label: str) -> str:
    return " ".join(label.split())


def _composed(label: str) -> str:
    return unicodedata.normalize("NFC", label)


def _compatible(label: str) -> str:
    return unicodedata.normalize("NFKC", label)


# Each way two spellings of one class can differ unseen, in the order they are undone. Letter case is no such
# way: "US" and "us" may well be two classes.
_LABEL_SPELLINGS = (
    ("surrounding quotes", _unquoted),
    ("zero-width or format characters", _without_format),
    ("whitespace", _collapsed),
    ("Unicode composition (NFC/NFD)", _composed),
    ("full-width or other compatibility forms (NFKC)", _compatible),
)


class _LabelSpellings:
    """Refuses a label that is another label of the file written another way (zero-width, whitespace, NFC, NFKC)."""

    def __init__(self, field: str) -> None:
        self.field = field
        self.seen: set[str] = set()
        self.first_of_key: dict[str, tuple[str, int]] = {}  # the undone spelling -> its first label and line

    def check(self, record: LabelledText) -> None:
        if record.label in self.seen:  # once per distinct label, not per record
            return
        self.seen.add(record.label)
        key = label_spelling_key(record.label)
        first, line = self.first_of_key.setdefault(key, (record.label, record.line_number))
        if first != record.label:
            raise _LineError(
                record.line_number,
                f"field {self.field!r}: expected each class spelt one way, got {record.label!r}, which differs from "
                f"the label {first!r} of line {line} only in {label_spelling_difference(record.label, first)}: "
                f"it would be a class of its own; write it as on line {line}",
            )


def label_spelling_key(label: str) -> str:
    """``label`` unquoted, without zero-width or format characters, its whitespace runs one space, in NFKC form.

    Two labels of one key are one class written two ways; the reader refuses the second.
    """
    for _, undo in _LABEL_SPELLINGS:
        label = undo(label)
    return label


def label_spelling_difference(label: str, other: str) -> str:
    """How two labels of one `label_spelling_key` differ, in words ("whitespace", "zero-width ... (U+200B)")."""
    ways = []
    pair = (label, other)
    for name, undo in _LABEL_SPELLINGS:
        undone = (undo(pair[0]), undo(pair[1]))
        if pair[0] != pair[1] and undone != pair:
            if undo is _without_format:  # name them: they do not show when printed
                removed = set(label + other) - set(_without_format(label + other))
                codes = sorted(f"U+{ord(character):04X}" for character in removed)
                name += f" ({', '.join(codes)})"
            ways.append(name)
        pair = undone
    return " and ".join(ways)


def _columns(header: list[str], text_fields: tuple[str, ...], label_field: str, field_names: FieldNames) -> list[int]:
    """The column index of each text field, then of the label field; errors name what is missing."""
    indices = []
    for name in (*text_fields, label_field):
        count = header.count(name)
        if count != 1:
            problem = "lacks" if count == 0 else f"has {count} columns named"
            raise _RecordError(
                f"expected a header with a column {name!r} ({_setting_of(name, label_field, field_names)}), "
                f"got one that {problem} it: {header!r:.200}"
            )
        indices.append(header.index(name))
    return indices


def _setting_of(name: str, label_field: str, field_names: FieldNames) -> str:
    """The setting or option that chose the field ``name``: a default ('text', 'label') is no name a file must use."""
    return f"named by {field_names[1] if name == label_field else field_names[0]}"


@dataclass(frozen=True)
class _SpanningRecord:
    """A CSV record whose quoted field runs over a line that, read alone, is a whole record."""

    line_number: int  # where the record starts
    inner_line_number: int  # the line inside it that reads as a record
    inner_label: str  # that line's label column, read alone


def _delimited_rows(lines: Iterable[str], file_format: str) -> Iterator[tuple[int, list[str], list[str]]]:
    """(first line number, fields, the lines read) of every row; TSV splits on tabs, CSV follows RFC 4180."""
    if file_format == "tsv":
        for number, line in enumerate(lines, start=1):
            yield number, ([] if line == "" else line.split("\t")), [line]
        return
    # The reader pulls lines only as far as the record it returns: these are that record's lines.
    record_lines: list[str] = []

    def read(line_stream: Iterable[str]) -> Iterator[str]:
        for line in line_stream:
            record_lines.append(line)
            yield line + "\n"

    reader = csv.reader(read(lines), strict=True)
    start = 1
    while True:
        record_lines.clear()
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            if str(error).startswith("field larger than field limit"):  # the reader's cap, not the quoting
                raise _LineError(
                    start,
                    f"expected fields of at most {csv.field_size_limit():,} characters (the CSV reader's limit), "
                    "got a longer one; shorten it, or write the file as JSON Lines, which bounds only its lines "
                    f"({MAX_LINE_BYTES:,} bytes)",
                ) from None
            raise _LineError(start, f"bad CSV quoting: {error}") from None
        yield start, row, list(record_lines)
        start = reader.line_num + 1


def _spanning_record(start: int, lines: list[str], width: int, label_column: int) -> _SpanningRecord | None:
    """The first of ``lines`` after the record's first that reads alone as a record of ``width`` fields, if any.

    A quote left open runs the field on to the next quote, merging the rows between into one
    record of the right width: those rows still read as records, one a line.
    """
    for offset, line in enumerate(lines[1:], start=1):
        try:
            fields = next(csv.reader([line]), [])
        except csv.Error:
            continue
        if len(fields) == width:
            return _SpanningRecord(start, start + offset, fields[label_column])
    return None


def _read_delimited(
    lines: Iterable[str],
    file_format: str,
    text_fields: tuple[str, ...],
    label_field: str,
    field_names: FieldNames,
    spanning: list[_SpanningRecord],
) -> Iterable[LabelledText]:
    """The records; each CSV record whose quoted field spans a line that reads as a record goes to ``spanning``."""
    rows = _delimited_rows(lines, file_format)
    header_row = next(rows, None)
    if header_row is None:
        raise _LineError(1, "expected a header row naming the columns, got an empty file")
    columns = _columns(header_row[1], text_fields, label_field, field_names)
    width = len(header_row[1])
    for number, row, record_lines in rows:
        if len(record_lines) > 1 and len(row) == width:
            found = _spanning_record(number, record_lines, width, columns[-1])
            if found is not None:
                spanning.append(found)
        if len(row) != width:
            shown = "an empty line" if not row else f"{len(row)}"
            raise _LineError(number, f"expected {width} {file_format.upper()} fields as in the header, got {shown}")
        try:
            text = _text_of([row[index] for index in columns[:-1]], text_fields)
            label = _label_of(row[columns[-1]], label_field)
        except _RecordError as error:
            raise _LineError(number, str(error)) from None
        yield LabelledText(text, label, number)


def _read_json_lines(
    lines: Iterable[str], text_fields: tuple[str, ...], label_field: str, field_names: FieldNames
) -> Iterable[LabelledText]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise _LineError(number, "expected a JSON object, got an empty line")
        try:
            value = strict_json.loads(line)
        except json.JSONDecodeError as error:
            raise _LineError(
                number, f"expected a JSON object, got bad JSON ({error.msg} at column {error.colno})"
            ) from None
        except strict_json.DuplicateKeyError as error:
            raise _LineError(number, str(error)) from None
        except ValueError as error:
            too_long = strict_json.too_long_integer(error)
            if too_long is None:
                raise
            raise _LineError(number, f"expected a JSON object, got {too_long}") from None
        if not isinstance(value, dict):
            raise _LineError(number, f"expected a JSON object, got {type(value).__name__} {line[:60]!r}")
        missing = [name for name in (*text_fields, label_field) if name not in value]
        if missing:
            raise _LineError(
                number,
                f"expected the key {missing[0]!r} ({_setting_of(missing[0], label_field, field_names)}), "
                f"got only the keys {sorted(value)!r:.200}",
            )
        try:
            text = _text_of([value[name] for name in text_fields], text_fields)
            label = _label_of(value[label_field], label_field)
        except _RecordError as error:
            raise _LineError(number, str(error)) from None
        yield LabelledText(text, label, number)


def read_labelled_text(
    path: str | os.PathLike[str],
    text_fields: Sequence[str] = ("text",),
    label_field: str = "label",
    file_format: str = "",
    *,
    max_records: int = 0,
    format_name: str = "file_format",
    field_names: FieldNames = SETTING_NAMES,
) -> LabelledTextFile:
    """Read a CSV, TSV or JSON Lines file of labelled texts (see the module docstring).

    Args:
        path: the file.
        text_fields: the field(s) holding the text; several are joined with "\\n".
        label_field: the field holding the label.
        file_format: "csv", "tsv" or "jsonl"; "" chooses from the suffix.
        max_records: read only the first N records (0 = all): quick runs on a big file.
        format_name: what the caller calls ``file_format`` (an option, a setting), in errors.
        field_names: what the caller calls ``text_fields`` and ``label_field``, in errors.

    Returns:
        a `LabelledTextFile` with every record and its line number.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a malformed file (see the module docstring) or a file without any
            record; the message names the file, the line and the field.
    """
    fields = _check_fields(text_fields, label_field)
    file_format = labelled_text_format(path, file_format, name=format_name)
    records = list(
        stream_labelled_text(path, fields, label_field, file_format, max_records=max_records, field_names=field_names)
    )
    return LabelledTextFile(records, Path(path), file_format, fields, label_field)


def stream_labelled_text(
    path: str | os.PathLike[str],
    text_fields: Sequence[str] = ("text",),
    label_field: str = "label",
    file_format: str = "",
    *,
    max_records: int = 0,
    format_name: str = "file_format",
    field_names: FieldNames = SETTING_NAMES,
) -> Iterator[LabelledText]:
    """The records of `read_labelled_text`, one at a time, the file read in bounded blocks (same checks, errors)."""
    fields = _check_fields(text_fields, label_field)
    max_records = check_integer("max_records", max_records, minimum=0)
    path = Path(path)
    file_format = labelled_text_format(path, file_format, name=format_name)
    lines = itertools.chain.from_iterable(stream_lines(path))
    spanning: list[_SpanningRecord] = []
    reader = (
        _read_json_lines(lines, fields, label_field, field_names)
        if file_format == "jsonl"
        else _read_delimited(lines, file_format, fields, label_field, field_names, spanning)
    )
    count = 0
    spellings = _LabelSpellings(label_field)
    try:
        for record in reader:
            spellings.check(record)
            yield record
            count += 1
            if count == max_records:
                break
    except _LineError as error:
        raise ValueError(f"{path}: line {error.line_number}: {error}") from None
    except _RecordError as error:  # the header's problems
        raise ValueError(f"{path}: line 1: {error}") from None
    if not count:
        raise ValueError(f"{path}: expected at least one labelled record, got none")
    _warn_of_spanning_records(path, spanning, spellings.seen)


def _warn_of_spanning_records(path: Path, spanning: list[_SpanningRecord], labels: set[str]) -> None:
    """Say where a quoted field runs over lines that read as records ending in one of the file's labels."""
    merged = [record for record in spanning if record.inner_label in labels]
    if not merged:
        return
    first = merged[0]
    logger.warning(
        "%s: line %d: a quoted field runs on over line %d, which reads as a record of its own (label %r)%s: "
        "a quote left open merges the rows up to the next quote into one record; close it (a quote inside "
        'a text is written twice, ""), or write the file as JSON Lines',
        path,
        first.line_number,
        first.inner_line_number,
        first.inner_label,
        "" if len(merged) == 1 else f", and {len(merged) - 1} more such record(s)",
    )
