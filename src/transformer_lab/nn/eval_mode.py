"""`eval_mode`: a module in eval mode for a block, then back in the mode it came in."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn

# The modules in eval_mode now: how many blocks hold each, and every submodule's mode before the first.
# Shared by threads: one Translator answering two threads at once enters twice before either leaves.
_HELD: weakref.WeakKeyDictionary[nn.Module, tuple[int, list[tuple[nn.Module, bool]]]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


@contextmanager
def eval_mode(module: nn.Module) -> Iterator[nn.Module]:
    """``module`` without dropout for the block; each submodule's mode is restored after it, whatever happens.

    A model scored or decoded mid-training would otherwise train on without dropout, and a
    model in training mode would be scored with dropout's noise. Blocks of several threads on
    one module overlap: the modes are restored when the last of them ends (one restoring them
    while another decodes would give that one dropout's noise).
    """
    with _LOCK:
        count, modes = _HELD.get(module, (0, []))
        if count == 0:
            modes = [(submodule, submodule.training) for submodule in module.modules()]
            module.eval()
        _HELD[module] = (count + 1, modes)
    try:
        yield module
    finally:
        with _LOCK:
            count, modes = _HELD[module]
            if count == 1:
                del _HELD[module]
                for submodule, training in modes:
                    submodule.training = training
            else:
                _HELD[module] = (count - 1, modes)
