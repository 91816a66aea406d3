"""``transformer_lab.models``: what the applications train, built on ``transformer_lab.nn``."""

from transformer_lab.models.classifier import TransformerClassifier
from transformer_lab.models.config import ClassifierConfig, ModelConfig
from transformer_lab.models.embedding import SinusoidalPositionalEncoding, TokenEmbedding
from transformer_lab.models.seq2seq import Seq2SeqTransformer

__all__ = [
    "ModelConfig",
    "ClassifierConfig",
    "TokenEmbedding",
    "SinusoidalPositionalEncoding",
    "Seq2SeqTransformer",
    "TransformerClassifier",
]
