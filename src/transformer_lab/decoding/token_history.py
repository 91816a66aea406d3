"""The tokens beam search chose at every step, kept on the device and read back once, at the end.

Beam search reorders its rows at every step (each new beam continues a parent beam) and
drops the rows of finished sentences. A hypothesis that ends at step ``s`` is a row of
that step's prefix, which later steps overwrite. Reading its tokens back when it ends
costs a host read at every step where some hypothesis ends, and on an accelerator every
read waits for the device (``nn/host_reads.py``). Instead the search appends, at every
step, the token each new row took and the row it continues; after one read at the end,
:meth:`TokenTrace.ids` follows a row back to bos.

Shape legend: N rows after a step, N' rows before it.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["TokenHistory", "TokenTrace"]


class TokenTrace:
    """The host's copy of a :class:`TokenHistory`: per step, every row's token and parent row."""

    def __init__(self, tokens: list[list[int]], parents: list[list[int]]) -> None:
        self.tokens = tokens
        self.parents = parents

    def ids(self, steps: int, row: int) -> list[int]:
        """The tokens (bos excluded) of row ``row`` of the prefix after ``steps`` steps."""
        backwards = []
        for step in range(steps - 1, -1, -1):
            backwards.append(self.tokens[step][row])
            row = self.parents[step][row]
        return backwards[::-1]


class TokenHistory:
    """Per step, the token of every row after the step and the row before it that the row continues."""

    def __init__(self) -> None:
        self._steps: list[tuple[Tensor, Tensor]] = []

    def __len__(self) -> int:
        return len(self._steps)

    def append(self, tokens: Tensor, parents: Tensor) -> None:
        """Record one step: row ``i`` after it is row ``parents[i]`` before it, followed by ``tokens[i]``.

        Shape: tokens ``[N]`` and parents ``[N]`` long, parents in ``[0, N')``.
        """
        if tokens.shape != parents.shape or tokens.dim() != 1:
            raise ValueError(
                f"tokens and parents: expected two 1-D tensors of one length, given {tuple(tokens.shape)} "
                f"and {tuple(parents.shape)}"
            )
        self._steps.append((tokens, parents))

    def read(self) -> TokenTrace:
        """Every recorded step on the host, in one read."""
        if not self._steps:
            return TokenTrace([], [])
        sizes = [tokens.shape[0] for tokens, _ in self._steps]
        flat = torch.cat([tokens for tokens, _ in self._steps] + [parents for _, parents in self._steps]).tolist()
        rows: list[list[int]] = []
        start = 0
        for size in sizes + sizes:  # every step's tokens, then every step's parents
            rows.append(flat[start : start + size])
            start += size
        return TokenTrace(rows[: len(sizes)], rows[len(sizes) :])
