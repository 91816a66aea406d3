"""`eval_mode`: a module in eval mode for a block, then back in the mode it came in."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn


@contextmanager
def eval_mode(module: nn.Module) -> Iterator[nn.Module]:
    """``module`` without dropout for the block; the caller's mode is restored after it, whatever happens.

    A model scored or decoded mid-training would otherwise train on without dropout, and a
    model in training mode would be scored with dropout's noise.
    """
    was_training = module.training
    module.eval()
    try:
        yield module
    finally:
        module.train(was_training)
