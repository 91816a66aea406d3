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

Where a source publishes only an MD5 (the AG News training file), `expected_md5` checks
that instead; MD5 guards against a truncated or wrong file, not against tampering.
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
from typing import IO

logger = logging.getLogger(__name__)

_CHUNK_BYTES = 1 << 20
_SCHEMES = ("http", "https", "file")


def _digest_of_file(path: str | os.PathLike[str], algorithm: str) -> str:
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


def _expected_digest(expected_sha256: object, expected_md5: object) -> tuple[str, str]:
    """(algorithm, expected hex digest) from the two arguments, exactly one of which is given."""
    if (expected_sha256 is None) == (expected_md5 is None):
        raise ValueError(
            f"expected_sha256 or expected_md5: expected exactly one checksum, got "
            f"expected_sha256={expected_sha256!r} and expected_md5={expected_md5!r}"
        )
    if expected_sha256 is not None:
        return "sha256", _check_hex_digest("expected_sha256", expected_sha256, "sha256", 64)
    return "md5", _check_hex_digest("expected_md5", expected_md5, "md5", 32)


def _check_url(url: object) -> str:
    if not isinstance(url, str):
        raise ValueError(f"url must be a str, got {url!r} ({type(url).__name__})")
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in _SCHEMES:
        raise ValueError(f"url must start with one of {', '.join(s + '://' for s in _SCHEMES)}, got {url!r}")
    return url


def _copy_response(url: str, destination: IO[bytes], timeout: float) -> None:
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


def _gunzip(url: str, compressed: IO[bytes], destination: IO[bytes]) -> None:
    """Decompress the gzip stream `compressed` into `destination`; bad gzip is a ValueError."""
    try:
        with gzip.GzipFile(fileobj=compressed, mode="rb") as archive:
            shutil.copyfileobj(archive, destination, _CHUNK_BYTES)
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        raise ValueError(f"{url}: expected gzip-compressed data, got data that does not decompress ({error})") from None


def download_file(
    url: str,
    destination: str | os.PathLike[str],
    expected_sha256: str | None = None,
    gunzip: bool = False,
    timeout: float = 60.0,
    expected_md5: str | None = None,
) -> Path:
    """Download `url` to `destination` atomically and check its sha256 (or MD5).

    If `destination` already exists with the expected hash, nothing is fetched. If it
    exists with another hash it is deleted (a warning says so) and downloaded again.

    Args:
        url: an http://, https:// or file:// address.
        destination: the final path of the (decompressed) file; its folder is created.
        expected_sha256: the sha256 of the final file, that is of the decompressed bytes
            when `gunzip` is set.
        expected_md5: instead of `expected_sha256`, for sources that publish only an MD5;
            exactly one of the two must be given.
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
    algorithm, expected = _expected_digest(expected_sha256, expected_md5)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    destination = Path(destination)
    if destination.exists():
        actual = _digest_of_file(destination, algorithm)
        if actual == expected:
            logger.info("%s is already present with the expected %s; not downloading", destination, algorithm)
            return destination
        # A cache must never keep bytes it cannot vouch for, so the bad file goes first.
        logger.warning(
            "%s exists but its %s is %s, expected %s; deleting it and downloading again",
            destination,
            algorithm,
            actual,
            expected,
        )
        destination.unlink()
    destination.parent.mkdir(parents=True, exist_ok=True)

    # Temporary files live beside the destination so that the final rename stays on one
    # file system (and is therefore atomic); their names start with a dot and end in
    # ".part", so nothing mistakes them for data.
    temporaries: list[Path] = []

    def temporary_file() -> IO[bytes]:
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
        actual = _digest_of_file(result, algorithm)
        if actual != expected:
            raise ValueError(
                f"{destination.name} (from {url}): {algorithm} mismatch: expected {expected}, "
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
