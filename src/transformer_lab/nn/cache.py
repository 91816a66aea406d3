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
    step would copy all t positions of every layer). ``keys`` and ``values`` are views of the filled part.
    """

    # Room for this many positions at the first append (doubling from there).
    INITIAL_CAPACITY = 16

    def __init__(self, static: bool) -> None:
        self.static = static
        self._key_buffer: Tensor | None = None  # [B, H, capacity, Dh] (static: exactly [B, H, S, Dh])
        self._value_buffer: Tensor | None = None  # [B, H, capacity, Dh]
        self._length = 0
        # Static only: the keys transposed and the values, heads folded into the batch and
        # laid out contiguously for batched products (see folded_heads), made on first use.
        self._folded: tuple[Tensor, Tensor] | None = None
        # Growing only: the buffers the next reorder writes into (see reorder).
        self._spare: tuple[Tensor, Tensor] | None = None

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
            self._folded = None
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

    def append_position(self, new_key: Tensor, new_value: Tensor) -> tuple[Tensor, Tensor]:
        """Append one position to a growing cache; return everything cached with the heads folded into the batch.

        The single-position step of :class:`~transformer_lab.nn.decoder_step.DecoderStep`:
        the same bookkeeping as :meth:`update`, and views a batched product reads directly
        (the buffer is contiguous, so batch and heads merge without a copy).

        Shape:
            new_key, new_value ``[B, H, Dh]``; returns keys and values ``[B*H, t, Dh]``.
        """
        if self.static:
            raise ValueError("cache: append_position is for a growing (self-attention) cache, got a static one")
        keys, values = self.update(new_key.unsqueeze(2), new_value.unsqueeze(2))  # two [B, H, t, Dh]
        batch, heads, length, head_dim = keys.shape
        assert self._key_buffer is not None and self._value_buffer is not None
        capacity = self._key_buffer.shape[2]
        folded_keys = self._key_buffer.view(batch * heads, capacity, head_dim)[:, :length]  # [B*H, t, Dh]
        folded_values = self._value_buffer.view(batch * heads, capacity, self._value_buffer.shape[3])[:, :length]
        return folded_keys, folded_values

    def folded_heads(self) -> tuple[Tensor, Tensor]:
        """A static cache's keys, transposed, and values with the heads folded into the batch.

        Laid out once per filling (and per reorder), then reused at every step.

        Shape:
            returns keys_t ``[B*H, Dh, S]`` and values ``[B*H, S, Dh]``, both contiguous.
        """
        if not self.static or self._key_buffer is None or self._value_buffer is None:
            raise ValueError("cache: folded_heads needs a filled static (cross-attention) cache")
        if self._folded is None:
            batch, heads, length, head_dim = self._key_buffer.shape
            keys_t = self._key_buffer.transpose(2, 3).reshape(batch * heads, head_dim, length)  # [B*H, Dh, S]
            values = self._value_buffer.reshape(batch * heads, length, self._value_buffer.shape[3])  # [B*H, S, Dh]
            self._folded = (keys_t.contiguous(), values.contiguous())
        return self._folded

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
        self._spare = None  # the room changed: the next reorder allocates its target anew
        assert self._key_buffer is not None and self._value_buffer is not None
        self._key_buffer[:, :, : self._length].copy_(old_keys)
        self._value_buffer[:, :, : self._length].copy_(old_values)

    def reorder(self, index: Tensor) -> None:
        """Select batch rows ``index`` (beam search: each new beam's parent).

        A growing cache moves only its filled positions, into a second buffer of the same
        room kept from the previous reorder (the two then swap roles): beam search
        reorders at every step, and allocating a whole new buffer each time cost 1.58 ms
        a tensor against 0.56 for this at 160 rows, 40 of 64 positions filled (one Zen 3
        thread). Views of ``keys`` / ``values`` taken before a reorder are therefore not
        to be kept past the next one.
        """
        if self._key_buffer is None or self._value_buffer is None:
            return
        self._folded = None
        if self.static or (torch.is_grad_enabled() and self._key_buffer.requires_grad):
            # Static state is selected whole; under autograd (out= has no gradient) so is a growing one.
            self._key_buffer = self._key_buffer.index_select(0, index)
            self._value_buffer = self._value_buffer.index_select(0, index)
            return
        rows = index.shape[0]
        current = (self._key_buffer, self._value_buffer)
        target = self._spare
        if target is None or target[0].shape[0] != rows or target[0].shape[2] != self.capacity:
            batch, heads, capacity, head_dim = self._key_buffer.shape
            target = (
                self._key_buffer.new_empty(rows, heads, capacity, head_dim),  # [B', H, capacity, Dh]
                self._value_buffer.new_empty(rows, heads, capacity, self._value_buffer.shape[3]),
            )
        filled = self._length
        torch.index_select(current[0][:, :, :filled], 0, index, out=target[0][:, :, :filled])
        torch.index_select(current[1][:, :, :filled], 0, index, out=target[1][:, :, :filled])
        self._key_buffer, self._value_buffer = target
        # The old buffers become the next reorder's target when they have the same shape.
        self._spare = current if current[0].shape == target[0].shape else None


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
    ``decoder.new_cache()``) and pass it to every ``decoder(..., cache=cache)`` call. It serves
    one memory: its cross-attention keys are projected from the first call's, and reused (a memory
    of another length is refused; one of the same shape would be read as the first).
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
        if not isinstance(index, Tensor):  # a list has no .dim(): an AttributeError naming nothing
            raise TypeError(f"DecoderCache.reorder: index must be a 1-D long tensor, got {type(index).__name__}")
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
        try:
            for layer in self.layers:
                layer.reorder(index, include_static)
        except IndexError:
            # The range is not checked beforehand: that would read the index at every step,
            # which on a GPU waits for the device. Here the call has failed anyway.
            keys = self.layers[0].self_attention.keys  # [B, H, T, Dh] or None
            rows = static_keys.shape[0] if static_keys is not None else None if keys is None else keys.shape[0]
            expected = "rows of the cache" if rows is None else f"values in [0, {rows})"
            raise IndexError(
                f"DecoderCache.reorder: index must hold {expected}, got values from {int(index.min())} "
                f"to {int(index.max())}"
            ) from None
