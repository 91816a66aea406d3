"""Encoder layer and encoder stack, twins of torch's ``TransformerEncoderLayer`` / ``TransformerEncoder``.

Shape legend: N batch, S source length, E d_model. Inputs are ``[S, N, E]``, or
``[N, S, E]`` with ``batch_first=True``.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab.nn import arguments
from transformer_lab.nn.activation import Activation, resolve_activation
from transformer_lab.nn.attention import MultiheadAttention
from transformer_lab.nn.dropout import Dropout, activation_dropout
from transformer_lab.nn.residual import residual_sublayers
from transformer_lab.nn.tracing import scope

__all__ = ["TransformerEncoderLayer", "TransformerEncoder"]


class TransformerEncoderLayer(nn.Module):
    """Self-attention and a position-wise feed-forward, each in a residual block with LayerNorm.

    ``norm_first=False`` is the paper's post-norm: ``x = norm(x + sublayer(x))``.
    ``norm_first=True`` is the pre-norm of the Annotated Transformer:
    ``x = x + sublayer(norm(x))``, which trains more stably in deep stacks.
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
        self.linear1 = nn.Linear(d_model, dim_feedforward, bias=bias, device=device, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model, bias=bias, device=device, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = resolve_activation(activation)
        self.batch_first = batch_first

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        """Encode ``src``.

        Shape:
            src ``[S, N, E]`` (batch_first: ``[N, S, E]``), src_mask ``[S, S]`` or
            ``[N*H, S, S]``, src_key_padding_mask ``[N, S]``; returns src's shape.
        """
        # A LayerNorm's weight: linear1's is a method once the feed-forward is quantized.
        weight = self.norm1.weight
        if not isinstance(src, Tensor) or weight is None or src.dtype != weight.dtype:
            arguments.check_input("src", src, weight, "TransformerEncoderLayer")
        if type(is_causal) is not bool:
            is_causal = arguments.check_flag("is_causal", is_causal)

        def attend(x: Tensor) -> Tensor:
            return self._self_attention_block(x, src_mask, src_key_padding_mask, is_causal)

        return residual_sublayers(src, ((self.norm1, attend), (self.norm2, self._feed_forward_block)), self.norm_first)

    def _self_attention_block(
        self, x: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None, is_causal: bool
    ) -> Tensor:
        with scope("self_attn"):
            attended = self.self_attn(
                x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False, is_causal=is_causal
            )[0]
        return self.dropout1(attended)

    def _feed_forward_block(self, x: Tensor) -> Tensor:
        # Applied to every position separately: [.., E] -> [.., dim_feedforward] -> [.., E].
        return self.dropout2(self.linear2(activation_dropout(self.activation, self.dropout, self.linear1(x))))


class TransformerEncoder(nn.Module):
    """``num_layers`` deep copies of ``encoder_layer``, then an optional final ``norm``.

    ``enable_nested_tensor`` and ``mask_check`` are accepted for torch compatibility and
    have no effect: this encoder always computes padded positions like real ones (torch's
    nested-tensor fast path returns zeros there in inference).
    """

    def __init__(
        self,
        encoder_layer: TransformerEncoderLayer,
        num_layers: int,
        norm: nn.Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ) -> None:
        super().__init__()
        num_layers = arguments.check_num_layers(num_layers)
        self.layers = nn.ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        src: Tensor,
        mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        """Run every layer on ``src`` with the same masks.

        Shape:
            src ``[S, N, E]`` (batch_first: ``[N, S, E]``), mask ``[S, S]`` or
            ``[N*H, S, S]``, src_key_padding_mask ``[N, S]``; returns src's shape.
        """
        is_causal = arguments.check_optional_flag("is_causal", is_causal)
        output = src
        for index, layer in enumerate(self.layers):
            with scope(f"encoder.layers.{index}"):
                output = layer(
                    output, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal)
                )
        if self.norm is not None:
            output = self.norm(output)
        return output
