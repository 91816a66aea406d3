"""Fetch a file by URL into a data folder: pinned, checked, resumable, atomic, with a progress bar.

Used by `transformer-lab download` and the dataset downloaders; nothing in the test suite
or in normal runs downloads anything: the tests serve their own files from a local HTTP
server on 127.0.0.1.

A download never leaves a partial or unverified file under its final name. The body goes
to `.<name>.download.part` beside the destination; an interrupted transfer keeps it, and
the next call asks the server only for the rest (an HTTP Range request; a server that
answers with the whole file restarts it, and one that answers 416 Range Not Satisfiable
with the kept size as the full size, ``Content-Range: bytes */N``, has nothing left to
send: the kept body is whole). The complete body is decompressed (with `gunzip`, into
`.<name>.XXXXXXXX.part`) and hashed, and only a file whose hash matches is renamed into
place (`os.replace`, atomic on one file system). On a mismatch the partial file is deleted
and a ValueError names the URL, the file, the expected and the actual hash; a call stopped
while it decompresses or hashes (Ctrl-C, SIGTERM) removes the decompressed part and keeps
the body, so the next one only decompresses again. An existing file whose hash already
matches is kept without any network access; one whose hash does not stays until a
verified file replaces it (taking its mode), so a failed download never leaves less than
there was.

One process downloads a file at a time: it holds the writer lock beside it
(`file_lock.writer_lock`, `.<name>.lock`), and a second waits for the first and then
finds the file. Under that lock no one else writes the file's parts, so decompressed
parts that a killed process left (SIGKILL, out of memory) are removed. The hash is known
only at the end, so the body and its decompressed bytes are each bounded while they are
written (`max_bytes`, by default `MAX_DOWNLOAD_BYTES`; a registry passes its own, above its
largest file): a server that sends more, or a small gzip body that expands without end, is
refused as soon as it passes the bound, and what it wrote is deleted.

The check is a sha256, except where a source publishes only another digest: an MD5
(`expected_md5`, the AG News training file), or the git blob id under which the file is
committed (`expected_git_blob`: the sha1 of `blob <size>\\0` and the bytes, what
`git hash-object` prints). MD5 guards against a truncated or wrong file, not against
tampering.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import http.client
import logging
import math
import os
import re
import stat
import urllib.error
import urllib.parse
import urllib.request
import zlib
from pathlib import Path
from typing import IO

from tqdm.auto import tqdm

from transformer_lab.atomic_files import create_temporary_file, replace_file
from transformer_lab.data._checks import check_integer
from transformer_lab.file_lock import remove_abandoned_writer_locks, writer_lock
from transformer_lab.folders import DISK_ERRNOS, writes_refused_as
from transformer_lab.shortened import shortened

logger = logging.getLogger(__name__)

_CHUNK_BYTES = 1 << 20
# The bound of a download's body and of its decompressed bytes where the caller names none.
MAX_DOWNLOAD_BYTES = 2 << 30
_SCHEMES = ("http", "https", "file")
# Digest name -> hex digits, in the order the arguments of download_file give them.
_DIGEST_DIGITS = {"sha256": 64, "md5": 32, "git-blob": 40}
PARTIAL_SUFFIX = ".download.part"
# A decompressed part: ".NAME." + 8 letters, digits or "_" + ".part" (tempfile's names were of these too).
DECOMPRESSED_SUFFIX = ".part"
_DECOMPRESSED_NAME = r"\.{name}\.[a-z0-9_]{{8}}\.part"
# How much of a body that failed its check is read to tell an HTML page, and how much of it is quoted.
_HTML_SNIFF_BYTES = 512
_HTML_QUOTED_CHARACTERS = 60
# The longest wait on one connection: an hour, far beyond any server that still answers,
# and far below what the socket layer can hold (1e308 s raised OverflowError there).
MAX_TIMEOUT_SECONDS = 3600.0


def _digest_of_file(path: str | os.PathLike[str], algorithm: str) -> str:
    if algorithm == "git-blob":
        # git hashes a header with the size before the bytes (`git hash-object`).
        digest = hashlib.sha1(f"blob {os.path.getsize(path)}\0".encode("ascii"), usedforsecurity=False)
    else:
        digest = hashlib.new(algorithm)
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(_CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_of_file(path: str | os.PathLike[str]) -> str:
    """The sha256 of a file's bytes, as 64 lowercase hex digits."""
    return _digest_of_file(path, "sha256")


