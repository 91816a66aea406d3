"""The word-cached encoder gives exactly the tokenizer's ids, and sends it each distinct word once."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from transformer_lab.data.multi30k import load_multi30k
from transformer_lab.data.subword import SubwordTokenizer
from transformer_lab.data.word_cache import MAX_SKIPPED_BATCHES, SKIPPED_BATCHES, WordCachedEncoder

SHARED_MULTI30K = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "multi30k"
needs_shared_multi30k = pytest.mark.skipif(
    not SHARED_MULTI30K.is_dir(), reason=f"real Multi30k data not found at {SHARED_MULTI30K}"
)

TRAINING_TEXT = [
    "Ein Mann fährt Fahrrad auf der Straße, und er's 2 mal 1,5 km.",
    "A man rides a bike on the street; it's 3 o'clock!",
    "Ελληνικά ΟΔΟΣ, русский, 中文, 日本語 😀👍🏽 İstanbul",
    "  spaces\tand\r\nnew lines  ",
    # Whitespace runs, so that the BPE learns merges across them ("\t " as one piece):
    # a wrong split at a space inside such a run changes the ids.
    "a\t \tb x\u00a0 \u00a0y \t \t z  \t  w\n \n",
] * 3

# Words from awkward pieces (contractions, digits, punctuation, scripts, emoji, format and
# control characters), joined mostly by single spaces, sometimes by other whitespace.
WORD_PIECES = ["a", "Mann", "fährt", "'s", "'t", "'re", "2", "1,5", "km.", "!", "?!", "ΟΔΟΣ", "ς", "İ", "中文"]
WORD_PIECES += ["😀", "👨\u200d👩", "\u00ad", "\x00", "ß", "ẞ", "o'clock", "<eos>", "Ġ", "12ab", "a1", "²"]
WHITESPACE = [" ", " ", "\t", "\n", "\u00a0", "\u3000", "\u2028", "\x1c", "\x85"]
separator = st.just(" ") | st.lists(st.sampled_from(WHITESPACE), min_size=1, max_size=3).map("".join)

word = st.lists(st.sampled_from(WORD_PIECES), min_size=1, max_size=3).map("".join)
text = st.tuples(
    st.sampled_from(["", "", "", " ", "\t"]),
    st.lists(st.tuples(word, separator), max_size=8),
    st.sampled_from(["", "", "", " ", "\n"]),
).map(lambda parts: parts[0] + "".join(w + s for w, s in parts[1])[:-1] + parts[2] if parts[1] else parts[0])


@functools.cache
def tokenizer(lowercase: bool) -> SubwordTokenizer:
    return SubwordTokenizer.train(TRAINING_TEXT, vocab_size=330, lowercase=lowercase, min_frequency=1)


def variant(change: str) -> SubwordTokenizer:
    """The project's tokenizer with one part of its JSON changed."""
    data = json.loads(tokenizer(False).to_json())
    if change == "no regex":
        data["pre_tokenizer"]["use_regex"] = False
    elif change == "dropout":
        data["model"]["dropout"] = 0.5
    elif change == "added word":
        data["added_tokens"].append(
            {
                "id": len(data["model"]["vocab"]),
                "content": "a man",
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": False,
            }
        )
    return SubwordTokenizer.from_json(json.dumps(data))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(text, max_size=12), lowercase=st.booleans(), capacity=st.sampled_from([1, 4, 1000]))
# A space inside a whitespace run joins the run's piece ("\t " here): splitting there is wrong.
@example(texts=["a\t \tb", "x\t  y z", "a\n \nb", "a   b", "  a", "a  ", ""], lowercase=False, capacity=1000)
def test_ids_equal_the_tokenizers(texts: list[str], lowercase: bool, capacity: int) -> None:
    expected = tokenizer(lowercase).encode_batch(texts)
    encoder = WordCachedEncoder(tokenizer(lowercase), capacity=capacity, max_word_length=4)
    assert encoder.encode_batch(texts) == expected
    # Again, now from the cache (or from a cache started afresh when it was full).
    assert encoder.encode_batch(texts) == expected
    assert encoder.encode_batch(list(reversed(texts))) == expected[::-1]


