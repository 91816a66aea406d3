"""Encoding a large corpus a word at a time, through a bounded cache of the words' ids.

Preparing a corpus spends its time in the tokenizer, and most of that time on words it has
already seen: a corpus of millions of sentences holds a few hundred thousand distinct
words. `WordCachedEncoder.encode_batch` gives exactly `SubwordTokenizer.encode_batch`'s
ids, but looks each word up in a dictionary, and sends the tokenizer only the texts with a
word it does not hold, and the words worth holding.

Why this is exact: for the project's byte-level BPE (`SubwordTokenizer.words_encode_alone`)
a text whose only whitespace is single spaces between words encodes as its first word
followed by each further word encoded with its leading space (" word"). A text with a
character that is not printable (any whitespace but the space, a control or a format
character such as a soft hyphen), with a double, leading or trailing space, or an empty
one, is encoded whole by the tokenizer, as is every text of a tokenizer of another
layout.

The cache is bounded, whatever the corpus. A text with a word never met before is encoded
whole, and the word is only marked as seen, in a fixed table (which starts afresh after
``capacity`` words): a word met once, such as a number or a name, costs nothing more. The
second time a word is met, it is encoded alone and kept, in two generations: kept words go
into the current one, and when it would hold more than ``capacity`` words it becomes the
previous one (the older is dropped) and a new one starts, with the words in use; a word
found in the previous generation moves back into the current one. So the words in use
survive, and the cache holds at most about twice ``capacity`` words (a batch's own words
beyond that). Words longer than ``max_word_length`` characters are never kept, so that
text without spaces (Chinese) goes to the tokenizer whole, as it would without the cache.
When the cache encodes less than half of a batch (after the first, in which every word is
new), which then costs more than the tokenizer alone, the next `SKIPPED_BATCHES` batches go
straight to the tokenizer; after each further such try twice as many plus one, up to
`MAX_SKIPPED_BATCHES`, until a try encodes at least half of its batch.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, islice

from transformer_lab.data.subword import SubwordTokenizer, check_texts

DEFAULT_CAPACITY = 32_768
DEFAULT_MAX_WORD_LENGTH = 32
SEEN_BITS = 1 << 20  # the table of words seen once: 128 KiB, a few percent of collisions
# A batch that the cache encodes less than half of costs more than the tokenizer alone (new
# words on most lines: a small corpus, or one of names and numbers); the next batches then go
# straight to the tokenizer, and the cache tries again after them. Tries that fail in a row
# skip 7, 15, 31 then 63 batches: on a corpus the cache cannot serve, a try every 64 batches.
SKIPPED_BATCHES = 7
MAX_SKIPPED_BATCHES = 63

WordIds = dict[str, tuple[int, ...]]


class _Generations:
    """Word -> ids in a current and a previous generation, and a table of words seen (see the module docstring)."""

    def __init__(self, capacity: int, max_word_length: int) -> None:
        self.capacity = capacity
        self.max_word_length = max_word_length
        self.current: WordIds = {}
        self.previous: WordIds = {}
        self.seen = bytearray(SEEN_BITS // 8)
        self.num_seen = 0

    def __len__(self) -> int:
        return len(self.current) + len(self.previous)

    def learn(self, words: Iterable[str], encode: Callable[[list[str]], list[tuple[int, ...]]]) -> set[str]:
        """Bring ``words`` into the current generation, from the previous one or, when seen
        before, encoded; returns those left out (met for the first time, or too long)."""
        distinct = set(words)
        absent = distinct.difference(self.current)
        if not absent:
            return absent
        found = {word: ids for word in absent if (ids := self.previous.get(word)) is not None}
        kept = [word for word in absent if word not in found and self._seen_before(word)]
        if self.current and len(self.current) + len(found) + len(kept) > self.capacity:
            # A new generation, which starts with the words in use.
            in_use = {word: self.current[word] for word in distinct.difference(absent)}
            self.previous, self.current = self.current, in_use
        self.current.update(found)
        self.current.update(zip(kept, encode(kept)))
        return absent.difference(found, kept)

    def _seen_before(self, word: str) -> bool:
        """Whether ``word`` is short and was seen before (or its bit collides); else it is marked seen."""
        if len(word) > self.max_word_length:
            return False
        slot = zlib.crc32(word.encode("utf-8")) & (SEEN_BITS - 1)
        byte, bit = slot >> 3, 1 << (slot & 7)
        if self.seen[byte] & bit:
            return True
        if self.num_seen >= self.capacity:
            self.seen = bytearray(SEEN_BITS // 8)
            self.num_seen = 0
        self.seen[byte] |= bit
        self.num_seen += 1
        return False


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
        # One int object per id, shared by every cached word that holds it.
        self._ids = list(range(tokenizer.vocab_size))
        self._first = _Generations(capacity, max_word_length)  # a text's first word
        self._spaced = _Generations(capacity, max_word_length)  # a later word, its leading space implied
        self.words_encoded = 0  # words the tokenizer was given one by one, over the encoder's life
        self.batches_skipped = 0  # batches sent straight to the tokenizer, over the encoder's life
        self._to_skip = 0
        self._skip_next = SKIPPED_BATCHES  # how many batches the next failed try skips
        self._batches_tried = 0

    @property
    def cached_words(self) -> int:
        """How many words the cache holds now (both generations, not the words seen once)."""
        return len(self._first) + len(self._spaced)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """The ids of each text: equal to ``tokenizer.encode_batch(texts)``."""
        if not self._tokenizer.words_encode_alone:
            return self._tokenizer.encode_batch(texts)  # which checks the texts itself
        if self._to_skip:
            self._to_skip -= 1
            self.batches_skipped += 1
            return self._tokenizer.encode_batch(texts)
        texts = check_texts(texts)
        first, spaced = self._first.current, self._spaced.current
        encoded: list[list[int]] = []
        whole: list[int] = []  # the texts the tokenizer encodes whole
        unseen: list[tuple[int, list[str]]] = []  # the texts with a word not in the current generation
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
                unseen.append((len(encoded), words))
                encoded.append([])
        if unseen:
            whole += self._encode_unseen(unseen, encoded)
        self._batches_tried += 1
        # The first batch meets every word for the first time: it says nothing yet.
        if self._batches_tried > 1:
            if 2 * len(whole) > len(texts):
                self._to_skip = self._skip_next
                self._skip_next = min(2 * self._skip_next + 1, MAX_SKIPPED_BATCHES)
            else:
                self._skip_next = SKIPPED_BATCHES
        if whole:
            for index, ids in zip(whole, self._tokenizer.encode_batch([texts[index] for index in whole])):
                encoded[index] = ids
        return encoded

    def _encode_unseen(self, unseen: list[tuple[int, list[str]]], encoded: list[list[int]]) -> list[int]:
        """Learn the words of the ``unseen`` texts, then encode those texts whose words are all
        cached now; returns the others (a word met for the first time, or too long to keep)."""
        left_first = self._first.learn((words[0] for _, words in unseen), self._encoder(""))
        later_words = chain.from_iterable(islice(words, 1, None) for _, words in unseen)
        left_later = self._spaced.learn(later_words, self._encoder(" "))
        first, spaced = self._first.current, self._spaced.current
        whole = []
        for index, words in unseen:
            if words[0] in left_first or not left_later.isdisjoint(islice(words, 1, None)):
                whole.append(index)
                continue
            later = chain.from_iterable(map(spaced.__getitem__, islice(words, 1, None)))
            encoded[index] = [*first[words[0]], *later]
        return whole

    def _encoder(self, prefix: str) -> Callable[[list[str]], list[tuple[int, ...]]]:
        """Encodes words, each after ``prefix``, into tuples of shared int objects."""

        def encode(words: list[str]) -> list[tuple[int, ...]]:
            shared = self._ids
            self.words_encoded += len(words)
            return [
                tuple([shared[i] for i in ids]) for ids in self._tokenizer.encode_batch([prefix + w for w in words])
            ]

        return encode
