"""Scores: BLEU through sacreBLEU (its default or the papers' flavour), accuracy, per-class classification metrics."""

from transformer_lab.evaluation.accuracy import accuracy
from transformer_lab.evaluation.bleu import (
    BleuResult,
    bleu_tokenizer_for,
    check_bleu_tokenizer,
    corpus_bleu,
    corpus_chrf,
)
from transformer_lab.evaluation.bleu_flavour import BLEU_FLAVOURS, check_bleu_flavour, papers_bleu
from transformer_lab.evaluation.classification_metrics import (
    ClassificationReport,
    classification_report,
    confusion_matrix,
)

__all__ = [
    "BleuResult",
    "bleu_tokenizer_for",
    "check_bleu_tokenizer",
    "corpus_bleu",
    "corpus_chrf",
    "BLEU_FLAVOURS",
    "check_bleu_flavour",
    "papers_bleu",
    "accuracy",
    "ClassificationReport",
    "classification_report",
    "confusion_matrix",
]
