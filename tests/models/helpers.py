"""The small model the inference-copy tests (int8, bf16) convert."""

from __future__ import annotations

import torch

from transformer_lab.models import Seq2SeqTransformer


def small_model() -> Seq2SeqTransformer:
    """A seeded 2+2-layer model, d_model 32, vocabulary 40, tied embeddings, in eval mode."""
    torch.manual_seed(0)
    return Seq2SeqTransformer(
        40,
        40,
        d_model=32,
        nhead=2,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=64,
        dropout=0.0,
        max_len=32,
        tie_embeddings="all",
    ).eval()
