"""The exporters read only the parts our models build, and refuse any other part by name."""

from __future__ import annotations

import pytest
from torch import nn

from transformer_lab.export.model_parts import seq2seq_stacks, typed_layers
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.nn import TransformerDecoderLayer, TransformerEncoderLayer


def tiny_model() -> Seq2SeqTransformer:
    return Seq2SeqTransformer(
        src_vocab_size=12, tgt_vocab_size=12, d_model=16, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
        dim_feedforward=32, dropout=0.0, max_len=16,
    )  # fmt: skip


def test_our_stacks_and_layers_come_back_typed() -> None:
    model = tiny_model()
    encoder, decoder = seq2seq_stacks(model)
    assert encoder is model.transformer.encoder and decoder is model.transformer.decoder
    assert len(typed_layers(encoder, TransformerEncoderLayer, "encoder")) == 2
    assert len(typed_layers(decoder, TransformerDecoderLayer, "decoder")) == 1


def test_a_foreign_stack_or_layer_is_refused_by_name() -> None:
    model = tiny_model()
    encoder, _ = seq2seq_stacks(model)
    with pytest.raises(ValueError, match=r"model: encoder.layers\[0\]: expected a TransformerDecoderLayer, got Trans"):
        typed_layers(encoder, TransformerDecoderLayer, "encoder")
    model.transformer.encoder = nn.Identity()
    with pytest.raises(
        ValueError, match="expected transformer.encoder to be a transformer_lab.nn.TransformerEncoder, got Identity"
    ):
        seq2seq_stacks(model)
