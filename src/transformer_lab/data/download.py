"""Fetch a file by URL into a cache folder, atomically, optionally gunzipped, checked by sha256.

Used by the dataset readers for users with a network (see `download_multi30k`); nothing
in the test suite or in normal runs downloads anything: the tests serve their own files
from a local HTTP server on 127.0.0.1.

A download never leaves a partial or unverified file under its final name: the bytes go
to a temporary file in the destination folder, are decompressed and hashed, and only a
file whose sha256 matches is renamed into place (`os.replace`, atomic on one file
system). On a mismatch the temporary file is deleted and a ValueError names the URL, the
file, the expected and the actual hash. An existing file whose hash already matches is
kept without any network access.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zlib
from pathlib import Path
from typing import BinaryIO

logger = logging.getLogger(__name__)

_CHUNK_BYTES = 1 << 20
_SCHEMES = ("http", "https", "file")


def sha256_of_file(path: str | os.PathLike[str]) -> str:
    """The sha256 of a file's bytes, as 64 lowercase hex digits."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(_CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _check_sha256(name: str, value: object) -> str:
    """Return `value` lowercased if it is 64 hex digits, else raise a ValueError naming `name`."""
    if (
        not isinstance(value, str)
        or len(value) != 64
        or any(c not in "0123456789abcdefABCDEF" for c in value)
    ):
        raise ValueError(f"{name} must be a sha256 of 64 hex digits, got {value!r}")
    return value.lower()


def _check_url(url: object) -> str:
    if not isinstance(url, str):
        raise ValueError(f"url must be a str, got {url!r} ({type(url).__name__})")
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in _SCHEMES:
        raise ValueError(f"url must start with one of {', '.join(s + '://' for s in _SCHEMES)}, got {url!r}")
    return url


def _copy_response(url: str, destination: BinaryIO, timeout: float) -> None:
    """Stream the body at `url` into the open file `destination`."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (scheme checked)
            shutil.copyfileobj(response, destination, _CHUNK_BYTES)
    except urllib.error.HTTPError as error:
        if error.code == 404:
            raise FileNotFoundError(f"{url}: expected a file to download, got HTTP 404 Not Found") from None
        raise ConnectionError(f"{url}: download failed with HTTP {error.code} {error.reason}") from None
    except urllib.error.URLError as error:
        if isinstance(error.reason, FileNotFoundError):
            raise FileNotFoundError(f"{url}: expected a file to download, got no such file") from None
        raise ConnectionError(f"{url}: download failed ({error.reason})") from None
    except (OSError, TimeoutError) as error:
        raise ConnectionError(f"{url}: download failed ({error})") from None


def _gunzip(url: str, compressed: BinaryIO, destination: BinaryIO) -> None:
    """Decompress the gzip stream `compressed` into `destination`; bad gzip is a ValueError."""
    try:
        with gzip.GzipFile(fileobj=compressed, mode="rb") as archive:
            shutil.copyfileobj(archive, destination, _CHUNK_BYTES)
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        raise ValueError(
            f"{url}: expected gzip-compressed data, got data that does not decompress ({error})"
        ) from None


def download_file(
    url: str,
    destination: str | os.PathLike[str],
    expected_sha256: str,
    gunzip: bool = False,
    timeout: float = 60.0,
) -> Path:
    """Download `url` to `destination` atomically and check its sha256.

    If `destination` already exists with the expected hash, nothing is fetched. If it
    exists with another hash it is deleted (a warning says so) and downloaded again.

    Args:
        url: an http://, https:// or file:// address.
        destination: the final path of the (decompressed) file; its folder is created.
        expected_sha256: the sha256 of the final file, that is of the decompressed bytes
            when `gunzip` is set.
        gunzip: the body is gzip data; store it decompressed.
        timeout: seconds to wait on the connection before giving up.

    Returns:
        `destination` as a Path.

    Raises:
        ValueError: a bad argument, data that is not gzip when `gunzip`, or a sha256
            mismatch (the message names the file, the expected and the actual hash; the
            downloaded bytes are deleted).
        FileNotFoundError: the server has no such file (HTTP 404).
        ConnectionError: any other network failure.
    """
    url = _check_url(url)
    expected_sha256 = _check_sha256("expected_sha256", expected_sha256)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    destination = Path(destination)
    if destination.exists():
        actual = sha256_of_file(destination)
        if actual == expected_sha256:
            logger.info("%s is already present with the expected sha256; not downloading", destination)
            return destination
        # A cache must never keep bytes it cannot vouch for, so the bad file goes first.
        logger.warning(
            "%s exists but its sha256 is %s, expected %s; deleting it and downloading again",
            destination,
            actual,
            expected_sha256,
        )
        destination.unlink()
    destination.parent.mkdir(parents=True, exist_ok=True)

    # Temporary files live beside the destination so that the final rename stays on one
    # file system (and is therefore atomic); their names start with a dot and end in
    # ".part", so nothing mistakes them for data.
    temporaries: list[Path] = []

    def temporary_file() -> BinaryIO:
        handle = tempfile.NamedTemporaryFile(
            dir=destination.parent, prefix=f".{destination.name}.", suffix=".part", delete=False
        )
        temporaries.append(Path(handle.name))
        return handle

    try:
        logger.info("downloading %s to %s", url, destination)
        with temporary_file() as body:
            _copy_response(url, body, float(timeout))
        result = temporaries[-1]
        if gunzip:
            with open(result, "rb") as compressed, temporary_file() as plain:
                _gunzip(url, compressed, plain)
            result = temporaries[-1]
        actual = sha256_of_file(result)
        if actual != expected_sha256:
            raise ValueError(
                f"{destination.name} (from {url}): sha256 mismatch: expected {expected_sha256}, "
                f"got {actual}; the downloaded file was deleted, {destination} was not written"
            )
        with open(result, "rb+") as file:
            os.fsync(file.fileno())
        os.replace(result, destination)
        temporaries.remove(result)
    finally:
        for path in temporaries:
            path.unlink(missing_ok=True)
    return destination
