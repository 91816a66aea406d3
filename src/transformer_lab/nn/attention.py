"""Multi-head attention, a from-scratch twin of ``torch.nn.MultiheadAttention``.

Same constructor and forward arguments, same parameter names (so a torch ``state_dict``
loads with ``strict=True``), same outputs. Two paths compute the same thing:

* the explicit path, written out step by step with the shape of every tensor: taken when
  the attention weights are wanted (``need_weights=True``), when ``explicit`` is set on
  the module, or while a shape recorder is active;
* the fast path through ``F.scaled_dot_product_attention`` (by way of ``nn/sdpa.py``,
  which keeps CUDA off backends that plan per shape), taken otherwise (the Transformer
  layers never ask for weights, as in torch).

Differences from torch, on purpose:

* a query row whose keys are all hidden gets attention weights of zero, so its mixture of
  values is zero and the module returns ``out_proj.bias`` there, with finite gradients
  (torch returns NaN);
* ``is_causal=True`` without ``attn_mask`` builds the causal mask instead of raising;
* ``forward`` takes an optional ``cache`` for incremental decoding (see ``cache.py``).

Shape legend: N batch, L query length (tgt_len), S key length (src_len), E embed_dim,
H num_heads, Dh head_dim = E / H.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab.nn import arguments, host_reads, masks, sdpa
from transformer_lab.nn.cache import AttentionCache
from transformer_lab.nn.tracing import ATTENTION_WEIGHTS, active_recorder, record

__all__ = ["MultiheadAttention", "explicit_attention", "merge_heads", "set_attention_path"]


class MultiheadAttention(nn.Module):
    """Multi-head attention with torch's interface (see the module docstring).

    Args:
        embed_dim: E, the model width; must be divisible by ``num_heads``.
        num_heads: H, the number of parallel heads.
        dropout: dropout on the attention weights (training only).
        bias: add biases to the input and output projections.
        add_bias_kv: append one learned key and value to the sequence.
        add_zero_attn: append one all-zero key and value (after the heads are split).
        kdim, vdim: widths of key and value inputs (default E); when either differs
            from E the projections are separate (``q_proj_weight`` ...), as in torch.
        batch_first: inputs are ``[N, L, E]`` instead of ``[L, N, E]``.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        # Checked here, once: a float head count was accepted and failed at the first call, deep in torch.
        embed_dim = arguments.check_size("embed_dim", embed_dim)
        num_heads = arguments.check_size("num_heads", num_heads)
        kdim = arguments.check_optional_size("kdim", kdim)
        vdim = arguments.check_optional_size("vdim", vdim)
        dropout = arguments.check_dropout("dropout", dropout)
        bias, add_bias_kv = arguments.check_flag("bias", bias), arguments.check_flag("add_bias_kv", add_bias_kv)
        add_zero_attn = arguments.check_flag("add_zero_attn", add_zero_attn)
        batch_first = arguments.check_flag("batch_first", batch_first)
        if embed_dim % num_heads != 0:
            raise ValueError(
                f"embed_dim must be divisible by num_heads, got embed_dim={embed_dim}, " f"num_heads={num_heads}"
            )
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        self.add_zero_attn = add_zero_attn
        # Set to True to force the explicit path (tests, the shape explainer).
        self.explicit = False

        if self._qkv_same_embed_dim:
            self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim, device=device, dtype=dtype))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = nn.Parameter(torch.empty(embed_dim, embed_dim, device=device, dtype=dtype))
            self.k_proj_weight = nn.Parameter(torch.empty(embed_dim, self.kdim, device=device, dtype=dtype))
            self.v_proj_weight = nn.Parameter(torch.empty(embed_dim, self.vdim, device=device, dtype=dtype))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = nn.Parameter(torch.empty(3 * embed_dim, device=device, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        self.bias_k: nn.Parameter | None
        self.bias_v: nn.Parameter | None
        if add_bias_kv:
            self.bias_k = nn.Parameter(torch.empty(1, 1, embed_dim, device=device, dtype=dtype))
            self.bias_v = nn.Parameter(torch.empty(1, 1, embed_dim, device=device, dtype=dtype))
        else:
            self.bias_k = self.bias_v = None
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        # The same initialisation as torch, so freshly built twins are statistically alike.
        if self._qkv_same_embed_dim:
            nn.init.xavier_uniform_(self.in_proj_weight)
        else:
            nn.init.xavier_uniform_(self.q_proj_weight)
            nn.init.xavier_uniform_(self.k_proj_weight)
            nn.init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            nn.init.constant_(self.in_proj_bias, 0.0)
            nn.init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None and self.bias_v is not None:
            nn.init.xavier_normal_(self.bias_k)
            nn.init.xavier_normal_(self.bias_v)

    # ----------------------------------------------------------------------------------
    # Projections
    # ----------------------------------------------------------------------------------
    def _projection_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        if self._qkv_same_embed_dim:
            weight_q, weight_k, weight_v = self.in_proj_weight.chunk(3)  # three [E, E]
            return weight_q, weight_k, weight_v
        return self.q_proj_weight, self.k_proj_weight, self.v_proj_weight

    def _projection_biases(self) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        if self.in_proj_bias is None:
            return None, None, None
        bias_q, bias_k, bias_v = self.in_proj_bias.chunk(3)  # three [E]
        return bias_q, bias_k, bias_v

    def _project(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        project_key_value: bool,
        same_query_key_value: bool,
        same_key_value: bool,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Project batch-first inputs; fuse the matrix products where the inputs coincide.

        Shape:
            query ``[N, L, E]``, key ``[N, S, kdim]``, value ``[N, S, vdim]``;
            returns ``[N, L, E]``, ``[N, S, E]``, ``[N, S, E]`` (or None when not projected).
        """
        # The weights are sliced only as far as the path below needs them: at every
        # decoding step the cross-attention projects its query alone, and the fused
        # self-attention needs no slice at all (chunking all six pieces there was a dozen
        # operator calls a step for nothing).
        if not project_key_value:
            return F.linear(query, *self.query_projection()), None, None
        if self._qkv_same_embed_dim and same_query_key_value:
            # Self-attention: one [E, 3E] product instead of three.
            projected_query, projected_key, projected_value = F.linear(
                query, self.in_proj_weight, self.in_proj_bias
            ).chunk(3, dim=-1)
            return projected_query, projected_key, projected_value
        if self._qkv_same_embed_dim and same_key_value:
            # Cross-attention: keys and values from the same memory in one product.
            projected_key, projected_value = F.linear(key, *self.key_value_projection()).chunk(2, dim=-1)
            return F.linear(query, *self.query_projection()), projected_key, projected_value
        weight_q, weight_k, weight_v = self._projection_weights()
        bias_q, bias_k, bias_v = self._projection_biases()
        return F.linear(query, weight_q, bias_q), F.linear(key, weight_k, bias_k), F.linear(value, weight_v, bias_v)

    def query_projection(self) -> tuple[Tensor, Tensor | None]:
        """W_q ``[E, E]`` and b_q ``[E]`` (or None): the first rows of the fused projection, or their own."""
        weight = self.in_proj_weight[: self.embed_dim] if self._qkv_same_embed_dim else self.q_proj_weight
        return weight, None if self.in_proj_bias is None else self.in_proj_bias[: self.embed_dim]

    def key_value_projection(self) -> tuple[Tensor, Tensor | None]:
        """W_k|W_v ``[2E, E]`` and b_k|b_v ``[2E]`` (or None): the fused projection's last rows, for one memory.

        Only with the fused projection (``kdim == vdim == embed_dim``).
        """
        if not self._qkv_same_embed_dim:
            raise ValueError("key_value_projection: expected the fused projection, got separate kdim/vdim weights")
        bias = None if self.in_proj_bias is None else self.in_proj_bias[self.embed_dim :]
        return self.in_proj_weight[self.embed_dim :], bias

    def split_heads(self, tensor: Tensor) -> Tensor:
        """``[N, L, E] -> [N, H, L, Dh]``; unflatten names no batch or length, so a traced graph keeps them dynamic."""
        return tensor.unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2)

    # ----------------------------------------------------------------------------------
    # Forward
    # ----------------------------------------------------------------------------------
    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
        *,
        cache: AttentionCache | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            key_padding_mask: True (or ``-inf``) marks padded keys.
            need_weights: also return the attention weights (explicit path).
            attn_mask: True (or ``-inf``) marks query/key pairs that may not attend.
            average_attn_weights: average the returned weights over heads.
            is_causal: hide future keys; with ``attn_mask`` given it is only a hint.
            cache: incremental decoding state; ``query`` then holds only new positions.

        Shape:
            query ``[L, N, E]`` (``[N, L, E]`` if batch_first, ``[L, E]`` unbatched),
            key ``[S, N, kdim]``, value ``[S, N, vdim]``, key_padding_mask ``[N, S]``,
            attn_mask ``[L, S]`` or ``[N*H, L, S]``.
            Returns output shaped like query, and weights ``[N, L, S]`` (averaged) or
            ``[N, H, L, S]``, or None.
        """
        is_batched = self._check_inputs(query, key, value)
        # A string is true: is_causal="no" hid the future keys. Checked by type only, as every call is.
        if type(need_weights) is not bool:
            need_weights = arguments.check_flag("need_weights", need_weights)
        if type(average_attn_weights) is not bool:
            average_attn_weights = arguments.check_flag("average_attn_weights", average_attn_weights)
        if type(is_causal) is not bool:
            is_causal = arguments.check_flag("is_causal", is_causal)
        if cache is not None and not isinstance(cache, AttentionCache):
            raise TypeError(f"cache: expected an AttentionCache, got {type(cache).__name__}")
        if key_padding_mask is not None:
            arguments.check_tensor("key_padding_mask", key_padding_mask)  # before the unbatched case unsqueezes it
        if active_recorder() is not None:
            layout = "[batch, tgt_len, embed_dim]" if self.batch_first else "[tgt_len, batch, embed_dim]"
            record("query as given", query, layout if is_batched else "[tgt_len, embed_dim]")
        # Identity decides which projections can be fused; transposes below make new objects.
        same_query_key_value = query is key and key is value
        same_key_value = key is value
        if not is_batched:
            # Unbatched inputs become a batch of one; the outputs are squeezed back below.
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                if key_padding_mask.dim() != 1:  # said before the unsqueeze, in the shape given
                    raise ValueError(
                        f"key_padding_mask must have shape [src_len] = [{key.shape[0]}] with unbatched inputs, "
                        f"got {list(key_padding_mask.shape)}"
                    )
                key_padding_mask = key_padding_mask.unsqueeze(0)
            if cache is not None:
                raise ValueError("cache: incremental decoding needs batched inputs, got unbatched query")
        if not self.batch_first or not is_batched:
            # Internally everything is batch-first: [N, L, E].
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)

        batch_size, query_len, _ = query.shape  # N, L
        if key.shape[0] != batch_size or value.shape[0] != batch_size:
            raise ValueError(
                f"query, key and value must share the batch size, got query {batch_size}, "
                f"key {key.shape[0]}, value {value.shape[0]}"
            )
        if key.shape[1] != value.shape[1]:
            raise ValueError(f"key and value must have the same length, got key {key.shape[1]}, value {value.shape[1]}")
        if cache is not None and (self.bias_k is not None or self.add_zero_attn):
            raise ValueError("cache: incremental decoding does not support add_bias_kv or add_zero_attn")

        reuse_cached = cache is not None and cache.static and cache.keys is not None
        record("query", query, "[batch, tgt_len, embed_dim]", "batch-first inside the module")
        record("key", key, "[batch, src_len, kdim]")
        record("value", value, "[batch, src_len, vdim]")
        projected_query, projected_key, projected_value = self._project(
            query, key, value, not reuse_cached, same_query_key_value, same_key_value
        )
        if active_recorder() is not None:
            weight_q, weight_k, weight_v = self._projection_weights()
            record("W_q", weight_q, "[embed_dim, embed_dim]")
            record("W_k", weight_k, "[embed_dim, kdim]")
            record("W_v", weight_v, "[embed_dim, vdim]")
            record("Q = query W_q^T + b_q", projected_query, "[batch, tgt_len, embed_dim]")
            if projected_key is not None and projected_value is not None:
                record("K = key W_k^T + b_k", projected_key, "[batch, src_len, embed_dim]")
                record("V = value W_v^T + b_v", projected_value, "[batch, src_len, embed_dim]")

        q = self.split_heads(projected_query)  # [N, H, L, Dh]
        if reuse_cached:
            assert cache is not None and cache.keys is not None and cache.values is not None
            k, v = cache.keys, cache.values  # [N, H, S, Dh] from the first step
            if k.shape[0] != batch_size:
                raise ValueError(
                    f"cache: cached batch size {k.shape[0]} differs from the query's {batch_size}; "
                    "reorder the cache when the batch changes"
                )
            if key.shape[1] != k.shape[2]:  # else another memory's keys would be read without a word
                raise ValueError(
                    f"cache: its cross-attention holds the keys of a memory of {k.shape[2]} positions, got a memory "
                    f"of {key.shape[1]}; a cache serves one memory: make a new one (decoder.new_cache()) for another"
                )
        else:
            assert projected_key is not None and projected_value is not None
            if self.bias_k is not None and self.bias_v is not None:
                bias_k = self.bias_k.expand(batch_size, 1, self.embed_dim)  # [N, 1, E]
                bias_v = self.bias_v.expand(batch_size, 1, self.embed_dim)  # [N, 1, E]
                projected_key = torch.cat([projected_key, bias_k], dim=1)  # [N, S+1, E]
                projected_value = torch.cat([projected_value, bias_v], dim=1)  # [N, S+1, E]
            k = self.split_heads(projected_key)  # [N, H, S, Dh]
            v = self.split_heads(projected_value)  # [N, H, S, Dh]
            if cache is not None:
                k, v = cache.update(k, v)  # [N, H, t, Dh]: earlier positions + the new ones

        # Masks are given for the caller's keys: the cached ones plus the new ones, before
        # any added bias/zero key.
        key_len = k.shape[2] - (1 if self.bias_k is not None else 0)
        if key_padding_mask is not None:
            masks.check_key_padding_mask(key_padding_mask, batch_size=batch_size, key_len=key_len, device=query.device)
        if attn_mask is not None:
            masks.check_attn_mask(
                attn_mask,
                batch_size=batch_size,
                num_heads=self.num_heads,
                query_len=query_len,
                key_len=key_len,
                device=query.device,
            )

        sdpa_causal = False
        if is_causal and attn_mask is None:
            if key_padding_mask is None and query_len == key_len and self.bias_k is None and not self.add_zero_attn:
                sdpa_causal = True
            else:
                attn_mask = masks.causal_mask(query_len, key_len, device=query.device)  # [L, S]

        if self.bias_k is not None:
            attn_mask = _append_visible_key(attn_mask)
            key_padding_mask = _append_visible_key(key_padding_mask)
        if self.add_zero_attn:
            zeros = k.new_zeros(batch_size, self.num_heads, 1, self.head_dim)  # [N, H, 1, Dh]
            k = torch.cat([k, zeros], dim=2)  # [N, H, S+1, Dh]
            v = torch.cat([v, zeros], dim=2)  # [N, H, S+1, Dh]
            attn_mask = _append_visible_key(attn_mask)
            key_padding_mask = _append_visible_key(key_padding_mask)

        merged_mask = masks.merge_masks(
            attn_mask, key_padding_mask, batch_size=batch_size, num_heads=self.num_heads, dtype=q.dtype
        )  # [N or 1, H or 1, L or 1, S]
        hidden_rows = None
        if merged_mask is not None:
            hidden_rows = masks.fully_hidden_rows(merged_mask)  # [N or 1, H or 1, L or 1, 1]
            if not host_reads.host_reads_wait(hidden_rows.device) and not bool(hidden_rows.any()):
                # The usual case: no row to unhide or zero. Asking costs no device sync on
                # the CPU, and skipping the two masked fills saves a copy of the context
                # forward and backward (about 4 % of an attention call).
                hidden_rows = None
            else:
                merged_mask = masks.unhide_rows(merged_mask, hidden_rows)

        dropout_p = self.dropout if self.training else 0.0
        explicit = need_weights or self.explicit or active_recorder() is not None
        if explicit:
            context, weights = explicit_attention(q, k, v, merged_mask, hidden_rows, sdpa_causal, dropout_p)
        else:
            context = sdpa.scaled_dot_product_attention(
                q, k, v, attn_mask=masks.to_sdpa_mask(merged_mask), dropout_p=dropout_p, is_causal=sdpa_causal
            )  # [N, H, L, Dh], never on a backend that plans per shape (nn/sdpa.py)
            if hidden_rows is not None:
                context = context.masked_fill(hidden_rows, 0.0)
            weights = None

        merged = merge_heads(context)  # [N, L, E]
        record("heads merged", merged, "[batch, tgt_len, embed_dim]")
        output = self.out_proj(merged)  # [N, L, E]
        record("output", output, "[batch, tgt_len, embed_dim]", "W_o applied to the merged heads")
        if not self.batch_first or not is_batched:
            output = output.transpose(0, 1)  # [L, N, E]
        if not is_batched:
            output = output.squeeze(1)  # [L, E]

        if not need_weights:
            return output, None
        assert weights is not None
        if average_attn_weights:
            weights = weights.mean(dim=1)  # [N, L, S]
        if not is_batched:
            weights = weights.squeeze(0)
        return output, weights

    def _check_inputs(self, query: Tensor, key: Tensor, value: Tensor) -> bool:
        """Validate types, dtypes, ranks and widths; return whether the inputs carry a batch dimension."""
        # From the dict, not the attribute: Module.__getattr__ would cost more than all these checks.
        weight = self._parameters.get("in_proj_weight" if self._qkv_same_embed_dim else "q_proj_weight")
        expected = None if weight is None else weight.dtype
        for name, tensor in (("query", query), ("key", key), ("value", value)):
            if not isinstance(tensor, Tensor) or tensor.dtype != expected:
                arguments.check_input(name, tensor, weight, "MultiheadAttention")
        if query.dim() not in (2, 3):
            raise ValueError(f"query must be 3-D (batched) or 2-D (unbatched), got shape {list(query.shape)}")
        inputs = (("query", query, self.embed_dim), ("key", key, self.kdim), ("value", value, self.vdim))
        for name, tensor, width in inputs:
            if tensor.dim() != query.dim():
                raise ValueError(
                    f"{name} must have the same rank as query ({query.dim()}-D), got shape {list(tensor.shape)}"
                )
            if tensor.shape[-1] != width:
                raise ValueError(f"{name} must have last dimension {width}, got shape {list(tensor.shape)}")
        return query.dim() == 3


def explicit_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    merged_mask: Tensor | None,
    hidden_rows: Tensor | None,
    causal: bool = False,
    dropout_p: float = 0.0,
) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention, one readable step per line (the module's explicit path, and the ONNX graphs').

    ``merged_mask`` (bool, True = hidden, or float, added) has its fully hidden rows
    already unhidden; ``hidden_rows`` marks them, and their weights are zeroed after the
    softmax, so that such a row mixes nothing. ``causal`` builds the causal mask instead.

    Shape:
        q ``[N, H, L, Dh]``, k and v ``[N, H, S, Dh]``; returns the context
        ``[N, H, L, Dh]`` and the weights ``[N, H, L, S]``.
    """
    record("Q (split into heads)", q, "[batch, heads, tgt_len, head_dim]")
    record("K (split into heads)", k, "[batch, heads, src_len, head_dim]")
    record("V (split into heads)", v, "[batch, heads, src_len, head_dim]")
    query_len, key_len = q.shape[2], k.shape[2]
    scaled_q = q * (1.0 / math.sqrt(q.shape[-1]))  # [N, H, L, Dh], scaled as torch does
    scores = torch.matmul(scaled_q, k.transpose(-2, -1))  # [N, H, L, S]
    record("scores = Q K^T / sqrt(head_dim)", scores, "[batch, heads, tgt_len, src_len]")
    if causal:
        merged_mask = masks.causal_mask(query_len, key_len, device=q.device)  # [L, S]
    if merged_mask is not None:
        if merged_mask.dtype == torch.bool:
            scores = scores.masked_fill(merged_mask, float("-inf"))  # [N, H, L, S]
        else:
            scores = scores + merged_mask  # [N, H, L, S]
        record("mask (True/-inf = hidden)", merged_mask, "[batch|1, heads|1, tgt_len|1, src_len]")
    weights = torch.softmax(scores, dim=-1)  # [N, H, L, S], each row sums to 1
    if hidden_rows is not None:
        weights = weights.masked_fill(hidden_rows, 0.0)  # rows with no visible key: all zero
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)  # [N, H, L, S]
    record(ATTENTION_WEIGHTS, weights, "[batch, heads, tgt_len, src_len]")
    context = torch.matmul(weights, v)  # [N, H, L, Dh]
    record("weights @ V", context, "[batch, heads, tgt_len, head_dim]")
    return context, weights


def merge_heads(context: Tensor) -> Tensor:
    """``[N, H, L, Dh] -> [N, L, E]``: the heads side by side again (flatten names no size, for tracing)."""
    return context.transpose(1, 2).flatten(2)


def _append_visible_key(mask: Tensor | None) -> Tensor | None:
    """Extend a mask by one visible key column (for ``add_bias_kv`` / ``add_zero_attn``).

    Shape:
        ``[..., S] -> [..., S+1]``.
    """
    if mask is None:
        return None
    return torch.cat([mask, mask.new_zeros(*mask.shape[:-1], 1)], dim=-1)


def set_attention_path(module: nn.Module, path: str) -> None:
    """Force every attention inside ``module`` onto the ``"explicit"`` or ``"fast"`` path."""
    if path not in ("explicit", "fast"):
        raise ValueError(f"path must be 'explicit' or 'fast', got {path!r}")
    for submodule in module.modules():
        if isinstance(submodule, MultiheadAttention):
            submodule.explicit = path == "explicit"
