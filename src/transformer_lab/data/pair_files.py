"""Sentence pairs from the user's own files: two aligned line files, one TSV file, or JSON Lines.

The three forms people bring, each read as strictly as `parallel_text` reads two line files
(UTF-8 checked, CRLF and a byte-order mark accepted, every error naming the file and the
1-based line, nothing dropped or cut):

- **two line files**, `corpus.de` and `corpus.en`: line i of one belongs with line i of
  the other (fairseq's and OpenNMT-py's raw input, Moses/OPUS downloads); one file given
  for both sides, or a suffix that names the other side's language, is refused;
- **one TSV file**, `pairs.tsv`: each line `source<TAB>target` (Tatoeba/Anki exports,
  OPUS-MT's test sets). A first line `<source_language><TAB><target_language>` or
  `source<TAB>target` (any case, spaces around) is a header and is skipped (logged), the two
  the other way round refused (as are two line files whose suffixes name the languages
  backwards); any other line must have exactly two fields, so a sentence that holds a tab
  needs another form (Multi30k's train.de line 7366 has one);
- **JSON Lines**, `pairs.jsonl`: each line an object with the two languages as keys, either
  at the top (`{"de": "...", "en": "..."}`) or under `"translation"`, the form of Hugging
  Face datasets (`{"translation": {"de": "...", "en": "..."}}`); other keys are ignored.

The form comes from the number of files and the suffix (`.tsv`; `.jsonl` or `.json`), or
from ``file_format`` ("lines", "tsv", "jsonl"); two files whose suffix names a one-file form
are refused unless ``file_format`` says "lines".
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformer_lab import strict_json
from transformer_lab.data._checks import lone_surrogate
from transformer_lab.data.parallel_text import ParallelText, read_lines, read_parallel_text
from transformer_lab.shortened import shortened

logger = logging.getLogger(__name__)

PAIR_FORMATS = ("lines", "tsv", "jsonl")
SIDES = ("source", "target")  # what the two sides are called in errors, and a TSV header's names
_SUFFIX_FORMATS = {".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}
TABLE_SUFFIXES = (*_SUFFIX_FORMATS, ".csv")  # a pair (or a row) per line: never one side of two line files


# A language code as the card and the file names carry it: "de", "en", "zh-Hans", "pt_BR" (BCP 47 tags stay short).
_LANGUAGE_CODE = re.compile(r"[A-Za-z]{2,8}(?:[-_][A-Za-z0-9]{1,8})*")
_LONGEST_LANGUAGE_CODE = 35
# A first TSV line of two codes as headers write them (de, en, pt-BR): lowercase two letters, a region after.
_HEADER_CODE = re.compile(r"[a-z]{2}(?:-[A-Za-z]{2,4})?")


def check_language_code(name: str, value: object) -> None:
    """Refuse anything but a short language code: an empty one left the model card's list without it."""
    if not (isinstance(value, str) and len(value) <= _LONGEST_LANGUAGE_CODE and _LANGUAGE_CODE.fullmatch(value)):
        raise ValueError(
            f"{name}: expected a language code such as 'de', 'en' or 'zh-Hans' (letters, then parts after '-' or "
            f"'_'), got {shortened(repr(value), 80)}"
        )


def check_pair_format(file_format: str, name: str = "data.file_format") -> None:
    """Refuse a ``file_format`` that is none of :data:`PAIR_FORMATS` or '', naming it ``name`` (a config's field)."""
    if file_format not in ("", *PAIR_FORMATS):
        raise ValueError(
            f"{name}: expected one of {', '.join(PAIR_FORMATS)} or '' (from the number of files and the suffix), "
            f"got {file_format!r}"
        )


