"""Sentence pairs from the user's files, streamed in bounded chunks, as strictly as `pair_files` reads them.

The same three forms (two aligned line files, one TSV file, JSON Lines) and the same
errors, each naming the file and the 1-based line: a misaligned pair of files, an empty
side, bad UTF-8, a TSV line without exactly two fields, a JSON line that is no object or
lacks a language. Nothing is dropped or cut. `count_pairs` tells how many pairs a pass will
give before it is made (on bytes, nothing decoded), so that the held-out pairs and the
tokenizer's sample can be drawn first; `stream_pairs` then yields the pairs in file order.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from transformer_lab.data import line_stream
from transformer_lab.data.line_stream import ByteDigest, count_lines, stream_lines
from transformer_lab.data.pair_files import (
    SIDES,
    check_language_order,
    is_tsv_header,
    json_pair,
    line_pair,
    pair_file_format,
    tsv_pair,
)
from transformer_lab.data.parallel_text import misaligned_files_error

CHUNK_PAIRS = 20_000  # pairs per chunk: enough for the tokenizer's threads, a few MB of text
T = TypeVar("T")


@dataclass(frozen=True)
class PairFiles:
    """Where a corpus of pairs is read from: its files, their form and the two languages (JSON keys, TSV header)."""

    paths: tuple[Path, ...]
    form: str
    source_language: str
    target_language: str
    # What errors call the two sides (a couplet's upper and lower line), and the TSV headers
    # besides the languages and source<TAB>target.
    sides: tuple[str, str] = SIDES
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(
        cls,
        paths: Sequence[str | os.PathLike[str]],
        source_language: str,
        target_language: str,
        file_format: str = "",
        name: str = "files",
        sides: tuple[str, str] = SIDES,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> PairFiles:
        """Check the list of paths and tell its form (see `pair_files.pair_file_format`)."""
        form = pair_file_format(paths, file_format, name, sides)
        if form == "lines":
            check_language_order(paths, source_language, target_language, name)
        return cls(tuple(Path(path) for path in paths), form, source_language, target_language, sides, headers)


def _first_line(path: Path) -> str | None:
    for lines in stream_lines(path, block_bytes=1 << 16):
        return lines[0]
    return None


def _header_lines(files: PairFiles) -> int:
    if files.form != "tsv":
        return 0
    first = _first_line(files.paths[0])
    return int(first is not None and _is_header(files, first))


def _is_header(files: PairFiles, line: str) -> bool:
    return is_tsv_header(line, files.source_language, files.target_language, files.paths[0], files.headers, files.sides)


def count_pairs(files: PairFiles) -> int:
    """The number of pairs the files hold; a misaligned pair of line files or an empty file is refused here."""
    if files.form == "lines":
        source_path, target_path = files.paths
        source_count, target_count = count_lines(source_path), count_lines(target_path)
        if source_count != target_count:
            # A file in another encoding (UTF-16) miscounts its lines: its bytes are named first.
            for path in (source_path, target_path):
                for _ in stream_lines(path):
                    pass
            raise misaligned_files_error((source_path, target_path), (source_count, target_count))
        if source_count == 0:
            raise ValueError(f"expected at least one line in {source_path} and {target_path}, got two empty files")
        return source_count
    path = files.paths[0]
    count = count_lines(path)
    if count == 0:
        raise ValueError(f"{path}: expected at least one pair, got an empty file")
    header = _header_lines(files)
    if count == header:
        raise ValueError(f"{path}: expected at least one pair after the header, got none")
    # The first pair read before the count is trusted: a file of another form (one JSON array where JSON
    # Lines are read) is refused as such, not counted as a corpus of one pair.
    next(numbered_pairs(files), None)
    return count - header


def stream_pairs(files: PairFiles, digests: Sequence[ByteDigest] | None = None) -> Iterator[list[tuple[str, str]]]:
    """The (source, target) pairs of ``files`` in file order, in lists of at most `CHUNK_PAIRS`.

    ``digests`` (one `ByteDigest` per file) are updated with every byte read.
    """
    pairs = (pair for _, pair in numbered_pairs(files, digests) if pair is not None)
    return chunked(pairs, CHUNK_PAIRS)


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last one shorter), so that a pass holds one list at a time."""
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def _lines(path: Path, digest: ByteDigest | None) -> Iterator[str]:
    return itertools.chain.from_iterable(stream_lines(path, line_stream.BLOCK_BYTES, digest))


# How a pair of aligned lines is checked: the pair, None for a pair to skip, or a ValueError.
LineCheck = Callable[[tuple[Path, Path], int, str, str], "tuple[str, str] | None"]


def numbered_pairs(
    files: PairFiles, digests: Sequence[ByteDigest] | None = None, check_lines: LineCheck = line_pair
) -> Iterator[tuple[int, tuple[str, str] | None]]:
    """(1-based line, pair) of every pair of ``files`` in file order, checked as `stream_pairs` checks them.

    Two line files' lines are checked by ``check_lines(paths, line, source, target)``
    (`pair_files.line_pair` unless a reader has its own rule), whose None (a pair to skip)
    is passed on; the one-file forms always give a pair.
    """
    if digests is not None and len(digests) != len(files.paths):
        raise ValueError(f"digests: expected one per file ({len(files.paths)}), got {len(digests)}")

    def digest_of(index: int) -> ByteDigest | None:
        return None if digests is None else digests[index]

    if files.form == "lines":
        paths = (files.paths[0], files.paths[1])
        source_lines, target_lines = _lines(paths[0], digest_of(0)), _lines(paths[1], digest_of(1))
        number = 0
        for number, (source, target) in enumerate(itertools.zip_longest(source_lines, target_lines), 1):
            if source is None or target is None:
                # One file ended first: count the rest of the other for the error.
                rest = 1 + sum(1 for _ in (target_lines if source is None else source_lines))
                counts = (number - 1, number - 1 + rest) if source is None else (number - 1 + rest, number - 1)
                raise misaligned_files_error(paths, counts)
            yield number, check_lines(paths, number, source, target)
        if number == 0:
            raise ValueError(f"expected at least one line in {paths[0]} and {paths[1]}, got two empty files")
        return
    path = files.paths[0]
    lines = _lines(path, digest_of(0))
    found = 0
    for number, line in enumerate(lines, 1):
        if files.form == "jsonl":
            found += 1
            yield number, json_pair(path, number, line, files.source_language, files.target_language, files.sides)
        elif number == 1 and _is_header(files, line):
            continue
        else:
            found += 1
            yield number, tsv_pair(path, number, line, files.sides)
    if found == 0:
        raise ValueError(f"{path}: expected at least one pair, got none")
