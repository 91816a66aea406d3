"""sacreBLEU wrapper: perfect and partial matches, signature, length mismatch refused."""

from __future__ import annotations

import pytest

from transformer_lab.evaluation import accuracy, corpus_bleu


def test_identical_text_scores_100_and_lowercasing_is_in_the_signature() -> None:
    references = ["A man rides a bike.", "Two dogs play in the snow."]
    assert corpus_bleu(references, references).score == pytest.approx(100.0)
    lower = corpus_bleu([text.lower() for text in references], references, lowercase=True)
    assert lower.score == pytest.approx(100.0)
    assert "case:lc" in lower.signature and "tok:13a" in lower.signature
    assert corpus_bleu([text.lower() for text in references], references).score < 100.0


def test_mismatched_lengths_are_an_error() -> None:
    with pytest.raises(ValueError, match="same length, got 1 and 2"):
        corpus_bleu(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="same length, got 2 and 1"):
        accuracy([1, 2], [1])
    assert accuracy([1, 2, 3, 4], [1, 2, 0, 4]) == 0.75
