"""Tests for transformer_lab.data.subword: training, exact round trip, files, batching lengths."""

from __future__ import annotations

import json
import re
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
    with pytest.raises(IsADirectoryError, match=rf"^path: expected a file to write, got the folder '{tmp_path}'$"):
        tokenizer.save(tmp_path)  # the keyword named, as every argument of the API is


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
        collated = collate_pairs([encoded[index] for index in batch], pad_id=PAD_ID, bos_id=BOS_ID, eos_id=EOS_ID)
        assert collated.src_ids.numel() <= max_tokens and collated.tgt_in_ids.numel() <= max_tokens
    bucketed = padding_fraction(batches, lengths)
    # The same number of batches, filled at random instead of by length.
    average_size = round(500 / len(batches))
    unbucketed = padding_fraction(fixed_size_batches(500, average_size, seed=0), lengths)
    assert bucketed < 0.2 < unbucketed


# ---------------------------------------------------------------- a user's own tokenizer.json

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

from transformer_lab.data.vocabulary import UNK_TOKEN  # noqa: E402

USER_LINES = [text for pair in PAIRS for text in pair]


def train_wordpiece(special_tokens: list[str] = list(SPECIAL_TOKENS), unk_token: str = UNK_TOKEN) -> Tokenizer:
    tokenizer = Tokenizer(models.WordPiece(unk_token=unk_token))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=300, special_tokens=special_tokens, show_progress=False)
    tokenizer.train_from_iterator(USER_LINES, trainer=trainer)
    return tokenizer


def train_unigram() -> Tokenizer:
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(
        vocab_size=150, special_tokens=list(SPECIAL_TOKENS), unk_token=UNK_TOKEN, show_progress=False
    )
    tokenizer.train_from_iterator(USER_LINES, trainer=trainer)
    return tokenizer


def write_tokenizer(path: Path, tokenizer: Tokenizer) -> Path:
    tokenizer.save(str(path))
    return path


def reloaded_four_ways(path: Path) -> list[SubwordTokenizer]:
    """load, save + load, to_json + from_json (as a checkpoint stores it), both after saving."""
    loaded = SubwordTokenizer.load(path)
    saved = path.with_name("saved-" + path.name)
    loaded.save(saved)
    again = SubwordTokenizer.load(saved)
    return [loaded, again, SubwordTokenizer.from_json(loaded.to_json()), SubwordTokenizer.from_json(again.to_json())]


@pytest.mark.parametrize(
    ("trainer", "model_type", "text", "decoded"),
    [
        (train_wordpiece, "WordPiece", "Ein Mann liest ein Buch.", "ein mann liest ein buch."),
        (train_unigram, "Unigram", "Ein Mann liest ein Buch.", "Ein Mann liest ein Buch."),
    ],
)
def test_a_users_tokenizer_round_trips_through_every_file_form(
    tmp_path: Path, trainer, model_type: str, text: str, decoded: str
) -> None:
    path = write_tokenizer(tmp_path / "tokenizer.json", trainer())
    original = Tokenizer.from_file(str(path))
    expected_ids = original.encode(text, add_special_tokens=False).ids
    copies = reloaded_four_ways(path)
    for tokenizer in copies:
        assert tokenizer.model_type == model_type and tokenizer.exact_round_trip is False
        assert tokenizer.vocab_size == original.get_vocab_size()
        assert tokenizer.encode(text) == expected_ids
        assert tokenizer.decode(tokenizer.encode(text)) == decoded
        assert tokenizer.encode_batch(USER_LINES) == [tokenizer.encode(line) for line in USER_LINES]
        assert tokenizer.decode([BOS_ID, *expected_ids, EOS_ID, PAD_ID]) == decoded
    assert len({tokenizer.to_json() for tokenizer in copies}) == 1
    assert copies[0].lowercase is (model_type == "WordPiece")
    encoded = encode_pairs(PAIRS[:3], copies[0])
    assert collate_pairs(encoded, pad_id=PAD_ID, bos_id=BOS_ID, eos_id=EOS_ID).src_ids.shape[0] == 3


@pytest.mark.parametrize("trainer", [train_wordpiece, train_unigram])
def test_a_users_tokenizer_never_drops_text(tmp_path: Path, trainer) -> None:
    tokenizer = SubwordTokenizer.load(write_tokenizer(tmp_path / "tokenizer.json", trainer()))
    # Characters the training lines never had are the unk id, one or more, never nothing.
    for unknown in ("中文", "😀", "Ωμέγα"):
        ids = tokenizer.encode(f"Ein Mann {unknown} liest.")
        assert UNK_ID in ids
        assert tokenizer.decode(ids).count(UNK_TOKEN) == ids.count(UNK_ID)
    # Literal specials in raw text never become a structural id that decoding would skip
    # (the Unigram model holds "<eos>" as a piece and would segment the text into it).
    for literal in ("<pad>", "<bos>", "<eos>", "x<pad>y"):
        ids = tokenizer.encode(f"Ein Mann {literal} liest.")
        assert not {PAD_ID, BOS_ID, EOS_ID} & set(ids)
        assert tokenizer.decode(ids).startswith(("ein mann", "Ein Mann"))
        assert len(tokenizer.decode(ids)) > len("Ein Mann liest.")


def test_a_users_byte_level_tokenizer_is_accepted_without_unk(tmp_path: Path) -> None:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(USER_LINES, trainer=trainer)
    loaded = SubwordTokenizer.load(write_tokenizer(tmp_path / "gpt2-style.json", tokenizer))
    assert loaded.model_type == "BPE" and loaded.exact_round_trip is False  # add_prefix_space
    for text in HARD_STRINGS[2:]:
        ids = loaded.encode(text)
        assert ids and min(ids) >= len(SPECIAL_TOKENS)
        assert loaded.decode(ids) in (text, " " + text)  # the prefix space it may add
    own = SubwordTokenizer.from_json(SubwordTokenizer.train_from_pairs(PAIRS, vocab_size=400).to_json())
    assert own.exact_round_trip is True and own.model_type == "BPE"


