"""Decoder layer and decoder stack, twins of torch's ``TransformerDecoderLayer`` / ``TransformerDecoder``,
plus incremental decoding with a key/value cache.

Shape legend: N batch, T target length, S source (memory) length, E d_model. Inputs are
``[T, N, E]`` / ``[S, N, E]``, or batch-first with ``batch_first=True``.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab.nn import arguments
from transformer_lab.nn.activation import Activation, resolve_activation
from transformer_lab.nn.attention import MultiheadAttention
from transformer_lab.nn.cache import AttentionCache, DecoderCache, DecoderLayerCache
from transformer_lab.nn.dropout import Dropout, activation_dropout
from transformer_lab.nn.residual import residual_sublayers
from transformer_lab.nn.tracing import scope

__all__ = ["TransformerDecoderLayer", "TransformerDecoder"]


class TransformerDecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder memory, feed-forward.

    Each sublayer sits in a residual block with LayerNorm, post-norm (the paper) or
    pre-norm (``norm_first=True``).
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: Activation = F.relu,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        d_model, nhead, dim_feedforward = arguments.check_layer_sizes(d_model, nhead, dim_feedforward, layer_norm_eps)
        norm_first, bias = arguments.check_flag("norm_first", norm_first), arguments.check_flag("bias", bias)
        batch_first = arguments.check_flag("batch_first", batch_first)
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, device=device, dtype=dtype
        )
        self.multihead_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, device=device, dtype=dtype
        )
        self.linear1 = nn.Linear(d_model, dim_feedforward, bias=bias, device=device, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model, bias=bias, device=device, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = resolve_activation(activation)
        self.batch_first = batch_first

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
        *,
        cache: DecoderLayerCache | None = None,
    ) -> Tensor:
        """Decode ``tgt`` against ``memory``.

        With ``cache``, ``tgt`` holds only the new positions; their self-attention sees the
        cached earlier positions, and ``tgt_mask`` / ``tgt_key_padding_mask`` (if given)
        cover all of them (``[T_new, T_cached + T_new]``, ``[N, T_cached + T_new]``).
        Without ``tgt_mask`` the new positions get the causal mask.

        Shape:
            tgt ``[T, N, E]``, memory ``[S, N, E]`` (batch-first: ``[N, T, E]``,
            ``[N, S, E]``), tgt_mask ``[T, T]``, memory_mask ``[T, S]``,
            tgt_key_padding_mask ``[N, T]``, memory_key_padding_mask ``[N, S]``;
            returns tgt's shape.
        """
        weight = self.norm1.weight  # a LayerNorm's: linear1's is a method once the feed-forward is quantized
        for name, tensor in (("tgt", tgt), ("memory", memory)):
            if not isinstance(tensor, Tensor) or weight is None or tensor.dtype != weight.dtype:
                arguments.check_input(name, tensor, weight, "TransformerDecoderLayer")
        if type(tgt_is_causal) is not bool:
            tgt_is_causal = arguments.check_flag("tgt_is_causal", tgt_is_causal)
        if type(memory_is_causal) is not bool:
            memory_is_causal = arguments.check_flag("memory_is_causal", memory_is_causal)
        if cache is not None and tgt_mask is None:
            new_positions = tgt.shape[1 if self.batch_first else 0]
            # One new position may see every cached one; several need the shifted causal mask.
            tgt_is_causal = new_positions > 1
        self_cache = None if cache is None else cache.self_attention
        cross_cache = None if cache is None else cache.cross_attention

        def self_attend(x: Tensor) -> Tensor:
            return self._self_attention_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal, self_cache)

        def cross_attend(x: Tensor) -> Tensor:
            return self._cross_attention_block(
                x, memory, memory_mask, memory_key_padding_mask, memory_is_causal, cross_cache
            )

        blocks = ((self.norm1, self_attend), (self.norm2, cross_attend), (self.norm3, self._feed_forward_block))
        return residual_sublayers(tgt, blocks, self.norm_first)

    def _self_attention_block(
        self,
        x: Tensor,
        attn_mask: Tensor | None,
        key_padding_mask: Tensor | None,
        is_causal: bool,
        cache: AttentionCache | None,
    ) -> Tensor:
        with scope("self_attn"):
            attended = self.self_attn(
                x,
                x,
                x,
                attn_mask=attn_mask,
                key_padding_mask=key_padding_mask,
                need_weights=False,
                is_causal=is_causal,
                cache=cache,
            )[0]
        return self.dropout1(attended)

    def _cross_attention_block(
        self,
        x: Tensor,
        memory: Tensor,
        attn_mask: Tensor | None,
        key_padding_mask: Tensor | None,
        is_causal: bool,
        cache: AttentionCache | None,
    ) -> Tensor:
        with scope("multihead_attn"):
            attended = self.multihead_attn(
                x,
                memory,
                memory,
                attn_mask=attn_mask,
                key_padding_mask=key_padding_mask,
                need_weights=False,
                is_causal=is_causal,
                cache=cache,
            )[0]
        return self.dropout2(attended)

    def _feed_forward_block(self, x: Tensor) -> Tensor:
        return self.dropout3(self.linear2(activation_dropout(self.activation, self.dropout, self.linear1(x))))


class TransformerDecoder(nn.Module):
    """``num_layers`` deep copies of ``decoder_layer``; every layer reads the same ``memory``."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: nn.Module | None = None) -> None:
        super().__init__()
        num_layers = arguments.check_num_layers(num_layers)
        self.layers = nn.ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def new_cache(self) -> DecoderCache:
        """An empty key/value cache for incremental decoding with this decoder."""
        return DecoderCache(self.num_layers)

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
        *,
        cache: DecoderCache | None = None,
    ) -> Tensor:
        """Run every layer; with ``cache``, only the new target positions are computed.

        Decoding step by step with a cache gives the same outputs as the full causal
        decoder on the whole prefix.

        Shape:
            tgt ``[T, N, E]`` (batch_first: ``[N, T, E]``), memory ``[S, N, E]``;
            masks as in :class:`TransformerDecoderLayer`; returns tgt's shape.
        """
        tgt_is_causal = arguments.check_optional_flag("tgt_is_causal", tgt_is_causal)
        memory_is_causal = arguments.check_flag("memory_is_causal", memory_is_causal)
        if cache is not None and not isinstance(cache, DecoderCache):
            raise TypeError(f"cache: expected a DecoderCache (decoder.new_cache()), got {type(cache).__name__}")
        if cache is not None and len(cache.layers) != self.num_layers:
            raise ValueError(
                f"cache must have one entry per decoder layer ({self.num_layers}), got {len(cache.layers)}"
            )
        output = tgt
        for index, layer in enumerate(self.layers):
            with scope(f"decoder.layers.{index}"):
                output = layer(
                    output,
                    memory,
                    tgt_mask=tgt_mask,
                    memory_mask=memory_mask,
                    tgt_key_padding_mask=tgt_key_padding_mask,
                    memory_key_padding_mask=memory_key_padding_mask,
                    tgt_is_causal=bool(tgt_is_causal),
                    memory_is_causal=memory_is_causal,
                    cache=None if cache is None else cache.layers[index],
                )
        if self.norm is not None:
            output = self.norm(output)
        return output
