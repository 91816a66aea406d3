"""Key/value caches for incremental decoding, which ``torch.nn`` does not offer.

Decoding one new target position should cost one position's work. Self-attention keys
and values of the earlier positions never change under a causal mask, so they are kept
and grow by one row per step; cross-attention keys and values depend only on the encoder
memory, so they are projected once. Beam search reorders every cached tensor along the
batch dimension with :meth:`DecoderCache.reorder`.

Shapes: B batch, H heads, t cached positions, Dh head size.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

__all__ = ["AttentionCache", "DecoderLayerCache", "DecoderCache"]


class AttentionCache:
    """Projected keys and values of one attention module, split into heads.

    ``static=True`` (cross-attention): filled once from the memory, then reused.
    ``static=False`` (self-attention): each call appends the new positions. They are
    written in place into a buffer with room to spare, which doubles when it is full, so
    a step copies only its own new row instead of the whole cache (``torch.cat`` at every
    step copied all t positions of every layer: a 21.2 ms greedy step at batch 32 took 16.6 ms
    without it, docs/results.md#ctranslate2). ``keys`` and ``values`` are views of the filled part.
    """

    # Room for this many positions at the first append (doubling from there).
    INITIAL_CAPACITY = 16

    def __init__(self, static: bool) -> None:
        self.static = static
        self._key_buffer: Tensor | None = None  # [B, H, capacity, Dh] (static: exactly [B, H, S, Dh])
        self._value_buffer: Tensor | None = None  # [B, H, capacity, Dh]
        self._length = 0

    @property
    def keys(self) -> Tensor | None:
        """The cached keys ``[B, H, t, Dh]`` (a view of the buffer), or None before the first update."""
        if self._key_buffer is None or self.static:
            return self._key_buffer  # static: the projected tensor itself, reused as it is
        return self._key_buffer[:, :, : self._length]

    @property
    def values(self) -> Tensor | None:
        """The cached values ``[B, H, t, Dh]`` (a view of the buffer), or None before the first update."""
        if self._value_buffer is None or self.static:
            return self._value_buffer
        return self._value_buffer[:, :, : self._length]

    @property
    def length(self) -> int:
        """Number of cached key positions."""
        return self._length

    @property
    def capacity(self) -> int:
        """Positions the buffer holds before it must grow (0 before the first update)."""
        return 0 if self._key_buffer is None else self._key_buffer.shape[2]

    def update(self, new_keys: Tensor, new_values: Tensor) -> tuple[Tensor, Tensor]:
        """Store (static) or append (growing) keys/values; return everything cached.

        Shape:
            new_keys, new_values ``[B, H, t_new, Dh]``; returns two ``[B, H, t, Dh]``.
        """
        if self.static:
            self._key_buffer, self._value_buffer = new_keys, new_values
            self._length = new_keys.shape[2]
            return new_keys, new_values
        if self._key_buffer is None:
            self._allocate(new_keys, new_values, self.INITIAL_CAPACITY)
        assert self._key_buffer is not None and self._value_buffer is not None
        if new_keys.shape[0] != self._key_buffer.shape[0] or new_keys.dtype != self._key_buffer.dtype:
            raise ValueError(
                f"cache: expected new keys of batch {self._key_buffer.shape[0]} and dtype {self._key_buffer.dtype} "
                f"like the cached ones, got batch {new_keys.shape[0]} and dtype {new_keys.dtype}; "
                "reorder the cache when the batch changes"
            )
        start, end = self._length, self._length + new_keys.shape[2]
        if end > self.capacity:
            self._grow(end)
        self._key_buffer[:, :, start:end].copy_(new_keys)  # [B, H, t_new, Dh] written in place
        self._value_buffer[:, :, start:end].copy_(new_values)
        self._length = end
        keys, values = self.keys, self.values
        assert keys is not None and values is not None
        return keys, values

    def _allocate(self, like_keys: Tensor, like_values: Tensor, capacity: int) -> None:
        batch, heads, new_length, head_dim = like_keys.shape
        capacity = max(capacity, new_length)
        self._key_buffer = like_keys.new_empty(batch, heads, capacity, head_dim)  # [B, H, capacity, Dh]
        self._value_buffer = like_values.new_empty(batch, heads, capacity, like_values.shape[3])

    def _grow(self, needed: int) -> None:
        """Move the filled positions into a buffer of at least twice the room (amortised O(1) a step)."""
        assert self._key_buffer is not None and self._value_buffer is not None
        old_keys, old_values = self.keys, self.values
        assert old_keys is not None and old_values is not None
        self._allocate(self._key_buffer, self._value_buffer, max(needed, 2 * self.capacity))
        assert self._key_buffer is not None and self._value_buffer is not None
        self._key_buffer[:, :, : self._length].copy_(old_keys)
        self._value_buffer[:, :, : self._length].copy_(old_values)

    def reorder(self, index: Tensor) -> None:
        """Select batch rows ``index`` (beam search: each new beam's parent)."""
        if self._key_buffer is not None:
            assert self._value_buffer is not None
            # The whole buffer in one copy: its spare room (less than the filled part
            # after a doubling) rides along, so the next append needs no new allocation.
            self._key_buffer = self._key_buffer.index_select(0, index)
            self._value_buffer = self._value_buffer.index_select(0, index)


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
        # What a model derives once per decoding run (a cache lives for one run, during
        # which the weights do not change): a weight laid out for faster products, or a
        # mask keyed on the source tensor it was built from. reorder leaves them: an entry
        # that depends on the batch rows must check what it was built from (as
        # Seq2SeqTransformer._memory_padding_mask does).
        self.derived: dict[str, Any] = {}

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
