"""An encoder-only Transformer for text classification (batch-first).

Shape legend: B batch, S sequence length, D d_model, C classes.
"""

from __future__ import annotations

import dataclasses

from torch import Tensor, nn

from transformer_lab import nn as lab_nn
from transformer_lab.models.config import ClassifierConfig
from transformer_lab.models.embedding import (
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    check_token_ids,
    reads_id_range,
)
from transformer_lab.nn import masks

__all__ = ["TransformerClassifier"]


class TransformerClassifier(nn.Module):
    """Embeddings + positions, a Transformer encoder, padding-aware pooling, a linear head.

    ``pooling="mean"`` averages the encoder outputs over real tokens only (padding never
    enters the pooled vector); ``pooling="first"`` takes the first token's vector (put a
    summary token there, e.g. ``<bos>``).
    """

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        d_model: int = 256,
        nhead: int = 4,
        num_layers: int = 4,
        dim_feedforward: int = 1024,
        dropout: float = 0.1,
        norm_first: bool = True,
        activation: str = "gelu",
        max_len: int = 512,
        pad_id: int = 0,
        pooling: str = "mean",
    ) -> None:
        super().__init__()
        if pooling not in ("mean", "first"):
            raise ValueError(f"pooling must be 'mean' or 'first', got {pooling!r}")
        if num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {num_classes}")
        self.embedding = TokenEmbedding(vocab_size, d_model)
        self.positional_encoding = SinusoidalPositionalEncoding(d_model, max_len, dropout)
        layer = lab_nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward, dropout, activation=activation, batch_first=True, norm_first=norm_first
        )
        # Pre-norm stacks need a final LayerNorm; post-norm outputs are normalised already.
        self.encoder = lab_nn.TransformerEncoder(layer, num_layers, norm=nn.LayerNorm(d_model) if norm_first else None)
        self.head = nn.Linear(d_model, num_classes)
        for parameter in self.parameters():
            if parameter.dim() > 1:
                nn.init.xavier_uniform_(parameter)
        self.vocab_size, self.num_classes, self.pad_id, self.pooling = vocab_size, num_classes, pad_id, pooling

    @classmethod
    def from_config(cls, config: ClassifierConfig) -> "TransformerClassifier":
        # The config's fields are the constructor's arguments, name for name.
        return cls(**{field.name: getattr(config, field.name) for field in dataclasses.fields(config)})

    def forward(self, token_ids: Tensor) -> Tensor:
        """Class logits.

        Shape:
            token_ids ``[B, S]`` -> ``[B, C]``.
        """
        reads = reads_id_range(self, token_ids)  # not in a training step where a read waits for the device
        check_token_ids(token_ids, self.vocab_size, "token_ids", check_range=reads)
        padding = masks.padding_mask(token_ids, self.pad_id)  # [B, S]
        # A prepared corpus holds no empty text; elsewhere such a row would pool nothing (NaN).
        if reads and bool(padding.all(dim=1).any()):
            raise ValueError("token_ids: every sequence needs at least one non-padding token, got an all-padding row")
        hidden = self.encoder(
            self.positional_encoding(self.embedding(token_ids)), src_key_padding_mask=padding
        )  # [B, S, D]
        if self.pooling == "first":
            pooled = hidden[:, 0]  # [B, D]
        else:
            real = (~padding).unsqueeze(-1).to(hidden.dtype)  # [B, S, 1]
            pooled = (hidden * real).sum(dim=1) / real.sum(dim=1)  # [B, D], padding excluded
        return self.head(pooled)  # [B, C]