def pair_file_format(
    paths: Sequence[str | os.PathLike[str]],
    file_format: str = "",
    name: str = "files",
    sides: tuple[str, str] = ("source", "target"),
) -> str:
    """The form of ``paths``: ``file_format`` if given, else "lines" for two files or the one file's suffix.

    ``name`` is what the caller calls ``paths`` (``--train``) and ``sides`` what it calls the
    two sides (a couplet's upper and lower line), in errors.
    """
    if isinstance(paths, (str, os.PathLike)):
        raise ValueError(f"{name}: expected a list of one or two paths, got the single path {str(paths)!r}")
    if len(paths) not in (1, 2):
        raise ValueError(
            f"{name}: expected two aligned line files (SOURCE TARGET) or one .tsv/.jsonl file, got {len(paths)} paths"
        )
    check_pair_format(file_format, "file_format")
    if file_format:
        # The format given fixes how many files it reads: "lines" the source's and the target's, else one.
        wanted = 2 if file_format == "lines" else 1
        if len(paths) != wanted:
            files = f"two files ({sides[0]} then {sides[1]})" if wanted == 2 else "one file"
            given = ", ".join(repr(str(path)) for path in paths)
            raise ValueError(
                f"{name}: expected {files} for the format {file_format!r}, got {len(paths)} "
                f"path{'s' if len(paths) > 1 else ''} ({given})"
            )
        if wanted == 2:
            _check_two_files(paths, name, sides)
        return file_format
    if len(paths) == 2:
        _check_not_tables(paths, name, sides)
        _check_two_files(paths, name, sides)
        return "lines"
    expected = _SUFFIX_FORMATS.get(Path(paths[0]).suffix.lower(), "")
    if not expected:
        raise ValueError(
            f"{name}: cannot tell the form of {str(paths[0])!r} from its suffix: expected .tsv, .jsonl or .json "
            "(or two aligned line files, or set data.file_format=tsv or jsonl)"
        )
    return expected


def _check_not_tables(paths: Sequence[str | os.PathLike[str]], name: str, sides: tuple[str, str]) -> None:
    """Refuse two files told to be line files by their count when a suffix says a one-file table format.

    Read as line files, each whole TSV row or JSON text would be both the source and the target.
    """
    tables = [suffix for suffix in (Path(path).suffix.lower() for path in paths) if suffix in TABLE_SUFFIXES]
    if tables:
        raise ValueError(
            f"{name}: expected two aligned line files ({sides[0]} then {sides[1]}, one sentence per line), "
            f"got {str(paths[0])!r} and {str(paths[1])!r}, and {tables[0]} is the suffix of a one-file format; "
            "give one .tsv or .jsonl file alone (a pair per line), "
            "or set data.file_format=lines if these are line files"
        )


