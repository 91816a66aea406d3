"""The C allocator under torch's CPU tensors: keep freed memory for the next step.

torch allocates a CPU tensor's memory with the C library's allocator. glibc serves a large
block (from 128 KiB, a threshold that grows to the largest block freed so far, up to
32 MiB) with its own ``mmap`` and hands it back to the kernel on free; below that it
trims the heap whenever more than twice the threshold lies free at its top. A decoding
step allocates the same few large tensors as the step before it (beam 5 over 64
sentences: the ``[320, 8000]`` logits and log-probabilities, 10 MB each), so by default
each one is mapped afresh and its pages are faulted in and zeroed again: about 1,000
page faults a step at 160 rows; keeping them makes beam search faster
(docs/results.md#ctranslate2). CTranslate2 and PyTorch's GPU allocator keep such blocks
in their own cache; on the CPU torch has none.

:func:`keep_freed_memory` asks glibc to do the same: blocks up to 32 MiB come from the
heap, and up to 256 MiB of free heap stays mapped. The process then keeps its high-water
mark of memory instead of returning it, the usual trade of a caching allocator. It is
for the process to decide, not a library import: the console script calls it at start;
anything else that decodes in a loop may call it too.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys

__all__ = [
    "configure_allocator",
    "glibc",
    "keep_freed_memory",
    "release_free_memory",
    "MMAP_THRESHOLD_BYTES",
    "TRIM_THRESHOLD_BYTES",
]

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

# glibc's own ceiling for the mmap threshold on 64-bit systems (HEAP_MAX_SIZE / 2).
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
TRIM_THRESHOLD_BYTES = 256 * 1024 * 1024

# Where the user has tuned glibc's malloc already, their settings win.
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")

_logger = logging.getLogger(__name__)


def _user_tuned_malloc() -> bool:
    return any(name in os.environ for name in _USER_SETTINGS) or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", "")


def glibc() -> ctypes.CDLL | None:
    """The symbols loaded into this process, where its C library is glibc; None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    # gnu_get_libc_version exists only in glibc: musl's mallopt accepts and ignores everything.
    return libc if hasattr(libc, "gnu_get_libc_version") else None


def keep_freed_memory() -> bool:
    """Let glibc keep freed blocks (up to 32 MiB each, 256 MiB in all) mapped for reuse; True if it now does.

    False, and nothing changed, where the C library is not glibc (macOS, Windows, musl),
    or where the environment already sets glibc's malloc parameters
    (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_TOP_PAD_`` or a
    ``glibc.malloc`` tunable). Calling it again changes nothing more.
    """
    libc = glibc()
    if libc is None or _user_tuned_malloc() or not hasattr(libc, "mallopt"):
        return False
    mallopt = libc.mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success, 0 for a value out of range.
    kept = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
    kept = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1 and kept
    _logger.debug("glibc malloc keeps freed blocks: %s", kept)
    return kept


def release_free_memory() -> bool:
    """Hand the free pages of every glibc heap back to the system (``malloc_trim(0)``); True if any were.

    Kept freed memory is for a loop that allocates the same blocks again. Between two
    phases that do not (reading and preparing a corpus, then training on it) it is only
    the first phase's high-water mark added to the second's peak. False, and nothing
    done, where the C library is not glibc.
    """
    libc = glibc()
    if libc is None or not hasattr(libc, "malloc_trim"):
        return False
    trim = libc.malloc_trim
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    return bool(trim(0))


def configure_allocator(keep: bool) -> str:
    """:func:`keep_freed_memory` where ``keep`` is true; a line saying which allocator runs, for a report."""
    if keep and keep_freed_memory():
        return "allocator: glibc keeps freed blocks (transformer_lab.allocator.keep_freed_memory)"
    reason = "as asked" if not keep else "not glibc, or its malloc is tuned by the environment"
    return f"allocator: the C library's default ({reason})"
