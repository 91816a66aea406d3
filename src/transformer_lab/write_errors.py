"""A write the system refused (a full disk, a quota, a read-only file system), said in one form naming the path."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator

__all__ = [
    "DISK_ERRNOS",
    "FolderWriteError",
    "describe_os_error",
    "refused_write",
    "write_standard_output",
    "writes_refused_as",
]

# The errors that say the disk cannot take what is written: full, over quota, a file too
# large for it, read-only. Any other error (an input that cannot be read) passes unchanged.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


class FolderWriteError(OSError):
    """The system refused to write a folder (a full disk, a quota, a read-only file system).

    An ``OSError`` with the original errno, whose message names the folder and what the
    errno means. The command line reports it as a refused input (exit 2): the command
    itself was sound, and the folder, the disk or the quota is what to change.
    """

    def __str__(self) -> str:
        # The message names the errno already; OSError's "[Errno 28] " prefix would repeat it.
        return str(self.strerror)


def describe_os_error(error: OSError) -> str:
    """What ``error``'s errno means and its name: "No space left on device, ENOSPC"."""
    code = errno.errorcode.get(error.errno, "") if error.errno is not None else ""
    meaning = error.strerror or (os.strerror(error.errno) if error.errno else str(error))
    return f"{meaning}, {code}" if code else meaning


def refused_write(
    error: OSError, path: str | os.PathLike[str], outcome: str, name: str | None = None
) -> FolderWriteError:
    """``error`` as a :class:`FolderWriteError` (same errno) naming ``path`` and saying ``outcome``.

    "could not write 'PATH' (Read-only file system, EROFS); OUTCOME", the one form every
    output that the system refuses is reported in; ``name``, the option that gave ``path``, before it;
    an empty ``outcome`` is left to the caller to say.
    """
    named = "" if name is None else f"{name}: "
    said = f"; {outcome}" if outcome else ""
    return FolderWriteError(error.errno, f"{named}could not write {str(path)!r} ({describe_os_error(error)}){said}")


@contextlib.contextmanager
def writes_refused_as(
    path: str | os.PathLike[str], outcome: str, *, permission: bool = False, name: str | None = None
) -> Iterator[None]:
    """Inside, an ``OSError`` of the disk (:data:`DISK_ERRNOS`) becomes :func:`refused_write` naming ``path``.

    ``permission``: a ``PermissionError`` too (a folder not this user's to make). An error
    already named (a ``FolderWriteError``) and a broken connection pass as they are. ``name``:
    the option that gave ``path``.
    """
    try:
        yield
    except OSError as error:
        of_the_disk = error.errno in DISK_ERRNOS or (permission and isinstance(error, PermissionError))
        if not of_the_disk or isinstance(error, (FolderWriteError, ConnectionError)):
            raise
        raise refused_write(error, path, outcome, name) from error


def write_standard_output(text: str, lost: str) -> None:
    """Write ``text`` to stdout now; a full disk or device behind it is a `FolderWriteError` naming the standard
    output and saying ``lost`` (what was not written).

    A closed pipe (`| head`) passes as it is: the command line answers it quietly, as a shell's commands do.
    """
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as error:
        if error.errno not in DISK_ERRNOS:
            raise
        raise FolderWriteError(
            error.errno, f"could not write the standard output ({describe_os_error(error)}); {lost}"
        ) from error
