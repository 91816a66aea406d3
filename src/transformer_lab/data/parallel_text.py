"""Read two aligned line files (line i of one belongs with line i of the other).

This is the format of Multi30k (`train.de` / `train.en`) and of the couplet data
(`in.txt` / `out.txt`): UTF-8 text, one sentence per line. The reader is strict, because
a single missing line shifts every later pair and silently ruins a translation corpus:

- both files must exist and be valid UTF-8 (an error names the file and the line);
- both files must have the same number of lines (an error names both files and both
  counts);
- a line that is empty or only whitespace on either side is an error naming the file
  and its 1-based line number, unless `skip_empty=True`, which drops such pairs, counts
  them and logs the count (the count and the line numbers are in the result).

Lines are split on "\\n" only; a "\\r" right before it (Windows line endings) is removed
(one anywhere else is refused, naming its line: classic Mac line ends would read as one line,
as is a NUL, which UTF-16 without a byte-order mark puts beside every ASCII letter),
and so is a UTF-8 byte-order mark at the very start of a file (one anywhere else, left
where files were joined by `cat`, is refused naming its line). Nothing else is changed:
inner and trailing spaces are kept as they are (the couplet files end every line with a
space, and some Multi30k lines have a trailing or a double space), so a reader that wants
normalised text must normalise it itself. A final newline at the end of a file is
optional.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from transformer_lab.data._checks import check_bool

logger = logging.getLogger(__name__)

_BYTE_ORDER_MARK = "\ufeff"

# The most bytes a line may hold (without its end), in every text file read and on stdin:
# 1 MiB, the server's largest request (serve.intake.MAX_BODY_BYTES). A sentence, a couplet or
# a document is far shorter; one line of 45 MB took a minute and 5.6 GB to prepare, and
# training then refused it by model.max_len.
MAX_LINE_BYTES = 1 << 20


@dataclass
class ParallelText:
    """The aligned pairs read from two line files, with what was skipped.

    Attributes:
        pairs: (source line, target line) in file order, without line terminators.
        source_path, target_path: the files read.
        skipped_line_numbers: the 1-based line numbers of the pairs dropped because one
            side was empty (only ever non-empty with `skip_empty=True`).
        header_lines: lines before the first pair that are no pair (a TSV header), so that
            pair k (0-based) of a file without skips is on line `header_lines + k + 1`.
    """

    pairs: list[tuple[str, str]]
    source_path: Path
    target_path: Path
    skipped_line_numbers: list[int] = field(default_factory=list)
    header_lines: int = 0

    @property
    def num_skipped(self) -> int:
        """How many pairs were dropped because one side was empty."""
        return len(self.skipped_line_numbers)

    def __len__(self) -> int:
        """The number of pairs kept."""
        return len(self.pairs)


def read_lines(path: str | os.PathLike[str]) -> list[str]:
    """Read a UTF-8 file as a list of lines, without their terminators.

    Lines end at "\\n"; one "\\r" before it is removed (CRLF files are accepted); a
    byte-order mark at the start of the file is removed; the final newline is optional.
    Nothing else is stripped. A named pipe or a device is read once to its end. A missing
    file is a FileNotFoundError; a folder, or a file that cannot be read (no permission),
    and invalid UTF-8 are ValueErrors naming the file
    (and, for bad bytes, the 1-based line and the byte column).
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"expected a text file, got {str(path)!r}, which is a folder")
    if not path.exists():
        raise FileNotFoundError(f"expected an existing text file, got {str(path)!r}, which does not exist")
    try:
        # Read once to its end, so a named pipe, /dev/stdin or a shell's <(command) reads as a file does.
        data = path.read_bytes()
    except OSError as error:
        raise ValueError(f"{path}: expected a readable text file, got an error: {error.strerror or error}") from None
    return decode_lines(data, str(path))


