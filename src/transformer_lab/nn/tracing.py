"""Record the shape of every named tensor that attention computes, without printing.

The explicit attention path calls :func:`record` at each step. It costs one context
variable lookup when no recorder is active. ``transformer_lab.lab`` opens a
:class:`ShapeRecorder` and turns the records into the printed walk of shapes.

The active recorder lives in a :class:`contextvars.ContextVar`, not a module global: a
recorder opened in one thread (or asyncio task) is invisible to every other, so two
requests of the web server, or two tests, never record into each other's lists.
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

from torch import Tensor

__all__ = ["ATTENTION_WEIGHTS", "ShapeRecord", "ShapeRecorder", "record", "recording_shapes", "active_recorder"]

# The name under which attention records its weights (after softmax, before dropout): what
# the lab's attention maps look up, so that the label and the lookup cannot drift apart.
ATTENTION_WEIGHTS = "weights = softmax(scores)"


@dataclass(frozen=True)
class ShapeRecord:
    """One named tensor seen during a forward pass."""

    scope: str  # which module produced it, e.g. "decoder.layers.0.self_attn"
    name: str  # the tensor's name in the code, e.g. "scores"
    shape: tuple[int, ...]
    dims: str  # the dimension names, e.g. "[batch, heads, tgt_len, src_len]"
    note: str = ""
    tensor: Tensor | None = None  # a detached copy, only when the recorder keeps tensors


@dataclass
class ShapeRecorder:
    """Collects :class:`ShapeRecord` entries while it is active."""

    keep_tensors: bool = False  # also keep each tensor (e.g. attention weights for a heat map)
    records: list[ShapeRecord] = field(default_factory=list)
    scope_stack: list[str] = field(default_factory=list)

    @property
    def scope(self) -> str:
        return self.scope_stack[-1] if self.scope_stack else ""


_active: contextvars.ContextVar[ShapeRecorder | None] = contextvars.ContextVar("shape_recorder", default=None)


def active_recorder() -> ShapeRecorder | None:
    """The recorder in force in this thread or task, or None (then attention skips tracing entirely)."""
    return _active.get()


def record(name: str, tensor: Tensor, dims: str, note: str = "") -> None:
    """Note ``tensor``'s shape under ``name`` if a recorder is active."""
    recorder = _active.get()
    if recorder is not None:
        kept = tensor.detach().clone() if recorder.keep_tensors else None
        recorder.records.append(ShapeRecord(recorder.scope, name, tuple(tensor.shape), dims, note, kept))


@contextmanager
def recording_shapes(keep_tensors: bool = False) -> Iterator[ShapeRecorder]:
    """Activate a fresh recorder for the duration of the ``with`` block (in this thread or task only)."""
    recorder = ShapeRecorder(keep_tensors=keep_tensors)
    token = _active.set(recorder)
    try:
        yield recorder
    finally:
        _active.reset(token)


@contextmanager
def scope(name: str) -> Iterator[None]:
    """Name the module whose tensors are recorded inside the block (no-op when inactive)."""
    recorder = _active.get()
    if recorder is None:
        yield
        return
    # Nested scopes join into a dotted path, like state_dict keys.
    recorder.scope_stack.append(f"{recorder.scope}.{name}" if recorder.scope else name)
    try:
        yield
    finally:
        recorder.scope_stack.pop()
