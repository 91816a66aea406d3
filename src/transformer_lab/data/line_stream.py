"""A text file read in bounded pieces, exactly as strictly as `parallel_text.read_lines` reads it whole.

A corpus of millions of lines must not be held in memory to be checked. `stream_lines`
reads a file in blocks of a few MiB, cuts each block after its last newline, and decodes
and splits the complete lines with the same rules as `read_lines` (UTF-8 checked, an error
naming the file, the 1-based line and the byte column; CRLF and a byte-order mark at the
start accepted; the final newline optional; a line past `MAX_LINE_BYTES` refused before it
is held whole). It can feed the bytes it reads to a hash, so that the file's sha256 costs
no second pass. `count_lines` counts the lines without decoding them, to plan a pass (how
many pairs, which are held out) before making it.
"""

from __future__ import annotations

import errno
import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

from transformer_lab.data.parallel_text import MAX_LINE_BYTES, decode_lines, line_too_long
from transformer_lab.write_errors import describe_os_error

BLOCK_BYTES = 1 << 22  # 4 MiB: large enough to amortise the calls, small beside any corpus
_BYTE_ORDER_MARK = b"\xef\xbb\xbf"
# The bytes of an unfinished line past which it is too long whatever its end: a byte-order
# mark before it and a CR before its newline are no part of it.
_LONGEST_PENDING = MAX_LINE_BYTES + len(_BYTE_ORDER_MARK) + 1


class ByteDigest(Protocol):
    """What a stream feeds the bytes it reads to: a hashlib object, or one that also counts them."""

    def update(self, data: bytes, /) -> None: ...


def checked_file(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path, refused as `read_lines` refuses it when missing or a folder (or a pipe, read twice)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"expected a text file, got {str(path)!r}, which is a folder")
    if not path.exists():
        raise FileNotFoundError(f"expected an existing text file, got {str(path)!r}, which does not exist")
    if not path.is_file():
        # A corpus is read more than once (counted, then streamed): a pipe would be empty the second time.
        raise ValueError(
            f"expected a regular file, got {str(path)!r}, which is a named pipe or a device; write it to a file first"
        )
    return path


def count_lines(path: str | os.PathLike[str]) -> int:
    """The number of lines `read_lines` would return for ``path``, counted on bytes (nothing decoded)."""
    path = checked_file(path)
    count = 0
    last = b""
    first = True
    with path.open("rb") as file:
        while block := file.read(BLOCK_BYTES):
            if first and block.startswith(_BYTE_ORDER_MARK):
                block = block[len(_BYTE_ORDER_MARK) :]
            first = False
            if block:
                count += block.count(b"\n")
                last = block[-1:]
    # A last line without a newline is a line too.
    return count + int(last not in (b"", b"\n"))


def _line_size(start: bytes, file: BinaryIO, block_bytes: int, file_start: bool) -> int:
    """The bytes of the line ``start`` begins, read on to its end without holding it, as `decode_lines` counts them."""
    size = len(start) - (len(_BYTE_ORDER_MARK) if file_start and start.startswith(_BYTE_ORDER_MARK) else 0)
    last = start[-1:]
    while block := file.read(block_bytes):
        end = block.find(b"\n")
        if end >= 0:
            size, last = size + end, block[end - 1 : end] if end else last
            break
        size, last = size + len(block), block[-1:]
    return size - int(last == b"\r")


def stream_lines(
    path: str | os.PathLike[str], block_bytes: int | None = None, digest: ByteDigest | None = None
) -> Iterator[list[str]]:
    """The lines of ``path`` in order, a list per block of ``block_bytes`` read (None: BLOCK_BYTES), unterminated.

    Every line is checked as `read_lines` checks it; an invalid byte is a ValueError naming
    the file and the line. ``digest`` (a hashlib object or any `ByteDigest`) is updated with every byte read.
    """
    path = checked_file(path)
    try:
        file = path.open("rb")
    except OSError as error:
        raise ValueError(f"{path}: expected a readable text file, got an error: {error.strerror or error}") from None
    with file:
        yield from line_blocks(file, str(path), block_bytes, digest)


def line_blocks(
    file: BinaryIO,
    name: str,
    block_bytes: int | None = None,
    digest: ByteDigest | None = None,
    *,
    as_written: bool = False,
) -> Iterator[list[str]]:
    """The lines of an open binary ``file`` (``name`` in errors) as `stream_lines` gives a path's.

    ``as_written``: a pipe or a terminal, read as its bytes arrive (``read1``), so that each
    line comes once it is written, not once a block is full; a line past the bound is refused
    without reading on to its end, which such a stream may never reach.
    """
    block_bytes = BLOCK_BYTES if block_bytes is None else block_bytes
    read: Callable[[int], bytes] = getattr(file, "read1", file.read) if as_written else file.read
    next_line = 1
    pending = b""
    file_start = True
    while True:
        if len(pending) > _LONGEST_PENDING:  # refused before it is held whole: memory stays bounded
            size = None if as_written else _line_size(pending, file, block_bytes, file_start)
            raise line_too_long(name, next_line, size)
        try:
            block = read(block_bytes)
        except OSError as error:
            # A stdin opened for writing only (`0> FILE`): EBADF from the system, UnsupportedOperation from Python.
            if error.errno == errno.EBADF or isinstance(error, io.UnsupportedOperation):
                raise ValueError(f"{name}: could not read it: it is not open for reading") from None
            raise ValueError(f"{name}: could not read it ({describe_os_error(error)})") from None
        if digest is not None and block:
            digest.update(block)
        if not block:
            break
        data = pending + block
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            pending = data
            continue
        pending = data[cut:]
        lines = decode_lines(data[:cut], name, first_line=next_line, file_start=file_start)
        file_start = False
        next_line += len(lines)
        yield lines
    if pending:
        lines = decode_lines(pending, name, first_line=next_line, file_start=file_start)
        if lines:
            yield lines
