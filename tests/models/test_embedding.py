"""Token embedding scale and the sinusoidal table."""

from __future__ import annotations

import math

import pytest
import torch

from transformer_lab.models import SinusoidalPositionalEncoding, TokenEmbedding


def test_token_embedding_is_scaled_by_sqrt_d_model() -> None:
    embedding = TokenEmbedding(10, 16)
    ids = torch.tensor([[1, 2, 3]])
    assert torch.allclose(embedding(ids), embedding.weight[ids] * 4.0)


def test_sinusoidal_table_matches_the_formula() -> None:
    encoding = SinusoidalPositionalEncoding(8, max_len=20, dropout=0.0)
    out = encoding(torch.zeros(1, 20, 8))[0]  # [T, D]
    for position in (0, 3, 19):
        for i in range(4):
            angle = position / 10000 ** (2 * i / 8)
            assert out[position, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert out[position, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    # An offset continues the table where the cache left off.
    assert torch.equal(encoding(torch.zeros(1, 2, 8), offset=5)[0], out[5:7])


def test_sequence_longer_than_the_table_is_an_error() -> None:
    encoding = SinusoidalPositionalEncoding(8, max_len=4)
    with pytest.raises(ValueError, match=r"sequence length must be <= max_len=4 .* got positions up to 5"):
        encoding(torch.zeros(1, 5, 8))
    with pytest.raises(ValueError, match="even number"):
        SinusoidalPositionalEncoding(7)
