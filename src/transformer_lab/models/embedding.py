"""Token embeddings scaled by sqrt(d_model) and the paper's sinusoidal positional encoding.

Shape legend: B batch, T sequence length, D d_model, V vocabulary.
"""

from __future__ import annotations

import math
from typing import cast

import torch
from torch import Tensor, nn

from transformer_lab.nn import host_reads
from transformer_lab.nn.dropout import Dropout

__all__ = ["TokenEmbedding", "SinusoidalPositionalEncoding", "check_token_ids", "reads_id_range"]


def check_token_ids(token_ids: Tensor, vocab_size: int, name: str, *, check_range: bool = True) -> None:
    """Raise ``ValueError`` unless ``token_ids`` is a 2-D integer tensor with ids in ``[0, vocab_size)``.

    ``check_range=False`` checks the shape and dtype only: reading the smallest and largest
    id back makes the host wait for the device (``nn/host_reads.py``), which a caller at
    every decoding step may decline; an id out of range then meets the embedding's own
    bound check.
    """
    if not isinstance(token_ids, Tensor):  # a list or a numpy array has no .dim(): an AttributeError
        raise TypeError(f"{name}: expected a torch.Tensor of token ids, got {type(token_ids).__name__}")
    # An embedding reads int64 and int32 ids only: int16 or uint8 ones failed inside torch, naming no argument.
    if token_ids.dim() != 2 or token_ids.dtype not in (torch.int64, torch.int32):
        raise ValueError(
            f"{name} must be an int64 or int32 tensor of shape [batch, seq_len], "
            f"got dtype {token_ids.dtype} and shape {list(token_ids.shape)}"
        )
    if token_ids.numel() == 0:
        raise ValueError(f"{name} must not be empty, got shape {list(token_ids.shape)}")
    if not check_range:
        return
    smallest, largest = int(token_ids.min()), int(token_ids.max())
    if smallest < 0 or largest >= vocab_size:
        bad = smallest if smallest < 0 else largest
        raise ValueError(f"{name} must hold token ids in [0, {vocab_size}), got {bad}")


def reads_id_range(module: nn.Module, token_ids: Tensor) -> bool:
    """Whether ``module``'s forward reads ``token_ids``' range back: not while training where reads wait.

    A training step on an accelerator would otherwise wait for the device at every batch
    (``nn/host_reads.py``); its ids come from a corpus checked against the vocabulary when
    it was prepared, and an id out of range still stops the embedding's own kernel.
    """
    return not (module.training and host_reads.host_reads_wait(token_ids.device))


class TokenEmbedding(nn.Module):
    """A lookup table whose vectors are multiplied by sqrt(d_model).

    The paper scales by sqrt(d_model) so that the small entries of an initialised table
    (Xavier in a whole model: std sqrt(2 / (vocab_size + d_model))) are not drowned by the
    positional encoding they are added to, whose entries are of order 1.
    """

    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        if vocab_size < 1 or d_model < 1:
            raise ValueError(f"vocab_size and d_model must be >= 1, got {vocab_size} and {d_model}")
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.vocab_size = vocab_size
        self.scale = math.sqrt(d_model)

    @property
    def weight(self) -> nn.Parameter:
        # nn.Embedding holds its weight as a Parameter; torch's stubs declare a Tensor.
        return cast(nn.Parameter, self.embedding.weight)

    def forward(self, token_ids: Tensor) -> Tensor:
        """Shape: token_ids ``[B, T]`` -> ``[B, T, D]``."""
        return self.embedding(token_ids) * self.scale


# The most positions a table may have: 65,536 x 1,024 floats is 256 MiB.
MAX_POSITIONS = 65_536


class SinusoidalPositionalEncoding(nn.Module):
    """Adds PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(...), then dropout.

    The table covers ``max_len`` positions; a longer sequence is a ``ValueError`` rather
    than a silently grown table, so that a model never meets positions it was not sized for
    without the caller knowing (raise ``max_len`` in the config instead).
    """

    table: Tensor  # [max_len, D], the buffer registered in __init__

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.1) -> None:
        super().__init__()
        if d_model < 2 or d_model % 2 != 0:
            raise ValueError(f"d_model must be an even number >= 2 for sin/cos pairs, got {d_model}")
        if not 1 <= max_len <= MAX_POSITIONS:
            # The table is max_len x d_model floats, built at once: a config that asks for
            # 1e10 positions must be an error, not an allocation of terabytes.
            raise ValueError(f"max_len must be in [1, {MAX_POSITIONS}], got {max_len}")
        positions = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)  # [max_len, 1]
        # 1 / 10000^(2i/D), computed in log space for accuracy.
        frequencies = torch.exp(
            torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model)
        )  # [D/2]
        table = torch.zeros(max_len, d_model)  # [max_len, D]
        table[:, 0::2] = torch.sin(positions * frequencies)
        table[:, 1::2] = torch.cos(positions * frequencies)
        # Not a parameter and not saved: it is a fixed function of (max_len, d_model).
        self.register_buffer("table", table, persistent=False)
        self.dropout = Dropout(dropout)
        self.max_len = max_len

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Add the encodings of positions ``offset .. offset+T-1``.

        Shape:
            x ``[B, T, D]`` -> ``[B, T, D]``.
        """
        length = x.shape[1]
        if offset + length > self.max_len:
            raise ValueError(
                f"sequence length must be <= max_len={self.max_len} (the positional table), "
                f"got positions up to {offset + length}"
            )
        return self.dropout(x + self.table[offset : offset + length].to(x.dtype))
