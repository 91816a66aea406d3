"""A write the system refused (a full disk, a quota, a read-only file system), said in one form naming the path."""

from __future__ import annotations

import errno
import os

__all__ = ["DISK_ERRNOS", "FolderWriteError", "describe_os_error", "refused_write"]

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
    output that the system refuses is reported in; ``name``, the option that gave ``path``, before it.
    """
    named = "" if name is None else f"{name}: "
    message = f"{named}could not write {str(path)!r} ({describe_os_error(error)}); {outcome}"
    return FolderWriteError(error.errno, message)