def test_a_word_is_encoded_alone_and_kept_the_second_time_it_is_met() -> None:
    encoder = WordCachedEncoder(tokenizer(False))
    texts = ["a man rides a bike", "a bike", "man rides"]
    expected = tokenizer(False).encode_batch(texts)
    assert encoder.encode_batch(texts) == expected
    assert encoder.words_encoded == 0 and encoder.cached_words == 0  # met once: encoded whole, marked seen
    # First words "a" and "man"; later words " man", " rides", " a", " bike": each encoded once.
    assert encoder.encode_batch(texts) == expected
    assert encoder.words_encoded == 6 and encoder.cached_words == 6
    assert encoder.encode_batch(texts[::-1]) == expected[::-1]
    assert encoder.words_encoded == 6


def encode_twice(encoder: WordCachedEncoder, texts: list[str]) -> None:
    texts = [*texts, "x", "x", "x"]  # mostly cached lines, so that no batch is sent straight on
    expected = tokenizer(False).encode_batch(texts)
    assert encoder.encode_batch(texts) == expected
    assert encoder.encode_batch(texts) == expected


def test_the_cache_keeps_two_generations_and_words_in_use_survive() -> None:
    encoder = WordCachedEncoder(tokenizer(False), capacity=2, max_word_length=5)
    encode_twice(encoder, ["x a b"])
    assert encoder.words_encoded == 3 and encoder.cached_words == 3  # "x"; " a", " b"
    encode_twice(encoder, ["x c d"])  # " c", " d" start a new generation; " a", " b" are the previous one
    assert encoder.words_encoded == 5 and encoder.cached_words == 5
    encode_twice(encoder, ["x a"])  # " a" moves back from the previous generation, not encoded again
    assert encoder.words_encoded == 5 and encoder.cached_words == 4  # x; a; c, d (" b" dropped)
    encode_twice(encoder, ["x c e"])  # " e" starts a new generation, which " c" (in use) starts in
    assert encoder.words_encoded == 6 and encoder.cached_words == 5  # x; c, e; a, c
    encode_twice(encoder, ["Straßenbahnhaltestelle x"])  # too long to keep: always encoded whole
    assert encoder.words_encoded == 7 and encoder.cached_words == 4  # x; " x" (a new generation); c, e


def test_the_cache_stays_bounded_over_many_distinct_words() -> None:
    encoder = WordCachedEncoder(tokenizer(False), capacity=50)
    lines = [f"a man {number} rides {number % 70}" for number in range(3000)]
    for start in range(0, len(lines), 100):
        chunk = lines[start : start + 100]
        assert encoder.encode_batch(chunk) == tokenizer(False).encode_batch(chunk)
        # Two generations of each kind (first words, later words), a batch's words beyond.
        assert encoder.cached_words <= 2 * (2 * 50 + 100)


def test_batches_the_cache_serves_badly_go_straight_to_the_tokenizer() -> None:
    encoder = WordCachedEncoder(tokenizer(False))

    def encode(texts: list[str]) -> None:
        assert encoder.encode_batch(texts) == tokenizer(False).encode_batch(texts)

    encode([f"a man {number}" for number in range(10)])  # the first batch: every word new
    assert encoder.batches_skipped == 0
    encode([f"a man {number}" for number in range(10, 20)] + ["a man"] * 4)  # a new number on most lines
    for _ in range(SKIPPED_BATCHES):
        encode(["a man"] * 10)
    assert encoder.batches_skipped == SKIPPED_BATCHES
    encode([f"a man {number}" for number in range(20, 24)] + ["a man"] * 6)  # tried again: mostly cached
    encode(["a man"] * 10)
    assert encoder.batches_skipped == SKIPPED_BATCHES


