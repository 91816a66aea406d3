"""The shape recorder is per thread (a ContextVar): a recording in one thread never sees another's tensors."""

from __future__ import annotations

import threading

import torch

from transformer_lab.nn import MultiheadAttention
from transformer_lab.nn.tracing import ATTENTION_WEIGHTS, active_recorder, recording_shapes


def test_two_threads_recording_at_once_keep_their_own_records() -> None:
    torch.manual_seed(0)
    attention = MultiheadAttention(8, 2, batch_first=True).eval()
    inside = threading.Barrier(2)
    found: dict[int, list[tuple[int, ...]]] = {}

    def run(length: int) -> None:
        query = torch.randn(1, length, 8)
        with recording_shapes(keep_tensors=True) as recorder:
            inside.wait()  # both recorders are open at the same moment
            attention(query, query, query, need_weights=True)
            inside.wait()
            found[length] = [record.shape for record in recorder.records if record.name == ATTENTION_WEIGHTS]

    threads = [threading.Thread(target=run, args=(length,)) for length in (3, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # One weights record each, of its own sequence length; a module-global recorder mixed them.
    assert found == {3: [(1, 2, 3, 3)], 5: [(1, 2, 5, 5)]}
    assert active_recorder() is None


def test_a_recording_does_not_leak_into_the_caller_after_the_block() -> None:
    with recording_shapes() as outer:
        with recording_shapes() as inner:
            assert active_recorder() is inner
        assert active_recorder() is outer
    assert active_recorder() is None
