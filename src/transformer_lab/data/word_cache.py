"""Encoding a large corpus a word at a time: each distinct word is encoded once and cached.

Preparing a corpus spends its time in the tokenizer, and most of that time on words it has
already seen: a corpus of millions of sentences holds a few hundred thousand distinct
words. `WordCachedEncoder.encode_batch` gives exactly `SubwordTokenizer.encode_batch`'s
ids, but looks each word up in a dictionary and sends the tokenizer only the words it has
not met yet.

Why this is exact: for the project's byte-level BPE (`SubwordTokenizer.words_encode_alone`)
a text whose only whitespace is single spaces between words encodes as its first word
followed by each further word encoded with its leading space (" word"). A text with a
character that is not printable (any whitespace but the space, a control or a format
character such as a soft hyphen), with a double, leading or trailing space, or an empty
one, is encoded whole by the tokenizer, as is every text of a tokenizer of another
layout. The cache holds at most ``capacity`` words and starts afresh when a batch's new words
would overflow it; words
longer than ``max_word_length`` characters are encoded but not kept, so that text without
spaces (Chinese) does not fill it with whole sentences.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain, islice

from transformer_lab.data.subword import SubwordTokenizer, check_text

DEFAULT_CAPACITY = 32_768
DEFAULT_MAX_WORD_LENGTH = 32


class WordCachedEncoder:
    """`tokenizer.encode_batch` with a cache of word ids (see the module docstring).

    Meant for one pass over a corpus (it holds up to ``capacity`` words); use one encoder
    from one thread at a time.
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
            raise ValueError(f"capacity: expected an int >= 1 (words cached), got {capacity!r}")
        if isinstance(max_word_length, bool) or not isinstance(max_word_length, int) or max_word_length < 1:
            raise ValueError(f"max_word_length: expected an int >= 1 (characters), got {max_word_length!r}")
        self._tokenizer = tokenizer
        self._capacity = capacity
        self._max_word_length = max_word_length
        # One int object per id, shared by every cached word that holds it.
        self._ids = list(range(tokenizer.vocab_size))
        self._first: dict[str, tuple[int, ...]] = {}  # a text's first word
        self._spaced: dict[str, tuple[int, ...]] = {}  # a later word, its leading space implied
        self.words_encoded = 0  # distinct words the tokenizer was given, over the encoder's life

    @property
    def cached_words(self) -> int:
        """How many words the cache holds now."""
        return len(self._first) + len(self._spaced)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """The ids of each text: equal to ``tokenizer.encode_batch(texts)``."""
        if isinstance(texts, str):
            raise ValueError(f"texts must be a sequence of str, got a single str {texts[:40]!r}")
        texts = list(texts)
        _check_texts(texts)
        if not self._tokenizer.words_encode_alone:
            return self._tokenizer.encode_batch(texts)
        first, spaced = self._first, self._spaced
        encoded: list[list[int]] = []
        whole: list[int] = []  # the texts the tokenizer encodes whole
        unseen: list[int] = []  # the texts with a word not cached yet
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
        """Encode the words of ``texts[unseen]`` that are not cached, then those texts."""
        split = [texts[index].split(" ") for index in unseen]
        new_first, new_spaced = self._uncached(split)
        if self.cached_words + len(new_first) + len(new_spaced) > self._capacity:
            self._first.clear()
            self._spaced.clear()
            new_first, new_spaced = self._uncached(split)
        self._encode_new(new_first, "")
        self._encode_new(new_spaced, " ")
        first, spaced = self._first, self._spaced
        for index, words in zip(unseen, split):
            ids = list(first.get(words[0]) or new_first[words[0]])
            for word in islice(words, 1, None):
                ids += spaced.get(word) or new_spaced[word]
            encoded[index] = ids

    def _uncached(self, split: list[list[str]]) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]:
        """The first words and the later words of ``split`` that the cache lacks (ids to be filled)."""
        first, spaced = self._first, self._spaced
        new_first: dict[str, tuple[int, ...]] = {}
        new_spaced: dict[str, tuple[int, ...]] = {}
        for words in split:
            if words[0] not in first:
                new_first[words[0]] = ()
            for word in islice(words, 1, None):
                if word not in spaced:
                    new_spaced[word] = ()
        return new_first, new_spaced

    def _encode_new(self, new: dict[str, tuple[int, ...]], prefix: str) -> None:
        """Fill ``new``'s words with their ids (each encoded after ``prefix``) and cache the short ones."""
        if not new:
            return
        words = list(new)
        shared = self._ids
        cache = self._first if prefix == "" else self._spaced
        limit = self._max_word_length
        for word, ids in zip(words, self._tokenizer.encode_batch([prefix + word for word in words])):
            kept = tuple([shared[token_id] for token_id in ids])
            new[word] = kept
            if len(word) <= limit and self.cached_words < self._capacity:
                cache[word] = kept
        self.words_encoded += len(words)


def _check_texts(texts: list[str]) -> None:
    """Each text a str with a UTF-8 form, else `check_text`'s error naming the first bad one."""
    try:
        "".join(texts).encode("utf-8")
        return
    except (TypeError, UnicodeEncodeError):
        pass
    for index, text in enumerate(texts):
        check_text(f"texts[{index}]", text)
