"""keep_freed_memory: large blocks come from the heap and stay there, so a decoding-like loop stops faulting.

Each check runs in a fresh interpreter: the setting is for the whole process, and the
oracle (glibc's default maps every such block afresh) needs a process that never had it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from transformer_lab.allocator import configure_allocator, glibc, keep_freed_memory

glibc_only = pytest.mark.skipif(not hasattr(glibc(), "mallinfo2"), reason="mallopt and mallinfo2 are glibc's (2.33+)")

# Two 5 MB tensors a step, as beam search's logits and log-probabilities at 160 rows.
# Printed: whether the setting took, whether the very first such block was mapped on its
# own (glibc's default threshold starts at 128 KiB), and the minor page faults of the
# last 20 steps (the first 20 let the heap settle).
_LOOP = textwrap.dedent(
    """
    import ctypes, resource, sys, torch
    from transformer_lab.allocator import keep_freed_memory
    class MallocInfo(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = MallocInfo
    kept = keep_freed_memory() if sys.argv[1] == "keep" else False
    mapped_before = mallinfo2().hblks
    first = torch.empty(1_280_000).fill_(1.0)
    mapped_alone = mallinfo2().hblks > mapped_before
    del first
    def steps():
        for _ in range(20):
            logits = torch.empty(1_280_000).fill_(1.0)
            log_probs = torch.empty(1_280_000).fill_(2.0)
            del logits, log_probs
    steps()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    steps()
    print(kept, mapped_alone, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """
)


def _run_loop(mode: str, **environment: str) -> list[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("MALLOC_")}
    env.update(environment)
    result = subprocess.run(
        [sys.executable, "-c", _LOOP, mode], capture_output=True, text=True, check=True, env=env, timeout=120
    )
    return result.stdout.split()


@glibc_only
def test_a_large_block_comes_from_the_heap_and_stays_there() -> None:
    # The oracle: by default glibc maps a fresh 5 MB block on its own.
    assert _run_loop("default")[:2] == ["False", "True"]
    kept, mapped_alone, faults = _run_loop("keep")
    assert (kept, mapped_alone) == ("True", "False")
    # 40 blocks of 1,250 pages each: reused, not faulted in again.
    assert int(faults) < 500


@glibc_only
def test_the_users_own_malloc_settings_win() -> None:
    assert _run_loop("keep", MALLOC_TRIM_THRESHOLD_="1048576")[0] == "False"


def test_the_report_line_says_which_allocator_runs() -> None:
    assert configure_allocator(keep=False) == "allocator: the C library's default (as asked)"
    if glibc() is not None and not any(name.startswith("MALLOC_") for name in os.environ):
        assert keep_freed_memory()
        assert "glibc keeps freed blocks" in configure_allocator(keep=True)


# 200 blocks of 1 MB, freed in an order that leaves holes (every other one first), so the
# heap cannot shrink from its top alone. Printed: RssAnon in KiB after the frees, and after
# release_free_memory.
_PHASES = textwrap.dedent(
    """
    import sys, torch
    from transformer_lab.allocator import keep_freed_memory, release_free_memory
    def anonymous_kib():
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon"):
                return int(line.split()[1])
    assert keep_freed_memory()
    blocks = [torch.empty(250_000).fill_(1.0) for _ in range(200)]
    keep_last = blocks[-1]
    del blocks[1::2]
    del blocks[:-1]
    kept = anonymous_kib()
    released = release_free_memory()
    print(kept, anonymous_kib(), released)
    """
)


@glibc_only
def test_release_free_memory_hands_the_kept_heap_back() -> None:
    env = {name: value for name, value in os.environ.items() if not name.startswith("MALLOC_")}
    result = subprocess.run(
        [sys.executable, "-c", _PHASES], capture_output=True, text=True, check=True, env=env, timeout=120
    )
    kept, after, released = result.stdout.split()
    # About 199 MB stayed mapped under keep_freed_memory; most of it goes back.
    assert int(kept) - int(after) > 150_000, result.stdout
    assert released == "True"