def _check_hex_digest(name: str, value: object, algorithm: str, digits: int) -> str:
    """Return `value` lowercased if it is `digits` hex digits, else raise a ValueError naming `name`."""
    if not isinstance(value, str) or len(value) != digits or any(c not in "0123456789abcdefABCDEF" for c in value):
        raise ValueError(f"{name} must be a {algorithm} of {digits} hex digits, got {value!r}")
    return value.lower()


def _expected_digest(
    expected_sha256: object, expected_md5: object, expected_git_blob: object = None
) -> tuple[str, str]:
    """(algorithm, expected hex digest) from the three arguments, exactly one of which is given."""
    given = {
        name: value
        for name, value in zip(_DIGEST_DIGITS, (expected_sha256, expected_md5, expected_git_blob))
        if value is not None
    }
    if len(given) != 1:
        raise ValueError(
            f"expected_sha256, expected_md5 or expected_git_blob: expected exactly one checksum, got "
            f"expected_sha256={expected_sha256!r} and expected_md5={expected_md5!r}"
            + ("" if expected_git_blob is None else f" and expected_git_blob={expected_git_blob!r}")
        )
    ((algorithm, value),) = given.items()
    argument = "expected_" + algorithm.replace("-", "_")
    return algorithm, _check_hex_digest(argument, value, algorithm, _DIGEST_DIGITS[algorithm])


def _check_url(url: object) -> str:
    if not isinstance(url, str):
        raise ValueError(f"url must be a str, got {url!r} ({type(url).__name__})")
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in _SCHEMES:
        raise ValueError(f"url must start with one of {', '.join(s + '://' for s in _SCHEMES)}, got {url!r}")
    return url


class TooLargeError(ValueError):
    """A body or its decompressed bytes passed the download's ``max_bytes``."""


def _too_large(url: str, what: str, max_bytes: int) -> TooLargeError:
    return TooLargeError(
        f"{url}: expected at most {max_bytes:,} bytes {what} (max_bytes), got more; "
        "what was written is deleted, nothing replaced"
    )


def _body_flags(offset: int) -> int:
    """The flags that open a download's body: appended to after ``offset`` bytes, else emptied; never through a link."""
    return os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_APPEND if offset else os.O_TRUNC)


