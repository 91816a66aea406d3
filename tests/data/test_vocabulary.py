"""Tests for transformer_lab.data.vocabulary."""

from pathlib import Path

import pytest
import torch

from transformer_lab.data.vocabulary import (
    BOS_ID,
    BOS_TOKEN,
    EOS_ID,
    EOS_TOKEN,
    PAD_ID,
    PAD_TOKEN,
    UNK_ID,
    UNK_TOKEN,
    Vocabulary,
)

CORPUS = [
    ["the", "cat", "sat", "on", "the", "mat"],
    ["the", "dog", "sat"],
    ["a", "cat", "and", "a", "dog"],
]


def test_special_ids_and_order() -> None:
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    vocabulary = Vocabulary.build(CORPUS)
    assert vocabulary.tokens[:4] == [PAD_TOKEN, UNK_TOKEN, BOS_TOKEN, EOS_TOKEN]
    for token, token_id in [(PAD_TOKEN, 0), (UNK_TOKEN, 1), (BOS_TOKEN, 2), (EOS_TOKEN, 3)]:
        assert vocabulary.token_to_id(token) == token_id
        assert vocabulary.id_to_token(token_id) == token
    assert (vocabulary.pad_id, vocabulary.unk_id, vocabulary.bos_id, vocabulary.eos_id) == (0, 1, 2, 3)


def test_build_orders_by_frequency_then_lexicographically() -> None:
    vocabulary = Vocabulary.build(CORPUS)
    # the:3; a, cat, dog, sat: 2 each (alphabetical); and, mat, on: 1 each (alphabetical).
    assert vocabulary.tokens[4:] == ["the", "a", "cat", "dog", "sat", "and", "mat", "on"]
    assert len(vocabulary) == 12


def test_build_ignores_corpus_order() -> None:
    forward = Vocabulary.build(CORPUS)
    backward = Vocabulary.build([list(reversed(sentence)) for sentence in reversed(CORPUS)])
    assert forward.tokens == backward.tokens


def test_min_frequency_and_max_size() -> None:
    assert Vocabulary.build(CORPUS, min_frequency=2).tokens[4:] == ["the", "a", "cat", "dog", "sat"]
    limited = Vocabulary.build(CORPUS, max_size=6)
    assert len(limited) == 6
    assert limited.tokens[4:] == ["the", "a"]
    assert len(Vocabulary.build(CORPUS, max_size=4)) == 4
    with pytest.raises(ValueError, match="min_frequency"):
        Vocabulary.build(CORPUS, min_frequency=0)
    with pytest.raises(ValueError, match="max_size"):
        Vocabulary.build(CORPUS, max_size=3)


def test_special_strings_in_corpus_are_not_added_twice() -> None:
    vocabulary = Vocabulary.build([["x", EOS_TOKEN, PAD_TOKEN, "x"]])
    assert vocabulary.tokens == [PAD_TOKEN, UNK_TOKEN, BOS_TOKEN, EOS_TOKEN, "x"]


def test_encode_decode_round_trip_and_unknown() -> None:
    vocabulary = Vocabulary.build(CORPUS)
    sentence = ["the", "cat", "sat", "on", "the", "mat"]
    ids = vocabulary.encode(sentence)
    assert all(isinstance(token_id, int) for token_id in ids)
    assert vocabulary.decode(ids) == sentence
    assert vocabulary.decode(torch.tensor(ids)) == sentence
    ids = vocabulary.encode(["the", "zebra", "sat"])
    assert ids[1] == UNK_ID
    assert vocabulary.token_to_id("zebra") == UNK_ID
    assert "zebra" not in vocabulary and "the" in vocabulary
    # <unk> stands for a real word and stays; pad/bos/eos are skipped on request only.
    assert vocabulary.decode(ids) == ["the", UNK_TOKEN, "sat"]
    framed = [BOS_ID] + ids + [EOS_ID, PAD_ID]
    assert vocabulary.decode(framed) == ["the", UNK_TOKEN, "sat"]
    everything = [BOS_TOKEN, "the", UNK_TOKEN, "sat", EOS_TOKEN, PAD_TOKEN]
    assert vocabulary.decode(framed, skip_special=False) == everything


def test_bad_inputs_raise() -> None:
    vocabulary = Vocabulary.build(CORPUS)
    with pytest.raises(ValueError, match="tokens must be a sequence of tokens"):
        vocabulary.encode("the cat")
    with pytest.raises(ValueError, match=r"tokens\[1\]"):
        vocabulary.encode(["the", 7])
    with pytest.raises(ValueError, match=r"ids\[1\].*\[0, 12\)"):
        vocabulary.decode([4, 12])
    with pytest.raises(ValueError, match="token_id"):
        vocabulary.id_to_token(-1)
    with pytest.raises(ValueError, match="duplicate"):
        Vocabulary(["a", "b", "a"])
    with pytest.raises(ValueError, match="special"):
        Vocabulary(["a", UNK_TOKEN])
    with pytest.raises(ValueError, match="line breaks"):
        Vocabulary(["a\nb"])


def test_from_size() -> None:
    vocabulary = Vocabulary.from_size(8)
    assert len(vocabulary) == 8
    assert vocabulary.tokens[4:] == ["4", "5", "6", "7"]
    assert vocabulary.encode(["4", "7", "8"]) == [4, 7, UNK_ID]
    with pytest.raises(ValueError, match="size"):
        Vocabulary.from_size(4)


def test_save_load_round_trip(tmp_path: Path) -> None:
    vocabulary = Vocabulary.build(CORPUS + [["héllo", "日本", "two words"]])
    path = tmp_path / "vocab.txt"
    vocabulary.save(path)
    text = path.read_text(encoding="utf-8")
    assert text.splitlines()[:5] == [PAD_TOKEN, UNK_TOKEN, BOS_TOKEN, EOS_TOKEN, "the"]
    loaded = Vocabulary.load(path)
    assert loaded.tokens == vocabulary.tokens
    assert loaded.encode(["日本", "two words", "x"]) == vocabulary.encode(["日本", "two words", "x"])
    assert not (tmp_path / "vocab.txt.tmp").exists()
    # Windows line endings read the same.
    path.write_bytes(text.replace("\n", "\r\n").encode("utf-8"))
    assert Vocabulary.load(path).tokens == vocabulary.tokens


def test_load_errors_name_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        Vocabulary.load(tmp_path / "missing.txt")
    path = tmp_path / "bad.txt"
    specials = "<pad>\n<unk>\n<bos>\n<eos>\n"
    cases = [
        ("<pad>\n<bos>\n<unk>\n<eos>\n", "line 2: expected the special token '<unk>'"),
        (specials + "a\n\nb\n", "line 6: expected a non-empty token"),
        (specials + "a\nb\na\n", "line 7: expected a new token, got 'a' already on line 5"),
        (specials + "<eos>\n", "line 5: expected an ordinary token"),
        ("<pad>\n<unk>\n", "got 2 line"),
    ]
    for content, message in cases:
        path.write_text(content, encoding="utf-8")
        with pytest.raises(ValueError, match="bad.txt") as error:
            Vocabulary.load(path)
        assert message in str(error.value)
    path.write_bytes(specials.encode() + b"ok\n\xff\xfe\n")
    with pytest.raises(ValueError, match=r"bad.txt: line 6: expected UTF-8"):
        Vocabulary.load(path)
