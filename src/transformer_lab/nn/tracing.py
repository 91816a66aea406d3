"""Record the shape of every named tensor that attention computes, without printing.

The explicit attention path calls :func:`record` at each step. It costs one global
lookup when no recorder is active. ``transformer_lab.lab`` opens a :class:`ShapeRecorder`
and turns the records into the printed walk of shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator
from contextlib import contextmanager

from torch import Tensor

__all__ = ["ShapeRecord", "ShapeRecorder", "record", "recording_shapes", "active_recorder"]


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


_active: ShapeRecorder | None = None


def active_recorder() -> ShapeRecorder | None:
    """The recorder in force, or None (then attention skips tracing entirely)."""
    return _active


def record(name: str, tensor: Tensor, dims: str, note: str = "") -> None:
    """Note ``tensor``'s shape under ``name`` if a recorder is active."""
    if _active is not None:
        kept = tensor.detach().clone() if _active.keep_tensors else None
        _active.records.append(ShapeRecord(_active.scope, name, tuple(tensor.shape), dims, note, kept))


@contextmanager
def recording_shapes(keep_tensors: bool = False) -> Iterator[ShapeRecorder]:
    """Activate a fresh recorder for the duration of the ``with`` block."""
    global _active
    previous, _active = _active, ShapeRecorder(keep_tensors=keep_tensors)
    try:
        yield _active
    finally:
        _active = previous


@contextmanager
def scope(name: str) -> Iterator[None]:
    """Name the module whose tensors are recorded inside the block (no-op when inactive)."""
    if _active is None:
        yield
        return
    # Nested scopes join into a dotted path, like state_dict keys.
    _active.scope_stack.append(f"{_active.scope}.{name}" if _active.scope else name)
    try:
        yield
    finally:
        _active.scope_stack.pop()