def _same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one file (by another spelling or a link too)."""
    try:
        return os.path.samefile(first, second)
    except OSError:  # one is missing: the reader names it
        return first.resolve() == second.resolve()


def _check_two_files(paths: Sequence[str | os.PathLike[str]], name: str, sides: tuple[str, str]) -> None:
    """Refuse one file given for both sides (by another path or a link too): each line would be its own target."""
    first, second = Path(paths[0]), Path(paths[1])
    if _same_file(first, second):
        raise ValueError(
            f"{name}: expected two different files ({sides[0]} then {sides[1]}), got the same file twice "
            f"({str(first)!r} and {str(second)!r})"
        )


def check_validation_apart(
    data: Any, train_name: str = "data.train_files", valid_name: str = "data.valid_files"
) -> None:
    """Refuse a data config whose ``valid_files`` include one of its ``train_files`` (by any path or link).

    Validation on training text measures nothing held out: best/ and the validation scores would
    reward memorising. Any task's data config with both fields; others pass. The names are
    the files' as the caller's user gave them (``--train``, ``--valid``).
    """
    train = [Path(path) for path in getattr(data, "train_files", ()) or ()]
    for valid in getattr(data, "valid_files", ()) or ():
        for path in train:
            if _same_file(Path(valid), path):
                raise ValueError(
                    f"{valid_name}: expected files held out from {train_name}'s (validation on training text "
                    f"measures nothing held out), got {str(valid)!r}, which is {train_name}'s {str(path)!r}"
                )


def read_pair_files(
    paths: Sequence[str | os.PathLike[str]],
    source_language: str,
    target_language: str,
    file_format: str = "",
    *,
    name: str = "files",
) -> ParallelText:
    """Read (source, target) pairs from ``paths`` in any of the three forms (see the module docstring).

    ``source_language`` / ``target_language`` are the JSON keys (and the TSV header); ``name``
    is what the caller calls ``paths`` (``--train``), for errors about the list itself.
    """
    form = pair_file_format(paths, file_format, name)
    if form == "lines":
        check_language_order(paths, source_language, target_language, name)
        return read_parallel_text(paths[0], paths[1])
    path = Path(paths[0])
    lines = read_lines(path)
    if not lines:
        raise ValueError(f"{path}: expected at least one pair, got an empty file")
    if form == "jsonl":
        pairs = [
            json_pair(path, number, line, source_language, target_language) for number, line in enumerate(lines, 1)
        ]
        return ParallelText(pairs, path, path)
    header = is_tsv_header(lines[0], source_language, target_language, path)
    if header:
        logger.info("%s: line 1 is the header %r, not a pair", path, lines[0])
    return ParallelText(_tsv_pairs(path, lines, int(header)), path, path, header_lines=int(header))


def _check_sentence(path: Path, number: int, side: str, text: str) -> str:
    kind = "sentence" if side in SIDES else "line"  # a couplet's upper and lower line
    if not text.strip():
        raise ValueError(f"{path}: line {number}: expected a non-empty {side} {kind}, got {text!r}")
    surrogate = lone_surrogate(text)
    if surrogate is not None:
        # Only a JSON escape makes one (a file's bytes are decoded strictly): it has no UTF-8 form to store.
        raise ValueError(
            f"{path}: line {number}: expected valid Unicode text in the {side} {kind}, got {surrogate} "
            "(half of a \\u escaped pair)"
        )
    return text


def tsv_pair(path: Path, number: int, line: str, sides: tuple[str, str] = SIDES) -> tuple[str, str]:
    """The (source, target) of one TSV line, ``number`` its 1-based line; an error names both and the ``sides``."""
    fields = line.split("\t")
    if len(fields) != 2:
        raise ValueError(
            f"{path}: line {number}: expected 2 tab-separated fields ({sides[0]}<TAB>{sides[1]}), "
            f"got {len(fields)}: {line[:80]!r}"
        )
    return _check_sentence(path, number, sides[0], fields[0]), _check_sentence(path, number, sides[1], fields[1])


def line_pair(paths: tuple[Path, Path], number: int, source: str, target: str) -> tuple[str, str]:
    """The (source, target) of line ``number`` of two aligned line files; an empty side names its file."""
    return _check_sentence(paths[0], number, "source", source), _check_sentence(paths[1], number, "target", target)


def is_tsv_header(
    line: str,
    source_language: str,
    target_language: str,
    path: Path,
    headers: tuple[tuple[str, str], ...] = (),
    sides: tuple[str, str] = SIDES,
) -> bool:
    """Whether a TSV file's first line is a header: the two languages (``de<TAB>en``), ``source<TAB>target``,
    or one of ``headers``.

    ``headers`` are a caller's own column names (a couplet's ``上联<TAB>下联``), ``sides`` what
    errors call the columns. Case and spaces around each name
    are ignored (``DE<TAB>EN``), and nothing else is a header: a pair of two other words is a pair.
    A header the other way round says the columns are target then source: refused, naming
    ``path`` (read as data, it was a pair, and every pair was trained the wrong way round).
    """
    names = tuple(field.strip().lower() for field in line.split("\t"))
    languages = (source_language.strip().lower(), target_language.strip().lower())
    known = [languages, SIDES, *(tuple(name.lower() for name in header) for header in headers)]
    if any(header[0] != header[1] and names == header[::-1] for header in known):
        # Languages are options of a translation's sides; a couplet's upper and lower line are not.
        flip = (
            f", or pass --source-language {target_language} --target-language {source_language}"
            if sides == SIDES
            else ""
        )
        raise ValueError(
            f"{path}: line 1: expected the columns {source_language}<TAB>{target_language} ({sides[0]} first, "
            f"{source_language} -> {target_language}), got the header {line!r}, which puts {target_language} first; "
            f"swap the columns{flip}"
        )
    fields = [field.strip() for field in line.split("\t")]
    if (
        sides == SIDES
        and names not in known
        and len(fields) == 2
        and all(_HEADER_CODE.fullmatch(field) for field in fields)
    ):
        # Read as a pair, the header of another language pair was trained as a sentence pair, and the
        # file's languages contradicted the options without a word.
        raise ValueError(
            f"{path}: line 1: expected the header {source_language}<TAB>{target_language} or a sentence pair, got "
            f"{line!r}, the header of another language pair; pass --source-language {fields[0]} --target-language "
            f"{fields[1]}, or correct the header"
        )
    return names in known


def check_language_order(
    paths: Sequence[str | os.PathLike[str]], source_language: str, target_language: str, name: str = "files"
) -> None:
    """Refuse two line files whose suffixes name the languages the other way round (``train.en train.de`` for de -> en).

    One file whose suffix names the other side's language (``train.de train.de`` from two folders)
    is refused too: read as given, the pairs would be trained as another direction than the
    config and card say.
    """
    if len(paths) != 2 or source_language.lower() == target_language.lower():
        return
    languages = (source_language, target_language)
    suffixes = [Path(path).suffix.lower().lstrip(".") for path in paths]
    if suffixes == [target_language.lower(), source_language.lower()]:
        raise ValueError(
            f"{name}: expected the {source_language} file first (the source, {source_language} -> {target_language}), "
            f"got {str(paths[0])!r} then {str(paths[1])!r}; swap them, or pass "
            f"--source-language {target_language} --target-language {source_language}"
        )
    for index, (place, side, other) in enumerate((("first", "source", "target"), ("second", "target", "source"))):
        if suffixes[index] == languages[1 - index].lower():
            raise ValueError(
                f"{name}: expected the {languages[index]} file {place} (the {side}, {source_language} -> "
                f"{target_language}), got {str(paths[index])!r}, whose suffix names the {other} language "
                f"{languages[1 - index]}; give the {languages[index]} file as the {side}, or pass --source-language "
                "and --target-language for the languages the files hold"
            )


def _tsv_pairs(path: Path, lines: list[str], header_lines: int) -> list[tuple[str, str]]:
    pairs = [tsv_pair(path, number, line) for number, line in enumerate(lines[header_lines:], header_lines + 1)]
    if not pairs:
        raise ValueError(f"{path}: expected at least one pair after the header, got none")
    return pairs


def json_pair(
    path: Path, number: int, line: str, source_language: str, target_language: str, sides: tuple[str, str] = SIDES
) -> tuple[str, str]:
    """The (source, target) of one JSON Lines record, keyed by the languages; errors call the two ``sides`` so."""
    try:
        record = strict_json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{path}: line {number}: expected one JSON object, got invalid JSON ({error.msg} at column {error.colno})"
        ) from None
    except strict_json.DuplicateKeyError as error:
        raise ValueError(f"{path}: line {number}: {error}") from None
    except ValueError as error:
        too_long = strict_json.too_long_integer(error)
        if too_long is None:
            raise
        raise ValueError(f"{path}: line {number}: expected one JSON object, got {too_long}") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path}: line {number}: expected a JSON object, got {type(record).__name__}")
    holder = record.get("translation", record) if isinstance(record.get("translation"), dict) else record
    texts = []
    for side, language in zip(sides, (source_language, target_language)):
        if language not in holder:
            # A translation's keys are its languages; a couplet's are its sides' own names.
            which = f"the {side} language" if sides == SIDES else f"the {side} line"
            raise ValueError(
                f"{path}: line {number}: expected the key {language!r} ({which}), got the keys {sorted(holder)}"
            )
        text = holder[language]
        if not isinstance(text, str):
            raise ValueError(f"{path}: line {number}: expected a string under {language!r}, got {type(text).__name__}")
        texts.append(_check_sentence(path, number, side, text))
    return texts[0], texts[1]
