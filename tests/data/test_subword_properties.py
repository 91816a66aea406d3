"""Property tests of the byte-level BPE round trip on arbitrary Unicode (hypothesis).

What the tokenizer guarantees, exactly (found by these tests, stated in data/subword.py):
for every ``str`` that is valid Unicode (no lone surrogates, which have no UTF-8 form),

    decode(encode(text)) == normalize(text)

with no whitespace normalisation at all: leading, trailing, repeated spaces, tabs, "\\r",
"\\n", NUL, byte-order marks, combining marks and text that spells a special token all
come back unchanged; ``normalize`` is the identity without ``lowercase`` and a
per-character lowercasing with it. Encoding never produces an id of a special token.
A lone surrogate is refused with a ValueError instead.
"""

from __future__ import annotations

import functools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transformer_lab.data.subword import SubwordTokenizer
from transformer_lab.data.vocabulary import NUM_SPECIAL_TOKENS

PROPERTY_SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TRAINING_TEXT = [
    "Ein Mann fährt Fahrrad auf der Straße.",
    "A man rides a bike on the street.",
    "Ελληνικά, русский, 中文, 日本語 😀👍🏽",
    "  spaces\tand\r\nnew lines  ",
] * 3


@functools.cache
def tokenizer(lowercase: bool) -> SubwordTokenizer:
    return SubwordTokenizer.train(TRAINING_TEXT, vocab_size=320, lowercase=lowercase, min_frequency=1)


# Every code point but the surrogates (category Cs), weighted towards the awkward ones.
unicode_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=60) | st.text(
    st.sampled_from(list(" \t\r\n\x00\ufeff\u200b\u0301ßẞΣσςİ😀👨‍👩‍👧<>/eospadunkbo")), max_size=30
)


@PROPERTY_SETTINGS
@given(text=unicode_text)
def test_round_trip_is_exact(text: str) -> None:
    ids = tokenizer(False).encode(text)
    assert tokenizer(False).decode(ids) == text
    assert all(token_id >= NUM_SPECIAL_TOKENS for token_id in ids)


@PROPERTY_SETTINGS
@given(text=unicode_text)
def test_lowercasing_round_trip_is_exact_up_to_normalize(text: str) -> None:
    lowercasing = tokenizer(True)
    assert lowercasing.decode(lowercasing.encode(text)) == lowercasing.normalize(text)
    assert lowercasing.normalize(lowercasing.normalize(text)) == lowercasing.normalize(text)


@PROPERTY_SETTINGS
@given(texts=st.lists(unicode_text, max_size=6))
def test_batch_encoding_equals_one_by_one(texts: list[str]) -> None:
    assert tokenizer(False).encode_batch(texts) == [tokenizer(False).encode(text) for text in texts]


@PROPERTY_SETTINGS
@given(before=unicode_text, surrogate=st.integers(0xD800, 0xDFFF), after=unicode_text)
def test_lone_surrogates_are_refused_with_their_position(before: str, surrogate: int, after: str) -> None:
    with pytest.raises(ValueError, match=rf"got the lone surrogate U\+{surrogate:04X} at character {len(before)}"):
        tokenizer(False).encode(before + chr(surrogate) + after)
