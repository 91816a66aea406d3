"""Predicting with a caller's model runs it without dropout and hands it back in the mode it came in.

A notebook that translates or classifies a few samples between training steps passes its
training model; the prediction must not see dropout, and training must go on with it.
"""

from __future__ import annotations

import pytest
import torch

from transformer_lab.data import BOS_ID, EOS_ID, PAD_ID, SubwordTokenizer
from transformer_lab.decoding import DecodeConfig
from transformer_lab.decoding.sources import decode_sources
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.models.classifier import TransformerClassifier
from transformer_lab.tasks.classification.predict import predict_each, predict_probabilities

VOCAB = 24
SOURCES = [[5, 6, 7, 8], [9, 10], [11, 12, 13]]


def _translation_model() -> Seq2SeqTransformer:
    torch.manual_seed(0)
    return Seq2SeqTransformer(
        src_vocab_size=VOCAB,
        tgt_vocab_size=VOCAB,
        d_model=16,
        nhead=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dim_feedforward=32,
        dropout=0.5,
        max_len=32,
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
    )


@pytest.mark.parametrize("training", [True, False])
def test_decode_sources_leaves_the_model_in_the_mode_it_came_in(training: bool) -> None:
    model = _translation_model().train(training)
    config = DecodeConfig(strategy="greedy", max_len=8, precision="fp32")
    decode_sources(model, SOURCES, config)
    assert model.training is training
    assert all(module.training is training for module in model.modules())


def test_decode_sources_runs_a_training_model_without_dropout() -> None:
    model = _translation_model()
    config = DecodeConfig(strategy="beam", beam_size=3, max_len=8, precision="fp32")
    expected = decode_sources(model.eval(), SOURCES, config)
    for _ in range(3):  # dropout of 0.5 would change some ids or scores in three tries
        assert decode_sources(model.train(), SOURCES, config) == expected


def _classifier() -> TransformerClassifier:
    torch.manual_seed(0)
    return TransformerClassifier(
        vocab_size=VOCAB, num_classes=3, d_model=16, nhead=2, num_layers=1, dim_feedforward=32, dropout=0.5, max_len=32
    )


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_predict_probabilities_runs_a_training_model_without_dropout_and_hands_it_back(precision: str) -> None:
    model = _classifier()
    expected = predict_probabilities(model.eval(), SOURCES, precision=precision)
    model.train()
    for _ in range(3):
        torch.testing.assert_close(predict_probabilities(model, SOURCES, precision=precision), expected)
    assert model.training
    assert all(module.training for module in model.modules())


def test_predict_each_hands_a_training_model_back_in_training_mode() -> None:
    texts = ["ein Hund läuft", "zwei Hunde schlafen", "eine Katze"]
    tokenizer = SubwordTokenizer.train(texts * 3, vocab_size=300, min_frequency=1)
    torch.manual_seed(0)
    model = TransformerClassifier(
        vocab_size=tokenizer.vocab_size, num_classes=2, d_model=16, nhead=2, num_layers=1, dim_feedforward=32
    )
    expected = predict_each(model.eval(), tokenizer, ["a", "b"], texts)
    assert predict_each(model.train(), tokenizer, ["a", "b"], texts) == expected
    assert model.training