def utf8_text(data: bytes, name: str, first_line: int = 1) -> str:
    """``data`` decoded as UTF-8; invalid bytes are a ValueError naming ``name``, the line and the byte column.

    ``first_line`` is the 1-based number of the first line of ``data`` (a piece of a streamed file).
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line_number = first_line + data.count(b"\n", 0, error.start)
        line_start = data.rfind(b"\n", 0, error.start) + 1
        utf16 = first_line == 1 and error.start == 0 and data[:2] in (b"\xff\xfe", b"\xfe\xff")
        raise ValueError(
            f"{name}: line {line_number}: expected UTF-8 text, got invalid byte(s) "
            f"{data[error.start : error.end]!r} at byte column {error.start - line_start + 1} "
            f"({error.reason})"
            + ("; it starts with a UTF-16 byte-order mark: convert it, e.g. iconv -f UTF-16 -t UTF-8" if utf16 else "")
        ) from None


def line_too_long(name: str, line_number: int, size: int | None) -> ValueError:
    """The error for a line of ``size`` bytes, past `MAX_LINE_BYTES`: ``name`` (a file, "stdin") and the line.

    ``size`` None: a line of a stream, not read to its end (a pipe's may never end).
    """
    got = f"one of {size:,} bytes" if size is not None else "a longer one"
    return ValueError(
        f"{name}: line {line_number}: expected lines of at most {MAX_LINE_BYTES:,} bytes, got {got}; "
        "split it or leave it out"
    )


def _refuse_long_line(lines: list[str], name: str, first_line: int) -> None:
    # A character is 1 to 4 bytes: only a line of over a quarter of the bound in characters is measured.
    if max(map(len, lines), default=0) <= MAX_LINE_BYTES // 4:
        return
    for offset, line in enumerate(lines):
        if len(line) > MAX_LINE_BYTES // 4 and (size := len(line.encode("utf-8"))) > MAX_LINE_BYTES:
            raise line_too_long(name, first_line + offset, size)


def decode_lines(data: bytes, name: str, first_line: int = 1, file_start: bool = True) -> list[str]:
    """Split UTF-8 bytes into lines as `read_lines` does; `name` (a file, "stdin") goes into errors.

    A streamed file comes in pieces cut after a newline: `first_line` is the 1-based number
    of the piece's first line (for errors), and only the piece at `file_start` may begin
    with a byte-order mark. A line past `MAX_LINE_BYTES` is a ValueError naming it.
    """
    text = utf8_text(data, name, first_line)
    if file_start and text.startswith(_BYTE_ORDER_MARK):
        text = text[len(_BYTE_ORDER_MARK) :]
    if text == "":
        return []
    lines = text.split("\n")
    # A file that ends with a newline leaves one empty piece after it, which is no line.
    if lines[-1] == "":
        lines.pop()
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    if len(data) > MAX_LINE_BYTES:  # else no line of the piece can be longer
        _refuse_long_line(lines, name, first_line)
    if "\r" in text:  # once per piece; found, the line is looked for
        _refuse_lone_carriage_return(lines, name, first_line)
    if "\x00" in text:
        _refuse_nul(lines, name, first_line)
    if _BYTE_ORDER_MARK in text:  # the file's own at its start is gone: any left is inside it
        _refuse_byte_order_mark(lines, name, first_line)
    return lines


def _refuse_lone_carriage_return(lines: list[str], name: str, first_line: int) -> None:
    """A "\\r" left inside a line: old Mac line ends, read as one line they would merge many texts into one."""
    for number, line in enumerate(lines, first_line):
        if "\r" in line:
            column = line.index("\r") + 1
            raise ValueError(
                f"{name}: line {number}: expected lines ending in \\n or \\r\\n, got a carriage return (\\r) inside "
                f"the line at column {column}; a file with \\r line ends (classic Mac) needs them "
                "turned into \\n first, e.g. tr '\\r' '\\n'"
            )


def _refuse_nul(lines: list[str], name: str, first_line: int) -> None:
    """A NUL is valid UTF-8 but no text holds one: UTF-16 without a byte-order mark decodes as
    ASCII with a NUL beside every letter, which would be learned and translated as text."""
    for number, line in enumerate(lines, first_line):
        if "\x00" in line:
            column = line.index("\x00") + 1
            utf16 = line.count("\x00") * 3 >= len(line)  # UTF-16 puts a NUL beside every ASCII character
            raise ValueError(
                f"{name}: line {number}: expected text, got a NUL character (\\x00) at column {column}"
                + (
                    "; NULs beside the characters are UTF-16 without a byte-order mark: convert it, "
                    "e.g. iconv -f UTF-16LE -t UTF-8"
                    if utf16
                    else "; remove it (a text file holds none)"
                )
            )


def _refuse_byte_order_mark(lines: list[str], name: str, first_line: int) -> None:
    """A U+FEFF past a file's start: what `cat a.txt b.txt` leaves of b.txt's mark, which would be
    read as part of the line's first word (another token, another couplet character)."""
    for number, line in enumerate(lines, first_line):
        if _BYTE_ORDER_MARK in line:
            column = line.index(_BYTE_ORDER_MARK) + 1
            raise ValueError(
                f"{name}: line {number}: expected a byte-order mark (U+FEFF) only at the start of the file, got one "
                f"at column {column}, as where files were joined (cat); remove it, e.g. sed 's/\\xEF\\xBB\\xBF//g'"
            )


def misaligned_files_error(paths: tuple[Path, Path], counts: tuple[int, int]) -> ValueError:
    """The error for two line files of ``counts`` lines, not one a line of the other.

    Blank lines at the end of the longer file (an editor's, or ``echo >>``) are said to be
    where it runs past the other: the counts alone read as a misalignment somewhere inside.
    """
    message = (
        f"expected aligned files with the same number of lines, got {counts[0]} line(s) in {paths[0]} "
        f"and {counts[1]} line(s) in {paths[1]}"
    )
    longer = paths[0] if counts[0] > counts[1] else paths[1]
    blank = _trailing_blank_lines(longer)
    if blank:
        message += f"; the last {blank} line(s) of {longer} are blank: remove them if they are the difference"
    return ValueError(message)


def _trailing_blank_lines(path: Path, tail_bytes: int = 1 << 16) -> int:
    """How many of the lines at the end of ``path`` (within its last ``tail_bytes``) hold only whitespace."""
    try:
        with open(path, "rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - tail_bytes))
            lines = file.read().split(b"\n")
    except OSError:  # a stream (stdin, a FIFO) read once already: its end cannot be read again
        return 0
    if lines and lines[-1] == b"":  # the final newline ends the last line; it starts none
        lines.pop()
    count = 0
    for line in reversed(lines[1:]):  # the first may be a line cut by the tail's start
        if line.strip():
            break
        count += 1
    return count


def read_parallel_text(
    source_path: str | os.PathLike[str],
    target_path: str | os.PathLike[str],
    skip_empty: bool = False,
    *,
    skip_option: str | None = "skip_empty",
) -> ParallelText:
    """Read two aligned line files into (source, target) pairs; see the module docstring.

    Args:
        source_path: the file of source sentences, one per line.
        target_path: the file of target sentences, aligned line by line with the source.
        skip_empty: drop the pairs where either side is empty or only whitespace (their
            number is logged as a warning and returned in the result) instead of raising.
        skip_option: the name the caller gives `skip_empty` (e.g. the couplet reader's
            `skip_invalid`), so that the error's advice names an option the user has; None
            where the user has none.

    Returns:
        a `ParallelText` with the pairs and the line numbers of the pairs skipped.

    Raises:
        FileNotFoundError: a file does not exist.
        ValueError: invalid UTF-8, an empty file, different line counts, or (without
            `skip_empty`) an empty line; each message names the file and the line.
    """
    check_bool("skip_empty", skip_empty)
    source_path, target_path = Path(source_path), Path(target_path)
    source_lines = read_lines(source_path)
    target_lines = read_lines(target_path)
    if len(source_lines) != len(target_lines):
        raise misaligned_files_error((source_path, target_path), (len(source_lines), len(target_lines)))
    if not source_lines:
        raise ValueError(f"expected at least one line in {source_path} and {target_path}, got two empty files")

    pairs: list[tuple[str, str]] = []
    skipped: list[int] = []
    for number, (source, target) in enumerate(zip(source_lines, target_lines, strict=True), start=1):
        pair = non_empty_pair((source_path, target_path), number, source, target, skip_empty, skip_option)
        if pair is None:
            skipped.append(number)
        else:
            pairs.append(pair)
    log_empty_pairs(skipped, source_path, target_path)
    return ParallelText(pairs, source_path, target_path, skipped)


def non_empty_pair(
    paths: tuple[Path, Path], number: int, source: str, target: str, skip_empty: bool, skip_option: str | None
) -> tuple[str, str] | None:
    """Line ``number``'s pair; None where a side is empty or only whitespace and ``skip_empty``, else an error."""
    empty_path = paths[0] if not source.strip() else paths[1] if not target.strip() else None
    if empty_path is None:
        return source, target
    if not skip_empty:
        line = source if empty_path == paths[0] else target
        advice = f", or pass {skip_option}=True to drop (and count) such pairs" if skip_option else ""
        raise ValueError(
            f"{empty_path}: line {number}: expected a non-empty sentence, got {line!r}; fix the file{advice}"
        )
    return None


def log_empty_pairs(skipped: list[int], source_path: Path, target_path: Path) -> None:
    """The warning for the pairs skipped because a side was empty (their 1-based lines), if any."""
    if skipped:
        logger.warning(
            "skipped %d pair(s) with an empty side in %s / %s (first at line %d)",
            len(skipped),
            source_path,
            target_path,
            skipped[0],
        )