def test_tries_that_fail_in_a_row_skip_more_batches_up_to_a_bound() -> None:
    encoder = WordCachedEncoder(tokenizer(False))
    numbers = iter(range(1_000_000))

    def skip_runs(batches: int) -> list[int]:
        """Encode ``batches`` batches with a new number on every line; the runs of skipped batches."""
        runs = [0]
        for _ in range(batches):
            texts = [f"a man {next(numbers)}" for _ in range(10)]
            before = encoder.batches_skipped
            assert encoder.encode_batch(texts) == tokenizer(False).encode_batch(texts)
            if encoder.batches_skipped > before:
                runs[-1] += 1
            elif runs[-1]:  # a try after skipped batches
                runs.append(0)
        return runs

    # The first batch (every word new, no verdict) and the first try, then tries and skips.
    assert skip_runs(2 + 7 + 1 + 15 + 1 + 31 + 1 + 63 + 1 + 63 + 1 + 63) == [
        SKIPPED_BATCHES,
        15,
        31,
        MAX_SKIPPED_BATCHES,
        MAX_SKIPPED_BATCHES,
        MAX_SKIPPED_BATCHES,
    ]
    # A try that the cache serves resets the count: the next failure skips SKIPPED_BATCHES again.
    before = encoder.batches_skipped
    encoder.encode_batch(["a man"] * 10)
    assert encoder.batches_skipped == before  # it was a try
    assert skip_runs(1 + SKIPPED_BATCHES + 1) == [SKIPPED_BATCHES, 0]


@pytest.mark.parametrize("change", ["no regex", "dropout", "added word"])
def test_other_layouts_are_encoded_whole(change: str) -> None:
    changed = variant(change)
    assert tokenizer(False).words_encode_alone is True
    assert changed.words_encode_alone is False
    encoder = WordCachedEncoder(changed)
    texts = ["a man rides a bike", "a man"]
    if change != "dropout":  # dropout draws its merges: no fixed ids to compare
        assert encoder.encode_batch(texts) == changed.encode_batch(texts)
    else:
        encoder.encode_batch(texts)
    assert encoder.words_encoded == 0 and encoder.cached_words == 0


@needs_shared_multi30k
def test_real_sentences_equal_the_tokenizers() -> None:
    pairs = load_multi30k("train", data_dir=SHARED_MULTI30K)[:4000]
    trained = SubwordTokenizer.train_from_pairs(pairs[:2000], vocab_size=2000, lowercase=True)
    lines = [side for pair in pairs for side in pair]
    encoder = WordCachedEncoder(trained)
    encoded = [ids for start in range(0, len(lines), 1000) for ids in encoder.encode_batch(lines[start : start + 1000])]
    assert encoded == trained.encode_batch(lines)
    assert encoder.words_encoded < len(lines) * 3  # most words were looked up, not encoded


def test_bad_texts_and_arguments_are_named() -> None:
    encoder = WordCachedEncoder(tokenizer(False))
    with pytest.raises(ValueError, match=r"texts\[1\] must be a str, got 3 \(int\)"):
        encoder.encode_batch(["a", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"texts\[2\] must be valid Unicode text, got the lone surrogate U\+DC80"):
        encoder.encode_batch(["a", "b", "c\udc80"])
    with pytest.raises(ValueError, match="texts must be a sequence of str, got a single str"):
        encoder.encode_batch("a man")
    with pytest.raises(ValueError, match=r"capacity: expected an int >= 1 \(words a generation holds\), got 0"):
        WordCachedEncoder(tokenizer(False), capacity=0)
    with pytest.raises(ValueError, match=r"max_word_length: expected an int >= 1 \(characters\), got True"):
        WordCachedEncoder(tokenizer(False), max_word_length=True)
    with pytest.raises(ValueError, match="tokenizer: expected a SubwordTokenizer, got str"):
        WordCachedEncoder("tokenizer.json")  # type: ignore[arg-type]