def _check_local_source(url: str) -> None:
    """Refuse a file:// address of a named pipe or a device: reading one waits for a writer, and no timeout applies."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "file":
        return
    path = Path(urllib.request.url2pathname(parts.path))
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # a missing file is said by the read itself, naming the address
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise ValueError(f"{url}: expected a file to download, got a named pipe or a device, which may never end")


def _copy_response(url: str, partial: Path, timeout: float, progress: bool, max_bytes: int) -> bool:
    """Stream the body at `url` into `partial`, continuing after the bytes it already holds.

    An interrupted transfer keeps what arrived (a ConnectionError says so): the next call
    asks only for the rest. Returns whether the server said where the body ends (its length,
    or a 416 for kept bytes that are the whole file): without it, a cut connection looks
    like the end of the body.
    """
    if partial.is_symlink():
        # No download writes a link: writing through it would overwrite its target (a
        # user's file), so the link is removed, never followed, and the body starts anew.
        logger.warning("%s: expected a downloaded body, got a symbolic link; removed, never followed", partial)
        partial.unlink()
    elif partial.exists() and not partial.is_file():
        raise ValueError(f"{partial}: expected the body of an unfinished download, got a folder or device; remove it")
    _check_local_source(url)
    offset = partial.stat().st_size if partial.exists() else 0
    request = urllib.request.Request(url)
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (scheme checked)
            if offset and getattr(response, "status", None) != 206:
                whole = response.headers.get("Content-Length")
                if whole and whole.isdigit() and int(whole) < offset:
                    # Shorter than the kept prefix of the file, it is not the file (a proxy's or a sign-in
                    # page): written from the start, it would replace hours of kept bytes.
                    raise _NotTheFile(int(whole))
                if response.headers.get_content_type() == "text/html":
                    # The same page sent in chunks has no length to compare: its type says it.
                    raise _NotTheFile(None)
                # The server sends the whole file (no ranges, or a file:// URL): start again.
                logger.info("%s: the server sent the whole file; restarting the download", url)
                offset = 0
            elif offset:
                start = _range_start(response.headers.get("Content-Range"))
                if start == 0:  # the file from its start, though sent as a part
                    logger.info("%s: the server sent the file from its start; restarting the download", url)
                    offset = 0
                elif start is not None and start != offset:
                    # Appended after the kept bytes, it made a file that failed its hash: kept bytes and all lost.
                    raise _NotContinued(start)
            length = response.headers.get("Content-Length")
            total = offset + int(length) if length and length.isdigit() else None
            with (
                # O_NOFOLLOW: a link put there since the check above is refused, not written through.
                open(os.open(partial, _body_flags(offset), 0o666), "ab" if offset else "wb") as file,
                tqdm(
                    total=total,
                    initial=offset,
                    desc=partial.name.removeprefix(".").removesuffix(PARTIAL_SUFFIX),
                    unit="B",
                    unit_scale=True,
                    unit_divisor=1024,
                    disable=None if progress else True,  # None: only on a terminal
                    leave=False,
                ) as bar,
            ):
                received = offset  # counted here: a disabled bar counts nothing
                # read1: what has arrived, up to a chunk; read() waited for a whole MiB, which an
                # interruption or a stalled connection then lost, kept bytes and progress alike.
                read = getattr(response, "read1", response.read)
                for chunk in iter(lambda: read(_CHUNK_BYTES), b""):
                    file.write(chunk)
                    bar.update(len(chunk))
                    received += len(chunk)
                    if received > max_bytes:
                        raise _too_large(url, "downloaded", max_bytes)
            if total is not None and received < total:
                # http.client ends a body cut short without an error; the length says so.
                raise http.client.IncompleteRead(b"", total - received)
            return total is not None
    except _NotTheFile as error:
        answer = (
            "an HTML page for the whole file"
            if error.size is None
            else f"an answer of {error.size} bytes for the whole file, fewer than those kept"
        )
        raise ConnectionError(
            f"{url}: expected the rest of the file after the {offset} bytes kept in {partial}, got {answer}, so not "
            "the file (a proxy's or a sign-in page?); the kept bytes are left as they were and the same command "
            "resumes from there"
        ) from None
    except _NotContinued as error:
        logger.info(
            "%s: the server sent bytes from %d on, not the rest after the %d kept in %s; restarting",
            url,
            error.start,
            offset,
            partial,
        )
        partial.unlink()
        return _copy_response(url, partial, timeout, progress, max_bytes)
    except urllib.error.HTTPError as error:
        if error.code == 416 and offset:
            full_size = _full_size(error.headers.get("Content-Range") if error.headers else None)
            if full_size == offset:
                # Nothing is left to send: an earlier call received the whole body and was
                # stopped after it (while decompressing or hashing). The check that follows decides.
                logger.info("%s: the %d bytes kept in %s are the whole file; not fetched again", url, offset, partial)
                return True
            # The kept bytes are not a prefix the server can continue (or it does not say
            # that they are the whole file): start from nothing.
            logger.info(
                "%s: the server cannot continue the %d bytes kept in %s (HTTP 416, full size %s); restarting",
                url,
                offset,
                partial,
                "not given" if full_size is None else f"{full_size} bytes",
            )
            partial.unlink()
            return _copy_response(url, partial, timeout, progress, max_bytes)
        if error.code == 404:
            raise FileNotFoundError(f"{url}: expected a file to download, got HTTP 404 Not Found") from None
        # urllib's reason for a redirect loop spans lines; an error the API raises is one line, as the command's.
        raise ConnectionError(f"{url}: download failed with HTTP {error.code} {_one_line(error.reason)}") from None
    except urllib.error.URLError as error:
        if isinstance(error.reason, FileNotFoundError):
            raise FileNotFoundError(f"{url}: expected a file to download, got no such file") from None
        raise ConnectionError(f"{url}: download failed ({_one_line(error.reason)})") from None
    except (OSError, TimeoutError, http.client.HTTPException) as error:
        if isinstance(error, OSError) and error.errno in DISK_ERRNOS:
            raise  # the disk refused the body (full, read-only), not the connection: the caller names it
        kept = partial.stat().st_size if partial.exists() else 0
        raise ConnectionError(
            f"{url}: download interrupted ({type(error).__name__}: {error}); {kept} bytes are kept in "
            f"{partial} and the same command resumes from there"
        ) from None


def _one_line(reason: object) -> str:
    """``reason`` (urllib's, a str or an exception) as one line, its runs of spaces and line breaks one space."""
    return " ".join(str(reason).split())


class _NotTheFile(Exception):
    """A whole-file answer to a resumed download that is not the file: shorter than the bytes already
    kept of it (``size``), or a web page (``size`` None: sent in chunks, its length unknown)."""

    def __init__(self, size: int | None) -> None:
        super().__init__(size)
        self.size = size


class _NotContinued(Exception):
    """A 206 answer to a resumed download whose range does not start where the kept bytes end."""

    def __init__(self, start: int) -> None:
        super().__init__(start)
        self.start = start


def _range_start(content_range: str | None) -> int | None:
    """Where a 206 answer's ``Content-Range: bytes START-END/SIZE`` starts, else None."""
    match = re.fullmatch(r"\s*bytes\s+(\d+)-\d+/(\d+|\*)\s*", content_range or "")
    return int(match.group(1)) if match else None


def _full_size(content_range: str | None) -> int | None:
    """The full size of a file in a 416 answer's ``Content-Range: bytes */N``, else None."""
    match = re.fullmatch(r"\s*bytes\s+\*/(\d+)\s*", content_range or "")
    return int(match.group(1)) if match else None


class _GzipEndMissing(ValueError):
    """A gzip body that stops before its stream's end: a short file, or a connection cut before the end."""


def _gunzip(url: str, compressed: IO[bytes], destination: IO[bytes], max_bytes: int) -> None:
    """Decompress the gzip stream `compressed` into `destination`, at most `max_bytes`; bad gzip is a ValueError."""
    written = 0
    try:
        with gzip.GzipFile(fileobj=compressed, mode="rb") as archive:
            for chunk in iter(lambda: archive.read(_CHUNK_BYTES), b""):
                written += len(chunk)
                if written > max_bytes:
                    raise _too_large(url, "decompressed", max_bytes)
                destination.write(chunk)
    except EOFError as error:
        raise _GzipEndMissing(
            f"{url}: expected gzip-compressed data, got data that does not decompress ({error})"
        ) from None
    except (gzip.BadGzipFile, zlib.error) as error:
        raise ValueError(f"{url}: expected gzip-compressed data, got data that does not decompress ({error})") from None


def _html_page(body: Path) -> str | None:
    """The start of ``body`` as one line if it is an HTML page (an error or login page sent with 200), else None."""
    with open(body, "rb") as file:
        start = file.read(_HTML_SNIFF_BYTES)
    text = start.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if not text.lower().startswith(("<!doctype html", "<html")):
        return None
    return shortened(" ".join(text.split()), _HTML_QUOTED_CHARACTERS)


def _unexpected_page(destination: Path, url: str, page: str) -> ValueError:
    return ValueError(
        f"{destination.name} (from {url}): expected the file, got an HTML page ({page!r}): the server, a proxy "
        f"or a sign-in page answered with a page instead; the downloaded file was deleted, {destination} was "
        "not written"
    )


def partial_path(destination: str | os.PathLike[str]) -> Path:
    """Where the body of `destination` is kept while it downloads (and after an interruption)."""
    destination = Path(destination)
    return destination.parent / f".{destination.name}{PARTIAL_SUFFIX}"


def check_timeout(timeout: float) -> float:
    """``timeout`` as float seconds: a finite number in (0, :data:`MAX_TIMEOUT_SECONDS`], else a ``ValueError``."""
    if (
        not isinstance(timeout, (int, float))
        or isinstance(timeout, bool)
        or not (math.isfinite(timeout) and 0 < timeout <= MAX_TIMEOUT_SECONDS)
    ):
        raise ValueError(f"timeout: expected a number of seconds in (0, {MAX_TIMEOUT_SECONDS:.0f}], got {timeout!r}")
    return float(timeout)


def download_file(
    url: str,
    destination: str | os.PathLike[str],
    expected_sha256: str | None = None,
    gunzip: bool = False,
    timeout: float = 60.0,
    expected_md5: str | None = None,
    expected_git_blob: str | None = None,
    progress: bool = True,
    max_bytes: int = MAX_DOWNLOAD_BYTES,
) -> Path:
    """Download `url` to `destination` atomically, resuming a partial body, and check its hash.

    If `destination` already exists with the expected hash, nothing is fetched. If it
    exists with another hash it is downloaded again (a warning says so) and kept until
    the verified file replaces it.

    Args:
        url: an http://, https:// or file:// address.
        destination: the final path of the (decompressed) file; its folder is created.
        expected_sha256: the sha256 of the final file, that is of the decompressed bytes
            when `gunzip` is set.
        expected_md5, expected_git_blob: instead of `expected_sha256`, for sources that
            publish only an MD5 or a git blob id; exactly one of the three must be given.
        gunzip: the body is gzip data; store it decompressed.
        timeout: seconds to wait on the connection before giving up.
        progress: show a progress bar (on a terminal only).
        max_bytes: the most bytes the body, and the file decompressed from it, may hold.

    Returns:
        `destination` as a Path.

    Raises:
        ValueError: a bad argument, data that is not gzip when `gunzip`, or a hash
            mismatch (the message names the file, the expected and the actual hash; the
            downloaded bytes are deleted).
        FileNotFoundError: the server has no such file (HTTP 404).
        ConnectionError: any other network failure; an interrupted body is kept for the
            next call to resume.
        FolderWriteError: the system refused to make the folder or write the file (a
            read-only or full disk, a quota; for the folder and its lock, also a permission);
            the message names the folder or file, the errno's meaning and name.
    """
    url = _check_url(url)
    algorithm, expected = _expected_digest(expected_sha256, expected_md5, expected_git_blob)
    timeout = check_timeout(timeout)
    max_bytes = check_integer("max_bytes", max_bytes, minimum=1)
    destination = Path(destination)
    # Checked before the lock too: a complete data folder on a read-only disk needs no lock file.
    if _already_present(destination, algorithm, expected):
        _remove_parts_of_present(destination)
        return destination
    with contextlib.ExitStack() as held:
        # A folder that cannot be made or written (read-only, full, not this user's) is the
        # folder's fault: named, as every refused output is, not a bare errno.
        with writes_refused_as(destination.parent, "nothing was downloaded", permission=True):
            destination.parent.mkdir(parents=True, exist_ok=True)
            held.enter_context(writer_lock(destination, wait=True, option="destination"))
        with writes_refused_as(destination, "the files complete before it are kept"):
            # Again under the lock: a download of the same file that just finished wrote it meanwhile.
            if _already_present(destination, algorithm, expected, warn=True):
                return destination
            _remove_abandoned_parts(destination)
            _fetch(url, destination, algorithm, expected, gunzip, timeout, progress, max_bytes)
    return destination


def _already_present(destination: Path, algorithm: str, expected: str, warn: bool = False) -> bool:
    """Whether ``destination`` exists with the expected digest; ``warn``: say when it exists with another."""
    if destination.is_dir():
        # Hashing it said only "[Errno 21] Is a directory"; the rename into place would fail the same way.
        raise ValueError(
            f"{destination}: expected a file to download (or nothing there yet), got a folder; move it away"
        )
    if not destination.exists():
        return False
    if not destination.is_file():
        # A named pipe or a device: hashing it waited for a writer that never came, with no word.
        raise ValueError(
            f"{destination}: expected a file to download (or nothing there yet), got something that is not a "
            "plain file (a named pipe?); move it away"
        )
    actual = _digest_of_file(destination, algorithm)
    if actual == expected:
        logger.info("%s is already present with the expected %s; not downloading", destination, algorithm)
        return True
    if warn:
        logger.warning(
            "%s exists but its %s is %s, expected %s; downloading it again (the file is kept until a "
            "verified copy replaces it)",
            destination,
            algorithm,
            actual,
            expected,
        )
    return False


def _remove_parts_of_present(destination: Path) -> None:
    """Remove what an interrupted download of ``destination`` left, now that the verified file is there.

    Its resumable body could otherwise stay beside the file, hidden and as large, for good. Left where
    a download of it runs (its lock is held) or the folder cannot be written (a read-only data folder).
    """
    body = partial_path(destination)
    if not body.exists() and not any(destination.parent.glob(f".{destination.name}.*{DECOMPRESSED_SUFFIX}")):
        return
    try:
        with writer_lock(destination, wait=False, option="destination"):
            if body.is_file() and not body.is_symlink():
                body.unlink()
                logger.info("removed %s, left by a download of %s that did not finish", body, destination.name)
            _remove_abandoned_parts(destination)
    except (ValueError, OSError) as error:
        logger.debug("kept the unfinished parts of %s: %s", destination, error)


def _remove_abandoned_parts(destination: Path) -> None:
    """Remove the decompressed parts of ``destination`` that a killed download left; call it holding its lock."""
    pattern = re.compile(_DECOMPRESSED_NAME.format(name=re.escape(destination.name)))
    body = partial_path(destination)  # its name fits the pattern too ("download"), and it resumes: kept
    for path in destination.parent.glob(f".{destination.name}.*{DECOMPRESSED_SUFFIX}"):
        if path != body and pattern.fullmatch(path.name) and path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)
            logger.info("removed %s, left unfinished by a download that no longer runs", path)
    remove_abandoned_writer_locks(destination.parent)  # the locks such downloads held, ours excepted


