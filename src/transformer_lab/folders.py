"""A new output folder (an export, a built data set): it must not exist, and it appears complete or not at all."""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

__all__ = ["DISK_ERRNOS", "FolderWriteError", "check_new_folder", "describe_os_error", "write_folder"]

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


def check_new_folder(out_dir: str | os.PathLike[str]) -> Path:
    """``out_dir`` as a Path; a ``ValueError`` naming it if it exists (nothing is overwritten)."""
    out_dir = Path(out_dir)
    if out_dir.exists():
        raise ValueError(f"out_dir: expected a new folder, got {str(out_dir)!r} which exists")
    return out_dir


def write_folder(
    out_dir: str | os.PathLike[str], write: Callable[[Path], None], *, shown_as: str | os.PathLike[str] | None = None
) -> Path:
    """Call ``write(folder)`` on a temporary folder beside ``out_dir``, then rename it to ``out_dir``.

    A crash or an error in ``write`` leaves no partial folder behind; returns ``out_dir``.
    A full disk (any of :data:`DISK_ERRNOS`) is a :class:`FolderWriteError` with the same
    errno that names the folder (``shown_as``, where ``out_dir`` is itself a temporary
    name) and says that nothing was kept.
    """
    out_dir = check_new_folder(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    # Not tempfile.mkdtemp: its folder is private (0700); this one gets the umask's mode.
    partial = out_dir.parent / f".{out_dir.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    partial.mkdir()
    try:
        write(partial)
        os.replace(partial, out_dir)
    except OSError as error:
        shutil.rmtree(partial, ignore_errors=True)
        if error.errno in DISK_ERRNOS:
            shown = str(out_dir if shown_as is None else shown_as)
            message = f"could not write {shown!r} ({describe_os_error(error)}); nothing of it was kept"
            raise FolderWriteError(error.errno, message) from error
        raise
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return out_dir
