"""One decoding step of a :class:`TransformerDecoder` for one new position, in few operator calls.

The modules compute a step correctly for any input, and pay for that generality at every
call: each attention transposes to batch-first and back, splits and merges heads, checks
and merges masks, slices its fused projection, and dispatches to
``scaled_dot_product_attention``. At one new position of a greedy step at batch 1 that
was about 650 operator calls, as costly as the step's matrix products
(docs/results.md#ctranslate2). After the first step of a search nothing of that varies:
the query is one position, the self-attention sees every cached position, the
cross-attention sees the memory under one padding mask. This class does exactly that
step and nothing else:

- every product is one ``addmm`` on ``[B, E]`` rows (no 3-D reshapes);
- in float32, heads are folded into the batch (``[B*H, 1, Dh]``), so that each attention
  is two batched products and one softmax: scores ``Q K^T`` scaled inside the product
  (and, for the cross-attention, the padding mask added inside it), the softmax, then
  ``@ V``; ``scaled_dot_product_attention`` is slower at one query in float32 (4.6 against
  0.8 ms at 160 rows and 40 cached positions, one Zen 3 thread), but several times faster
  in bf16, which therefore uses it (``SDPA_DTYPES``), through ``nn/sdpa.py``: on CUDA the
  self-attention's key length is new at every step, and cuDNN attention would plan anew
  for each;
- the cross-attention's keys and values are laid out for those products once per search
  (:meth:`AttentionCache.folded_heads`), the self-attention's are appended in place
  (:meth:`AttentionCache.append_position`).

It reads the modules' own parameters (views, no copies), so it is built once per search
for free and never disagrees with the weights. It computes the same function as the
modules in eval mode (tested against them: same tokens, outputs within float rounding);
anything it does not cover (training, autograd, autocast, hooks, shape tracing, the
explicit path, ``add_bias_kv`` / ``add_zero_attn``, separate key/value widths, a source
row with every position hidden) stays with the modules: see
:meth:`DecoderStep.unsupported_reason` and :meth:`DecoderStep.applies`.

Shape legend: B batch rows, E d_model, H heads, Dh head size, t cached target positions
(the new one included), S memory length.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor, nn

from transformer_lab.nn import masks, sdpa
from transformer_lab.nn.attention import MultiheadAttention
from transformer_lab.nn.cache import AttentionCache, DecoderCache, DecoderLayerCache
from transformer_lab.nn.decoder import TransformerDecoder, TransformerDecoderLayer
from transformer_lab.nn.residual import residual_sublayers
from transformer_lab.nn.tracing import active_recorder

__all__ = ["DecoderStep"]

# A product: [B, in] -> [B, out].
Product = Callable[[Tensor], Tensor]

# The dtypes whose attention goes through scaled_dot_product_attention. At one query the
# folded products below are faster in float32 and slower in bf16, where a batched product
# pays a per-call floor and copies the cache's strided views (docs/results.md#bf16-decoding).
SDPA_DTYPES = (torch.bfloat16, torch.float16)


def _product(weight: Tensor, bias: Tensor | None) -> Product:
    """``x @ weight^T + bias`` as one ``addmm`` (the transposed view is made once, here)."""
    weight_t = weight.t()  # [in, out], a view
    if bias is None:
        return lambda x: torch.mm(x, weight_t)
    return lambda x: torch.addmm(bias, x, weight_t)


def _layer_product(module: nn.Module) -> Product:
    """A feed-forward layer as a product: a plain Linear's weight read directly, anything else called.

    A quantized copy's layers (``--precision int8``) are not ``nn.Linear``; they are called
    as the modules they are.
    """
    if type(module) is nn.Linear:
        return _product(module.weight, module.bias)
    return module


def _has_hooks(module: nn.Module) -> bool:
    return any(bool(part._forward_hooks or part._forward_pre_hooks) for part in module.modules())


class _LayerStep:
    """The parameters of one decoder layer, arranged for a single-position step."""

    def __init__(self, layer: TransformerDecoderLayer) -> None:
        self_attention, cross_attention = layer.self_attn, layer.multihead_attn
        self.num_heads = self_attention.num_heads
        self.head_dim = self_attention.head_dim
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.self_qkv = _product(self_attention.in_proj_weight, self_attention.in_proj_bias)  # [B, E] -> [B, 3E]
        self.self_out = _product(self_attention.out_proj.weight, self_attention.out_proj.bias)
        self.cross_query = _product(*cross_attention.query_projection())  # [B, E] -> [B, E]
        self.cross_out = _product(cross_attention.out_proj.weight, cross_attention.out_proj.bias)
        self.feed_forward_in = _layer_product(layer.linear1)
        self.feed_forward_out = _layer_product(layer.linear2)
        self.activation = layer.activation
        self.norms = (layer.norm1, layer.norm2, layer.norm3)
        self.norm_first = layer.norm_first

    def __call__(self, x: Tensor, layer_cache: DecoderLayerCache, cross_mask: Tensor | None, zero: Tensor) -> Tensor:
        """The three sublayers in their residual blocks, wired as the modules wire them.

        Shape: x ``[B, E]`` -> ``[B, E]``.
        """
        norm1, norm2, norm3 = self.norms

        def self_attend(rows: Tensor) -> Tensor:
            return self._self_attention(rows, layer_cache.self_attention, zero)

        def cross_attend(rows: Tensor) -> Tensor:
            return self._cross_attention(rows, layer_cache.cross_attention, cross_mask, zero)

        blocks = ((norm1, self_attend), (norm2, cross_attend), (norm3, self._feed_forward))
        return residual_sublayers(x, blocks, self.norm_first)

    def _self_attention(self, x: Tensor, cache: AttentionCache, zero: Tensor) -> Tensor:
        batch = x.shape[0]
        heads, head_dim = self.num_heads, self.head_dim
        query, key, value = self.self_qkv(x).view(batch, 3, heads, head_dim).unbind(1)  # three [B, H, Dh]
        if x.dtype in SDPA_DTYPES:
            # SDPA takes the cache's [B, H, t, Dh] views as they are: no folded views needed.
            all_keys, all_values = cache.update(key.unsqueeze(2), value.unsqueeze(2))  # two [B, H, t, Dh]
            context = sdpa.scaled_dot_product_attention(query.unsqueeze(2), all_keys, all_values)  # [B, H, 1, Dh]
            return self.self_out(context.view(batch, heads * head_dim))  # [B, E]
        keys, values = cache.append_position(key, value)  # two [B*H, t, Dh]
        folded_query = query.reshape(batch * heads, 1, head_dim)  # [B*H, 1, Dh]
        # beta=0: the product alone, scaled by 1/sqrt(Dh) inside it.
        scores = torch.baddbmm(zero, folded_query, keys.transpose(1, 2), beta=0.0, alpha=self.scale)  # [B*H, 1, t]
        context = torch.bmm(torch.softmax(scores, dim=-1), values)  # [B*H, 1, Dh]
        return self.self_out(context.view(batch, heads * head_dim))  # [B, E]

    def _cross_attention(self, x: Tensor, cache: AttentionCache, mask: Tensor | None, zero: Tensor) -> Tensor:
        """``mask``: the folded additive ``[B*H, 1, S]`` mask, or under SDPA its ``[B, 1, 1, S]`` "may attend" mask."""
        batch = x.shape[0]
        heads, head_dim = self.num_heads, self.head_dim
        if x.dtype in SDPA_DTYPES:
            query = self.cross_query(x).view(batch, heads, 1, head_dim)  # [B, H, 1, Dh]
            keys, values = cache.keys, cache.values  # two [B, H, S, Dh]
            assert keys is not None and values is not None  # filled by the first step
            context = sdpa.scaled_dot_product_attention(query, keys, values, attn_mask=mask)  # [B, H, 1, Dh]
            return self.cross_out(context.view(batch, heads * head_dim))  # [B, E]
        keys_t, values = cache.folded_heads()  # [B*H, Dh, S], [B*H, S, Dh]
        query = self.cross_query(x).view(batch * heads, 1, head_dim)  # [B*H, 1, Dh]
        if mask is None:
            scores = torch.baddbmm(zero, query, keys_t, beta=0.0, alpha=self.scale)  # [B*H, 1, S]
        else:
            scores = torch.baddbmm(mask, query, keys_t, alpha=self.scale)  # [B*H, 1, S], -inf where hidden
        context = torch.bmm(torch.softmax(scores, dim=-1), values)  # [B*H, 1, Dh]
        return self.cross_out(context.view(batch, heads * head_dim))  # [B, E]

    def _feed_forward(self, x: Tensor) -> Tensor:
        return self.feed_forward_out(self.activation(self.feed_forward_in(x)))  # [B, E]


class DecoderStep:
    """A :class:`TransformerDecoder`'s step for one new position, given a filled cache.

    Build it once per search (``DecoderStep(decoder)`` where :meth:`unsupported_reason` is None) and
    call it at every step after the first, while :meth:`applies`: the first step, with its
    empty cache, goes through the decoder itself, which fills the caches this step reads.
    """

    def __init__(self, decoder: TransformerDecoder) -> None:
        reason = DecoderStep.unsupported_reason(decoder)
        if reason is not None:
            raise ValueError(f"DecoderStep: decoder not supported: {reason}")
        layers = [layer for layer in decoder.layers if isinstance(layer, TransformerDecoderLayer)]  # all of them
        self.layers = [_LayerStep(layer) for layer in layers]
        self.norm = decoder.norm
        self.num_heads = self.layers[0].num_heads
        self._mask_source: Tensor | None = None
        self._folded_mask: Tensor | None = None

    @staticmethod
    def unsupported_reason(decoder: nn.Module) -> str | None:
        """Why this step cannot stand in for ``decoder``'s modules, or None when it can."""
        if not isinstance(decoder, TransformerDecoder):
            return f"expected a TransformerDecoder, got {type(decoder).__name__}"
        if decoder.training:
            return "the decoder is in training mode (dropout)"
        if _has_hooks(decoder):
            return "a module has forward hooks"
        for layer in decoder.layers:
            if not isinstance(layer, TransformerDecoderLayer) or not layer.batch_first:
                return "layers must be batch-first TransformerDecoderLayers"
            for attention in (layer.self_attn, layer.multihead_attn):
                if not isinstance(attention, MultiheadAttention):
                    return "attention must be this package's MultiheadAttention"
                if not attention._qkv_same_embed_dim or attention.bias_k is not None or attention.add_zero_attn:
                    return "attention with kdim/vdim, add_bias_kv or add_zero_attn"
                if attention.explicit:
                    return "the explicit attention path is forced"
                if type(attention.out_proj) is not nn.Linear:
                    return "attention output projections must be plain Linear layers"
        return None

    @staticmethod
    def applies(x: Tensor, cache: DecoderCache) -> bool:
        """Whether this call may take the step: one new position after a filled first step, plain inference.

        Shape: x ``[B, t_new, E]``.
        """
        return (
            x.shape[1] == 1
            and cache.length > 0
            and not torch.is_grad_enabled()
            and not torch.is_autocast_enabled(x.device.type)
            and active_recorder() is None
        )

    def __call__(self, x: Tensor, cache: DecoderCache, memory_key_padding_mask: Tensor | None) -> Tensor:
        """Run every layer (and the final norm) for one new position.

        ``memory_key_padding_mask`` must leave every row at least one visible position
        (a fully hidden row is the modules' business: they return zeros there).

        Shape:
            x ``[B, E]``, memory_key_padding_mask ``[B, S]`` bool or None; returns ``[B, E]``.
        """
        cross_mask = self._cross_mask(memory_key_padding_mask, x.dtype)  # [B*H, 1, S] or None
        zero = x.new_zeros(1, 1, 1)  # the ignored input of the unmasked products (beta=0)
        for layer, layer_cache in zip(self.layers, cache.layers, strict=True):
            x = layer(x, layer_cache, cross_mask, zero)
        if self.norm is not None:
            x = self.norm(x)
        return x

    def _cross_mask(self, key_padding_mask: Tensor | None, dtype: torch.dtype) -> Tensor | None:
        """The padding mask as the cross-attention takes it, rebuilt only when the mask tensor changes.

        Shape: key_padding_mask ``[B, S]`` bool; returns the additive ``[B*H, 1, S]`` mask of
        ``dtype``, or for ``SDPA_DTYPES`` SDPA's ``[B, 1, 1, S]`` bool "may attend" mask.
        """
        if key_padding_mask is None:
            return None
        if key_padding_mask is not self._mask_source or self._folded_mask is None:
            if dtype in SDPA_DTYPES:
                visible = masks.to_sdpa_mask(key_padding_mask)  # [B, S], True = may attend
                assert visible is not None
                self._folded_mask = visible.view(visible.shape[0], 1, 1, visible.shape[1])  # [B, 1, 1, S]
            else:
                self._folded_mask = masks.folded_additive_key_mask(key_padding_mask, self.num_heads, dtype)
            self._mask_source = key_padding_mask
        return self._folded_mask
