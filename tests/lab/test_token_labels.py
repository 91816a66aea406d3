"""Attention-map labels: every subword gets a label a font can draw."""

from transformer_lab.data import SubwordTokenizer
from transformer_lab.data.subword import token_labels


def test_a_token_of_a_control_byte_or_a_blank_is_labelled_by_its_token_string() -> None:
    tokenizer = SubwordTokenizer.train(["ein Hund läuft", "zwei Hunde"] * 3, vocab_size=300, min_frequency=1)
    control = next(
        token_id for token_id in range(tokenizer.vocab_size) if tokenizer.decode([token_id]) == "\x12"
    )  # byte-level BPE holds every byte as a token
    word = tokenizer.encode("Hund")
    labels = token_labels(tokenizer, [control, *word])
    assert labels[0] == tokenizer.id_to_token(control) and labels[0].isprintable()
    assert "".join(labels[1:]) == "Hund"
    assert all(label.isprintable() and label for label in labels)
