"""Texts too long for the model are refused by their length before they are encoded, and encoding goes in batches.

Given 2,000 sentences of 100 kB, the Python objects encoded them all (3.7 GB of ids) before
checking the first. A byte-level BPE token stands for at most as many characters as its
longest vocabulary entry has symbols, so a text's characters alone can prove it too long.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from transformer_lab import Classifier, Translator

LONG = "x" * 100_000  # one object, listed 2,000 times: the test itself holds 100 kB
MANY = 2_000


def test_a_translator_names_a_sentence_too_long_before_encoding_any(
    translation_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    translator = Translator(translation_checkpoint)
    encoded: list[str] = []
    encode = translator.tokenizers.source.encode
    monkeypatch.setattr(translator.tokenizers.source, "encode", lambda text: encoded.append(text) or encode(text))
    sentences = ["kurz"] * (MANY - 1) + [LONG]
    with pytest.raises(ValueError) as raised:
        translator.translate(sentences)
    message = str(raised.value)
    assert message.startswith(f"sentences[{MANY - 1}] must be at most 256 subword tokens (the model's max_len), ")
    assert "got 100000 characters, so at least " in message and "\n" not in message
    assert encoded == []  # refused by its length: nothing was encoded
    with pytest.raises(ValueError, match=r"^sentence must be at most 256 subword tokens"):
        translator.candidates(LONG, nbest=2)
    # In a list, candidates() names the sentence by its index, as translate() does.
    with pytest.raises(ValueError, match=r"^sentences\[1\] must be at most 256 subword tokens"):
        translator.candidates(["kurz", LONG], nbest=2)
    assert encoded == ["kurz"]


def test_a_classifier_refuses_long_texts_by_length_and_encodes_the_rest_in_batches(
    classification_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    classifier = Classifier(classification_checkpoint)
    batches: list[list[str]] = []
    encode_batch = classifier.tokenizer.encode_batch
    monkeypatch.setattr(
        classifier.tokenizer, "encode_batch", lambda texts: batches.append(list(texts)) or encode_batch(texts)
    )
    texts = [LONG if index % 2 else "profit shares" for index in range(MANY)]
    results = classifier.classify_each(texts)
    assert [isinstance(result, str) for result in results] == [bool(index % 2) for index in range(MANY)]
    assert results[1] == (
        f"the text is at least {classifier.tokenizer.fewest_tokens(LONG)} subword tokens (100000 characters), more "
        f"than the model reads ({classifier.max_len}, its max_len); "
        "shorten it, or truncate it explicitly (truncate=True)"
    )
    assert all(LONG not in batch for batch in batches)  # never encoded
    assert sum(map(len, batches)) == MANY // 2 and max(map(len, batches)) <= 64
    with pytest.raises(ValueError, match=r"^texts\[1\]: the text is at least \d+ subword tokens"):
        classifier.classify(texts[:2])
    # With truncate every text is read, in batches, and the long ones say so.
    batches.clear()
    truncated = classifier.classify_each(texts[:4], truncate=True)
    assert [prediction.truncated for prediction in truncated] == [False, True, False, True]  # type: ignore[union-attr]


def test_the_bound_never_refuses_what_the_model_reads(classification_checkpoint: Path) -> None:
    tokenizer = Classifier(classification_checkpoint).tokenizer
    for text in ["goal " * 400, "x" * 5_000, "Stocks rallied", "é" * 300, "春风" * 100, ""]:
        assert tokenizer.fewest_tokens(text) <= len(tokenizer.encode(text))
