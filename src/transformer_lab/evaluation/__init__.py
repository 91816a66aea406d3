"""Scores: BLEU through sacreBLEU, accuracy, and per-class classification metrics."""

from transformer_lab.evaluation.accuracy import accuracy
from transformer_lab.evaluation.bleu import BleuResult, bleu_tokenizer_for, corpus_bleu, corpus_chrf
from transformer_lab.evaluation.classification_metrics import (
    ClassificationReport,
    classification_report,
    confusion_matrix,
)

__all__ = [
    "BleuResult",
    "bleu_tokenizer_for",
    "corpus_bleu",
    "corpus_chrf",
    "accuracy",
    "ClassificationReport",
    "classification_report",
    "confusion_matrix",
]