def test_truncation_and_padding_in_a_users_file_are_switched_off(tmp_path: Path) -> None:
    tokenizer = train_wordpiece()
    tokenizer.enable_truncation(max_length=3)
    tokenizer.enable_padding(length=40, pad_id=PAD_ID, pad_token="<pad>")
    loaded = SubwordTokenizer.load(write_tokenizer(tmp_path / "tokenizer.json", tokenizer))
    ids = loaded.encode("Ein Mann fährt Fahrrad auf der Straße.")
    assert 3 < len(ids) < 40 and PAD_ID not in ids
    assert json.loads(loaded.to_json())["truncation"] is None


def test_a_wrong_users_file_is_a_clear_error(tmp_path: Path) -> None:
    def refused(name: str, content: str | Tokenizer, pattern: str) -> None:
        path = tmp_path / name
        if isinstance(content, Tokenizer):
            write_tokenizer(path, content)
        else:
            path.write_text(content, encoding="utf-8")
        with pytest.raises(ValueError, match=rf"{re.escape(str(path))}: expected .*{pattern}"):
            SubwordTokenizer.load(path)
        with pytest.raises(ValueError, match=rf"^stored\.json: expected .*{pattern}"):
            SubwordTokenizer.from_json(path.read_text(encoding="utf-8"), where="stored.json")

    refused("not-json.json", "vocab: [a, b]", "got content that is not JSON")
    refused(
        "list.json", '["<pad>", "<unk>"]', r"tokenizer JSON (file|document), got a JSON list; .*Tokenizer\.save writes"
    )
    refused("vocab.json", '{"<pad>": 0, "<unk>": 1}', r"without a typed 'model' entry \(its keys: '<pad>', '<unk>'\)")
    refused("foreign.json", '{"model": {"type": "Sentencepiece"}}', "got one tokenizers cannot read")
    hint = r"train it with special_tokens=\['<pad>', '<unk>', '<bos>', '<eos>'\] in the trainer"
    refused(
        "bert-specials.json",
        train_wordpiece(["[PAD]", "[UNK]", "[CLS]", "[SEP]"], unk_token="[UNK]"),
        rf"the special token '<pad>' at id 0, got '\[PAD\]'; {hint}",
    )
    refused(
        "reordered.json",
        train_wordpiece(["<unk>", "<pad>", "<bos>", "<eos>"]),
        rf"the special token '<pad>' at id 0, got '<unk>'; {hint}",
    )
    refused("no-specials.json", train_wordpiece([]), rf"the special token '<pad>' at id 0, got '.+'; {hint}")
    refused(
        "other-unk.json",
        train_wordpiece(unk_token="[UNK]"),
        r"the WordPiece model's unk token to be '<unk>' \(id 1\).*got '\[UNK\]'; train the model with the unk token",
    )
    no_unk = Tokenizer(models.BPE())
    no_unk.pre_tokenizer = pre_tokenizers.Whitespace()
    no_unk.train_from_iterator(
        USER_LINES,
        trainer=trainers.BpeTrainer(vocab_size=200, special_tokens=list(SPECIAL_TOKENS), show_progress=False),
    )
    refused("bpe-without-unk.json", no_unk, r"the BPE model's unk token to be '<unk>'.* instead of vanishing.*got None")
    empty = '{"version": "1.0", "model": {"type": "BPE", "vocab": {}, "merges": []}}'
    refused("empty.json", empty, r"'<pad>' at id 0, got missing \(the vocabulary has 0 entries\)")
    with pytest.raises(
        ValueError, match=r"bad-bytes\.json: expected a tokenizer JSON file, got bytes that are not UTF-8"
    ):
        SubwordTokenizer.load(write(tmp_path / "bad-bytes.json", b'{"model": "\xff"}'))


def write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


@pytest.mark.parametrize("trainer", [train_wordpiece, train_unigram])
def test_a_model_trained_with_a_users_tokenizer_reloads_from_its_checkpoint(tmp_path: Path, trainer) -> None:
    from transformer_lab.models import Seq2SeqTransformer
    from transformer_lab.models.config import ModelConfig
    from transformer_lab.training.checkpoint import load_model_weights, read_extra_file, save_checkpoint

    tokenizer = SubwordTokenizer.load(write_tokenizer(tmp_path / "tokenizer.json", trainer()))
    config = ModelConfig(
        src_vocab_size=tokenizer.vocab_size,
        tgt_vocab_size=tokenizer.vocab_size,
        d_model=16,
        nhead=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dim_feedforward=32,
        dropout=0.0,
        max_len=64,
    )
    model = Seq2SeqTransformer.from_config(config).eval()
    folder = save_checkpoint(
        tmp_path / "checkpoint", model, {"model": {}}, extra_files={"tokenizer.json": tokenizer.to_json()}
    )
    reloaded = SubwordTokenizer.from_json(read_extra_file(folder, "tokenizer.json").decode("utf-8"))
    again = load_model_weights(folder, Seq2SeqTransformer.from_config(config)).eval()
    batch = collate_pairs(encode_pairs(PAIRS[:2], reloaded), pad_id=PAD_ID, bos_id=BOS_ID, eos_id=EOS_ID)
    assert encode_pairs(PAIRS[:2], reloaded) == encode_pairs(PAIRS[:2], tokenizer)
    with torch.no_grad():
        assert torch.equal(model(batch.src_ids, batch.tgt_in_ids), again(batch.src_ids, batch.tgt_in_ids))