def _fetch(
    url: str,
    destination: Path,
    algorithm: str,
    expected: str,
    gunzip: bool,
    timeout: float,
    progress: bool,
    max_bytes: int,
) -> None:
    """Download, decompress, check and rename into place; the caller holds ``destination``'s writer lock."""
    # The body's file has a fixed name so that a later call finds and continues it; it
    # lives beside the destination so that the final rename stays on one file system
    # (and is therefore atomic). Its name starts with a dot and ends in ".part", so
    # nothing mistakes it for data.
    partial = partial_path(destination)
    logger.info("downloading %s to %s", url, destination)
    try:
        end_known = _copy_response(url, partial, timeout, progress, max_bytes)
    except (FileNotFoundError, TooLargeError):
        partial.unlink(missing_ok=True)
        raise
    decompressed: Path | None = None
    try:
        result = partial
        if gunzip:
            descriptor, decompressed = create_temporary_file(
                destination.parent, f".{destination.name}.", DECOMPRESSED_SUFFIX, replacing=destination
            )
            with open(descriptor, "wb") as plain, open(partial, "rb") as compressed:
                result = decompressed
                try:
                    _gunzip(url, compressed, plain, max_bytes)
                except TooLargeError:
                    raise
                except _GzipEndMissing:
                    if end_known:
                        raise
                    # No length to say the body was whole: read as the cut connection it most likely is.
                    raise ConnectionError(
                        f"{url}: download interrupted (the body ended inside its gzip stream, and the server "
                        f"sent no length to tell a cut connection from a short file); "
                        f"{partial.stat().st_size} bytes are kept in {partial} and the same command resumes from there"
                    ) from None
                except ValueError:
                    page = _html_page(partial)
                    if page is not None:
                        raise _unexpected_page(destination, url, page) from None
                    raise
        actual = _digest_of_file(result, algorithm)
        if actual != expected and partial.stat().st_size == 0:
            # The hash of nothing, quoted as a mismatch, reads as a wrong copy: the server sent no bytes at all.
            raise ValueError(
                f"{destination.name} (from {url}): expected the file, got an empty body (0 bytes); "
                f"{destination} was not written"
            )
        if actual != expected:
            page = _html_page(partial)
            if page is not None:
                # Said as what it is: a hash mismatch reads as a damaged file, or a mirror's wrong copy.
                raise _unexpected_page(destination, url, page)
            raise ValueError(
                f"{destination.name} (from {url}): {algorithm} mismatch: expected {expected}, "
                f"got {actual}; the downloaded file was deleted, {destination} was not written"
            )
        with open(result, "rb+") as file:
            os.fsync(file.fileno())
        replace_file(result, destination)
    except ValueError:
        # A complete body that fails its check (its hash, its gzip, its bound) is wrong:
        # resuming it would only append to the wrong bytes. Anything else (Ctrl-C, SIGTERM,
        # a disk refusing the decompressed file) keeps it: the next call finds it whole (HTTP
        # 416) and only decompresses again.
        partial.unlink(missing_ok=True)
        raise
    finally:
        if decompressed is not None:
            decompressed.unlink(missing_ok=True)
    partial.unlink(missing_ok=True)
