"""The whole encoder-decoder, a twin of ``torch.nn.Transformer``.

Shape legend: N batch, S source length, T target length, E d_model.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab.nn import arguments, masks
from transformer_lab.nn.activation import Activation
from transformer_lab.nn.decoder import TransformerDecoder, TransformerDecoderLayer
from transformer_lab.nn.encoder import TransformerEncoder, TransformerEncoderLayer

__all__ = ["Transformer"]


class Transformer(nn.Module):
    """Encoder stack + decoder stack, each with a final LayerNorm, Xavier-initialised.

    Every decoder layer attends to the same encoder output (the memory). Token embeddings,
    positions and the output projection are not part of it, as in torch; see
    ``transformer_lab.models.Seq2SeqTransformer`` for the complete model.
    """

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: Activation = F.relu,
        custom_encoder: nn.Module | None = None,
        custom_decoder: nn.Module | None = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        batch_first = arguments.check_flag("batch_first", batch_first)
        norm_first = arguments.check_flag("norm_first", norm_first)
        bias = arguments.check_flag("bias", bias)
        # Before the final norms are built: LayerNorm(8.0) failed inside torch, naming no argument.
        d_model = arguments.check_size("d_model", d_model)
        if custom_encoder is None or custom_decoder is None:
            d_model, nhead, dim_feedforward = arguments.check_layer_sizes(
                d_model, nhead, dim_feedforward, layer_norm_eps
            )
        # Under their own names: TransformerEncoder and TransformerDecoder would both say num_layers.
        if custom_encoder is None:
            arguments.check_size("num_encoder_layers", num_encoder_layers)
        if custom_decoder is None:
            arguments.check_size("num_decoder_layers", num_decoder_layers)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            encoder_norm = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
            encoder_layer = TransformerEncoderLayer(
                d_model=d_model,
                nhead=nhead,
                dim_feedforward=dim_feedforward,
                dropout=dropout,
                activation=activation,
                layer_norm_eps=layer_norm_eps,
                batch_first=batch_first,
                norm_first=norm_first,
                bias=bias,
                device=device,
                dtype=dtype,
            )
            self.encoder = TransformerEncoder(encoder_layer, num_encoder_layers, encoder_norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            decoder_norm = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
            decoder_layer = TransformerDecoderLayer(
                d_model=d_model,
                nhead=nhead,
                dim_feedforward=dim_feedforward,
                dropout=dropout,
                activation=activation,
                layer_norm_eps=layer_norm_eps,
                batch_first=batch_first,
                norm_first=norm_first,
                bias=bias,
                device=device,
                dtype=dtype,
            )
            self.decoder = TransformerDecoder(decoder_layer, num_decoder_layers, decoder_norm)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def _reset_parameters(self) -> None:
        # Xavier-uniform on every matrix, as the paper's reference code and torch do.
        for parameter in self.parameters():
            if parameter.dim() > 1:
                nn.init.xavier_uniform_(parameter)

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """Encode ``src`` once, then decode ``tgt`` with every decoder layer reading that memory.

        Shape:
            src ``[S, N, E]``, tgt ``[T, N, E]`` (batch_first: ``[N, S, E]``, ``[N, T, E]``;
            unbatched: ``[S, E]``, ``[T, E]``), src_mask ``[S, S]``, tgt_mask ``[T, T]``,
            memory_mask ``[T, S]``, the key padding masks ``[N, S]`` / ``[N, T]`` / ``[N, S]``;
            returns ``[T, N, E]`` (batch_first: ``[N, T, E]``).
        """
        arguments.check_tensor("src", src)
        arguments.check_tensor("tgt", tgt)
        src_is_causal = arguments.check_optional_flag("src_is_causal", src_is_causal)
        tgt_is_causal = arguments.check_optional_flag("tgt_is_causal", tgt_is_causal)
        memory_is_causal = arguments.check_flag("memory_is_causal", memory_is_causal)
        is_batched = src.dim() == 3
        if tgt.dim() != src.dim():
            raise ValueError(f"src and tgt must have the same rank, got src {list(src.shape)}, tgt {list(tgt.shape)}")
        batch_dim = 0 if self.batch_first else 1
        if is_batched and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise ValueError(
                f"src and tgt must have the same batch size, got src {src.shape[batch_dim]}, tgt {tgt.shape[batch_dim]}"
            )
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ValueError(
                f"src and tgt must have feature size d_model={self.d_model}, "
                f"got src {src.shape[-1]}, tgt {tgt.shape[-1]}"
            )
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )

    @staticmethod
    def generate_square_subsequent_mask(
        sz: int, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> Tensor:
        """Float causal mask (``-inf`` above the diagonal), as torch's method returns.

        Shape:
            returns ``[sz, sz]``.
        """
        return masks.square_subsequent_mask(sz, device=device, dtype=dtype)
