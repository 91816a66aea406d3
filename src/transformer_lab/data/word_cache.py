"""Encoding a large corpus a word at a time, through a bounded cache of the words' ids.

Preparing a corpus spends its time in the tokenizer, and most of that time on words it has
already seen: a corpus of millions of sentences holds a few hundred thousand distinct
words. `WordCachedEncoder.encode_batch` gives exactly `SubwordTokenizer.encode_batch`'s
ids, but looks each word up in a dictionary and sends the tokenizer only the words it does
not hold.

Why this is exact: for the project's byte-level BPE (`SubwordTokenizer.words_encode_alone`)
a text whose only whitespace is single spaces between words encodes as its first word
followed by each further word encoded with its leading space (" word"). A text with a
character that is not printable (any whitespace but the space, a control or a format
character such as a soft hyphen), with a double, leading or trailing space, or an empty
one, is encoded whole by the tokenizer, as is every text of a tokenizer of another
layout.

The cache is bounded, whatever the corpus. A word is kept the second time it is encoded
(a word met once, such as a number or a name, only sets a bit in a fixed table of words
seen, which starts afresh after ``capacity`` words), in two generations: kept words go
into the current one, and when it holds ``capacity`` words it becomes the previous one
(the older is dropped) and a new one starts; a word found in the previous generation
moves back into the current one. So the words in use survive, and the cache holds at most about twice
``capacity`` words (a batch's own words beyond that). Words longer than
``max_word_length`` characters are never kept, so that text without spaces (Chinese) does
not fill the cache with whole sentences.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from itertools import chain, islice

from transformer_lab.data.subword import SubwordTokenizer, check_text

DEFAULT_CAPACITY = 32_768
DEFAULT_MAX_WORD_LENGTH = 32
SEEN_BITS = 1 << 20  # the table of words seen once: 128 KiB, a few percent of collisions

WordIds = dict[str, tuple[int, ...]]


class _Generations:
    """Word -> ids in a current and a previous generation, and a table of words seen (see the module docstring)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.current: WordIds = {}
        self.previous: WordIds = {}
        self.seen = bytearray(SEEN_BITS // 8)
        self.num_seen = 0

    def __len__(self) -> int:
        return len(self.current) + len(self.previous)

    def make_room(self, count: int) -> None:
        """Start a new generation if ``count`` more words would overflow the current one."""
        if self.current and len(self.current) + count > self.capacity:
            self.previous = self.current
            self.current = {}

    def missing(self, words: list[str]) -> list[str]:
        """The distinct ``words`` in neither generation; those in the previous one move to the
        current one (a new generation started first, if they would overflow it)."""
        current, previous = self.current, self.previous
        absent = [word for word in dict.fromkeys(words) if word not in current]
        found = {word: ids for word in absent if (ids := previous.get(word)) is not None}
        self.make_room(len(absent))
        self.current.update(found)
        return [word for word in absent if word not in found]

    def keep(self, word: str, ids: tuple[int, ...]) -> None:
        """Keep ``word``'s ids if it was seen before (or its bit collides); else mark it seen."""
        slot = zlib.crc32(word.encode("utf-8")) & (SEEN_BITS - 1)
        byte, bit = slot >> 3, 1 << (slot & 7)
        if self.seen[byte] & bit:
            self.current[word] = ids
            return
        if self.num_seen >= self.capacity:
            self.seen = bytearray(SEEN_BITS // 8)
            self.num_seen = 0
        self.seen[byte] |= bit
        self.num_seen += 1


class WordCachedEncoder:
    """`tokenizer.encode_batch` with a cache of word ids (see the module docstring).

    Meant for one pass over a corpus, one encoder per column (the cache of a language's
    words); use one encoder from one thread at a time.
    """

    def __init__(
        self,
        tokenizer: SubwordTokenizer,
        capacity: int = DEFAULT_CAPACITY,
        max_word_length: int = DEFAULT_MAX_WORD_LENGTH,
    ) -> None:
        if not isinstance(tokenizer, SubwordTokenizer):
            raise ValueError(f"tokenizer: expected a SubwordTokenizer, got {type(tokenizer).__name__}")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity: expected an int >= 1 (words a generation holds), got {capacity!r}")
        if isinstance(max_word_length, bool) or not isinstance(max_word_length, int) or max_word_length < 1:
            raise ValueError(f"max_word_length: expected an int >= 1 (characters), got {max_word_length!r}")
        self._tokenizer = tokenizer
        self._max_word_length = max_word_length
        # One int object per id, shared by every cached word that holds it.
        self._ids = list(range(tokenizer.vocab_size))
        self._first = _Generations(capacity)  # a text's first word
        self._spaced = _Generations(capacity)  # a later word, its leading space implied
        self.words_encoded = 0  # distinct words the tokenizer was given, over the encoder's life

    @property
    def cached_words(self) -> int:
        """How many words the cache holds now (both generations, not the words seen once)."""
        return len(self._first) + len(self._spaced)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """The ids of each text: equal to ``tokenizer.encode_batch(texts)``."""
        if isinstance(texts, str):
            raise ValueError(f"texts must be a sequence of str, got a single str {texts[:40]!r}")
        texts = list(texts)
        _check_texts(texts)
        if not self._tokenizer.words_encode_alone:
            return self._tokenizer.encode_batch(texts)
        first, spaced = self._first.current, self._spaced.current
        encoded: list[list[int]] = []
        whole: list[int] = []  # the texts the tokenizer encodes whole
        unseen: list[int] = []  # the texts with a word not in the current generation
        for text in texts:
            words = text.split(" ")
            # Printable (so no whitespace but " ") and no empty word (no double, leading or
            # trailing space): the text's whitespace is single spaces between words.
            if not text.isprintable() or "" in words:
                whole.append(len(encoded))
                encoded.append([])
                continue
            try:
                later = chain.from_iterable(map(spaced.__getitem__, islice(words, 1, None)))
                encoded.append([*first[words[0]], *later])
            except KeyError:
                unseen.append(len(encoded))
                encoded.append([])
        if unseen:
            self._encode_unseen(texts, unseen, encoded)
        if whole:
            for index, ids in zip(whole, self._tokenizer.encode_batch([texts[index] for index in whole])):
                encoded[index] = ids
        return encoded

    def _encode_unseen(self, texts: list[str], unseen: list[int], encoded: list[list[int]]) -> None:
        """Encode ``texts[unseen]``: their words from either generation, or from the tokenizer."""
        split = [texts[index].split(" ") for index in unseen]
        first_words = [words[0] for words in split]
        later_words = [word for words in split for word in islice(words, 1, None)]
        new_first = self._encode_new(self._first, first_words, "")
        new_spaced = self._encode_new(self._spaced, later_words, " ")
        first, spaced = self._first.current, self._spaced.current
        for index, words in zip(unseen, split):
            ids = list(first.get(words[0]) or new_first[words[0]])
            for word in islice(words, 1, None):
                ids += spaced.get(word) or new_spaced[word]
            encoded[index] = ids

    def _encode_new(self, cache: _Generations, words: list[str], prefix: str) -> WordIds:
        """Bring ``words`` into ``cache``'s current generation, encoding (after ``prefix``) those
        it lacks; returns the encoded ones (those met for the first time, or long, are not kept)."""
        unknown = cache.missing(words)
        if not unknown:
            return {}
        shared = self._ids
        limit = self._max_word_length
        new: WordIds = {}
        for word, ids in zip(unknown, self._tokenizer.encode_batch([prefix + word for word in unknown])):
            kept = tuple([shared[token_id] for token_id in ids])
            new[word] = kept
            if len(word) <= limit:
                cache.keep(word, kept)
        self.words_encoded += len(unknown)
        return new


def _check_texts(texts: list[str]) -> None:
    """Each text a str with a UTF-8 form, else `check_text`'s error naming the first bad one."""
    try:
        "".join(texts).encode("utf-8")
        return
    except (TypeError, UnicodeEncodeError):
        pass
    for index, text in enumerate(texts):
        check_text(f"texts[{index}]", text)
