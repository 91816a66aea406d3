"""Tests for transformer_lab.data.subword: training, exact round trip, files, batching lengths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from transformer_lab.data.batching import fixed_size_batches, padding_fraction, token_budget_batches
from transformer_lab.data.collate import collate_pairs, collated_lengths
from transformer_lab.data.multi30k import load_multi30k
from transformer_lab.data.subword import MIN_VOCAB_SIZE, SubwordTokenizer, encode_pairs
from transformer_lab.data.vocabulary import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID

SHARED_MULTI30K = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "multi30k"
needs_shared_multi30k = pytest.mark.skipif(
    not SHARED_MULTI30K.is_dir(), reason=f"real Multi30k data not found at {SHARED_MULTI30K}"
)

PAIRS = [
    ("Ein Mann fährt Fahrrad auf der Straße.", "A man rides a bike on the street."),
    ("Zwei Hunde spielen im Schnee.", "Two dogs play in the snow."),
    ("Eine Frau liest ein Buch im Park.", "A woman reads a book in the park."),
    ("Ein Junge springt über einen Zaun.", "A boy jumps over a fence."),
    ("Mehrere Männer arbeiten auf der Baustelle.", "Several men work on the construction site."),
] * 4

HARD_STRINGS = [
    "",
    " ",
    "  leading and trailing  ",
    "tab\there\nnew line\r\nwindows",
    "Grüße aus Köln: Äpfel, Öl, Übung, ß und ẞ.",
    "mixed scripts: Ελληνικά, русский, עברית, العربية, हिन्दी, 中文, 日本語, 한국어",
    "emoji 😀👍🏽 family 👨‍👩‍👧 flag 🇩🇪 and a zero-width\u200bjoiner",
    "combining e\u0301 vs precomposed é, ligature ﬁ, full-width ＡＢＣ",
    "literal specials <pad> <unk> <bos> <eos> stay text",
    "\x00 control \x7f bytes \ufeff bom",
]


@pytest.fixture(scope="module")
def tokenizer() -> SubwordTokenizer:
    return SubwordTokenizer.train_from_pairs(PAIRS, vocab_size=400, min_frequency=2)


def test_specials_have_ids_zero_to_three(tokenizer: SubwordTokenizer) -> None:
    for token_id, token in enumerate(SPECIAL_TOKENS):
        assert tokenizer.token_to_id(token) == token_id
        assert tokenizer.id_to_token(token_id) == token
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id) == (0, 1, 2, 3)
    assert MIN_VOCAB_SIZE < tokenizer.vocab_size == len(tokenizer) <= 400


@pytest.mark.parametrize("text", HARD_STRINGS)
def test_every_string_round_trips_exactly(tokenizer: SubwordTokenizer, text: str) -> None:
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    # No <unk>, and no special id is produced from raw text, even from "<eos>".
    assert all(token_id >= len(SPECIAL_TOKENS) for token_id in ids)


def test_merges_are_learned_and_used(tokenizer: SubwordTokenizer) -> None:
    text = "Ein Mann fährt Fahrrad."
    assert len(tokenizer.encode(text)) < len(text.encode("utf-8")) / 2
    assert tokenizer.token_to_id("Ġnever-seen-token") == UNK_ID


def test_decode_skips_structural_specials_and_keeps_unk(tokenizer: SubwordTokenizer) -> None:
    ids = tokenizer.encode("A dog.")
    assert tokenizer.decode([BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]) == "A dog."
    assert tokenizer.decode(torch.tensor([BOS_ID, *ids, EOS_ID])) == "A dog."
    assert tokenizer.decode([*ids, UNK_ID]) == "A dog.<unk>"
    assert tokenizer.decode([BOS_ID, *ids, EOS_ID], skip_special=False) == "<bos>A dog.<eos>"
    with pytest.raises(ValueError, match=r"ids\[1\] must be an integer in \[0, "):
        tokenizer.decode([5, tokenizer.vocab_size])
    with pytest.raises(ValueError, match="1-D integer tensor"):
        tokenizer.decode(torch.tensor([[5]]))
    with pytest.raises(ValueError, match="text must be a str"):
        tokenizer.encode(["A", "dog"])  # type: ignore[arg-type]


def test_batch_encoding_matches_single(tokenizer: SubwordTokenizer) -> None:
    assert tokenizer.encode_batch(HARD_STRINGS) == [tokenizer.encode(text) for text in HARD_STRINGS]


def test_lowercase_round_trip_up_to_lowercasing() -> None:
    lower = SubwordTokenizer.train_from_pairs(PAIRS, vocab_size=400, lowercase=True)
    assert lower.lowercase
    for text in HARD_STRINGS:
        assert lower.decode(lower.encode(text)) == lower.normalize(text)
    assert lower.decode(lower.encode("Ein MANN fährt ÜBER die Straße.")) == "ein mann fährt über die straße."
    assert lower.encode("Hund") == lower.encode("HUND")


def test_joint_and_one_sided_vocabularies() -> None:
    pairs = [("Hund Katze Hund Katze", "dog cat dog cat")] * 5
    joint = SubwordTokenizer.train_from_pairs(pairs, vocab_size=300)
    german = SubwordTokenizer.train_from_pairs(pairs, vocab_size=300, sides="source")
    assert joint.token_to_id("ĠHund") != UNK_ID and joint.token_to_id("Ġdog") != UNK_ID
    assert german.token_to_id("ĠHund") != UNK_ID and german.token_to_id("Ġdog") == UNK_ID
    with pytest.raises(ValueError, match="sides must be one of"):
        SubwordTokenizer.train_from_pairs(pairs, sides="german")


def test_training_is_deterministic(tokenizer: SubwordTokenizer) -> None:
    again = SubwordTokenizer.train_from_pairs(PAIRS, vocab_size=400, min_frequency=2)
    assert again.to_json() == tokenizer.to_json()


def test_training_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match=f"vocab_size must be >= {MIN_VOCAB_SIZE}"):
        SubwordTokenizer.train(["a b"], vocab_size=100)
    with pytest.raises(ValueError, match="single str"):
        SubwordTokenizer.train("a b c")
    with pytest.raises(ValueError, match=r"texts\[1\] must be a str"):
        SubwordTokenizer.train(["a", 7])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="at least one non-empty"):
        SubwordTokenizer.train(["", ""])
    with pytest.raises(ValueError, match="min_frequency must be >= 1"):
        SubwordTokenizer.train(["a"], min_frequency=0)


def test_save_and_load_json(tokenizer: SubwordTokenizer, tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    tokenizer.save(path)
    assert json.loads(path.read_text(encoding="utf-8"))["model"]["type"] == "BPE"
    loaded = SubwordTokenizer.load(path)
    assert loaded.vocab_size == tokenizer.vocab_size and loaded.lowercase is False
    for text in HARD_STRINGS:
        assert loaded.encode(text) == tokenizer.encode(text)
        assert loaded.decode(loaded.encode(text)) == text
    assert [p.name for p in tmp_path.iterdir()] == ["tokenizer.json"]


def test_load_refuses_missing_and_foreign_files(tokenizer: SubwordTokenizer, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="absent.json"):
        SubwordTokenizer.load(tmp_path / "absent.json")
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match=r"garbage\.json: expected a tokenizer JSON"):
        SubwordTokenizer.load(garbage)
    data = json.loads(tokenizer.to_json())
    data["added_tokens"][0]["content"] = "[PAD]"
    wrong_specials = tmp_path / "wrong_specials.json"
    wrong_specials.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=r"wrong_specials\.json: expected the special token '<pad>' at id 0"):
        SubwordTokenizer.load(wrong_specials)
    data = json.loads(tokenizer.to_json())
    data["pre_tokenizer"] = {"type": "Whitespace"}
    not_byte_level = tmp_path / "whitespace.json"
    not_byte_level.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match="expected a ByteLevel pre_tokenizer"):
        SubwordTokenizer.load(not_byte_level)


def test_encode_pairs_feeds_collation(tokenizer: SubwordTokenizer) -> None:
    encoded = encode_pairs(PAIRS[:3], tokenizer)
    assert encoded[0] == (tokenizer.encode(PAIRS[0][0]), tokenizer.encode(PAIRS[0][1]))
    batch = collate_pairs(encoded, pad_id=PAD_ID, bos_id=BOS_ID, eos_id=EOS_ID)
    lengths = collated_lengths(encoded)
    assert batch.src_ids.shape[1] == max(source for source, _ in lengths)
    assert batch.tgt_in_ids.shape[1] == max(target for _, target in lengths)
    with pytest.raises(ValueError, match=r"pairs\[1\] must be a \(source, target\) pair"):
        encode_pairs([("a", "b"), ("c",)], tokenizer)  # type: ignore[list-item]


@pytest.fixture(scope="module")
def real_tokenizer_and_pairs() -> tuple[SubwordTokenizer, list[tuple[str, str]]]:
    train = load_multi30k("train", data_dir=SHARED_MULTI30K)
    return SubwordTokenizer.train_from_pairs(train[:3000], vocab_size=2000), train


@needs_shared_multi30k
def test_real_lines_round_trip(
    real_tokenizer_and_pairs: tuple[SubwordTokenizer, list[tuple[str, str]]],
) -> None:
    tokenizer, train = real_tokenizer_and_pairs
    lines = [text for pair in train[:5000] for text in pair]
    for split in ("val", "test_2016_flickr"):
        lines += [text for pair in load_multi30k(split, data_dir=SHARED_MULTI30K) for text in pair]
    encoded = tokenizer.encode_batch(lines)
    mismatches = [text for text, ids in zip(lines, encoded) if tokenizer.decode(ids) != text]
    assert mismatches == []
    assert all(ids and min(ids) >= len(SPECIAL_TOKENS) for ids in encoded)


@needs_shared_multi30k
def test_token_budget_bucketing_on_real_lines(
    real_tokenizer_and_pairs: tuple[SubwordTokenizer, list[tuple[str, str]]],
) -> None:
    tokenizer, train = real_tokenizer_and_pairs
    encoded = encode_pairs(train[3000:3500], tokenizer)
    lengths = collated_lengths(encoded)
    max_tokens = 512
    batches = token_budget_batches(lengths, max_tokens=max_tokens, shuffle=True, seed=0, epoch=0)
    assert sorted(index for batch in batches for index in batch) == list(range(500))
    for batch in batches:
        collated = collate_pairs(
            [encoded[index] for index in batch], pad_id=PAD_ID, bos_id=BOS_ID, eos_id=EOS_ID
        )
        assert collated.src_ids.numel() <= max_tokens and collated.tgt_in_ids.numel() <= max_tokens
    bucketed = padding_fraction(batches, lengths)
    # The same number of batches, filled at random instead of by length.
    average_size = round(500 / len(batches))
    unbucketed = padding_fraction(fixed_size_batches(500, average_size, seed=0), lengths)
    assert bucketed < 0.2 < unbucketed
