"""Scores: BLEU through sacreBLEU, and accuracy."""

from transformer_lab.evaluation.bleu import BleuResult, corpus_bleu
from transformer_lab.evaluation.accuracy import accuracy

__all__ = ["BleuResult", "corpus_bleu", "accuracy"]
