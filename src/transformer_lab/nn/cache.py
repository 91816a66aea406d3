"""Key/value caches for incremental decoding, which ``torch.nn`` does not offer.

Decoding one new target position should cost one position's work. Self-attention keys
and values of the earlier positions never change under a causal mask, so they are kept
and grow by one row per step; cross-attention keys and values depend only on the encoder
memory, so they are projected once. Beam search reorders every cached tensor along the
batch dimension with :meth:`DecoderCache.reorder`.

Shapes: B batch, H heads, t cached positions, Dh head size.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["AttentionCache", "DecoderLayerCache", "DecoderCache"]


class AttentionCache:
    """Projected keys and values of one attention module, split into heads.

    ``static=True`` (cross-attention): filled once from the memory, then reused.
    ``static=False`` (self-attention): each call appends the new positions.
    """

    def __init__(self, static: bool) -> None:
        self.static = static
        self.keys: Tensor | None = None  # [B, H, t, Dh]
        self.values: Tensor | None = None  # [B, H, t, Dh]

    @property
    def length(self) -> int:
        """Number of cached key positions."""
        return 0 if self.keys is None else self.keys.shape[2]

    def update(self, new_keys: Tensor, new_values: Tensor) -> tuple[Tensor, Tensor]:
        """Store (static) or append (growing) keys/values; return everything cached.

        Shape:
            new_keys, new_values ``[B, H, t_new, Dh]``; returns two ``[B, H, t, Dh]``.
        """
        if self.static or self.keys is None:
            self.keys, self.values = new_keys, new_values
        else:
            assert self.values is not None
            self.keys = torch.cat([self.keys, new_keys], dim=2)  # [B, H, t + t_new, Dh]
            self.values = torch.cat([self.values, new_values], dim=2)  # [B, H, t + t_new, Dh]
        return self.keys, self.values

    def reorder(self, index: Tensor) -> None:
        """Select batch rows ``index`` (beam search: each new beam's parent)."""
        if self.keys is not None:
            assert self.values is not None
            self.keys = self.keys.index_select(0, index)
            self.values = self.values.index_select(0, index)


class DecoderLayerCache:
    """The two caches of one decoder layer."""

    def __init__(self) -> None:
        self.self_attention = AttentionCache(static=False)
        self.cross_attention = AttentionCache(static=True)

    def reorder(self, index: Tensor, include_static: bool = True) -> None:
        self.self_attention.reorder(index)
        if include_static:
            self.cross_attention.reorder(index)


class DecoderCache:
    """The cache of a whole :class:`~transformer_lab.nn.TransformerDecoder`.

    Create one per decoding run (``DecoderCache(num_layers)`` or
    ``decoder.new_cache()``) and pass it to every ``decoder(..., cache=cache)`` call.
    """

    def __init__(self, num_layers: int) -> None:
        if num_layers < 1:
            raise ValueError(f"DecoderCache: num_layers must be >= 1, got {num_layers}")
        self.layers = [DecoderLayerCache() for _ in range(num_layers)]

    @property
    def length(self) -> int:
        """Number of target positions already decoded (and cached)."""
        return self.layers[0].self_attention.length

    def reorder(self, index: Tensor, include_static: bool = True) -> None:
        """Reorder or expand every cached tensor along the batch dimension.

        ``include_static=False`` leaves the cross-attention keys/values as they are. That
        is correct only when ``index`` keeps the batch size and maps every row to a row
        with the same memory, as beam search does between the beams of one sentence; it
        saves copying ``[B, H, S, Dh]`` twice per layer at every step.

        Shape:
            index ``[B']`` long, values in ``[0, B)``.
        """
        if index.dim() != 1 or index.dtype != torch.long:
            raise ValueError(
                "DecoderCache.reorder: index must be a 1-D long tensor, "
                f"got dtype {index.dtype} and shape {list(index.shape)}"
            )
        static_keys = self.layers[0].cross_attention.keys  # [B, H, S, Dh] or None
        if not include_static and static_keys is not None and index.shape[0] != static_keys.shape[0]:
            raise ValueError(
                "DecoderCache.reorder: include_static=False needs an index that keeps the batch size "
                f"{static_keys.shape[0]}, got {index.shape[0]} rows"
            )
        for layer in self.layers:
            layer.reorder(index, include_static)
