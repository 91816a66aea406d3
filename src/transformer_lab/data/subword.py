"""Byte-level byte-pair-encoding (BPE) subword tokenizer, built on Hugging Face `tokenizers`.

Why byte-level: the text is first turned into its UTF-8 bytes (each shown as one printable
character, as in GPT-2), and BPE merges are learned over those. Every string, in any
script, with emoji, tabs, double or trailing spaces, is therefore encodable without an
`<unk>`, and decoding the ids gives back the *exact* original text:

    tokenizer.decode(tokenizer.encode(text)) == text          (lowercase=False)
    tokenizer.decode(tokenizer.encode(text)) == tokenizer.normalize(text)   (always)

This holds for every str that is valid Unicode, with no whitespace normalisation at all
(leading, trailing and repeated spaces, tabs, "\\r", NUL and byte-order marks come back as
they were; tests/data/test_subword_properties.py checks it on arbitrary text). A str with a
lone surrogate (undecodable bytes smuggled in by surrogateescape) has no UTF-8 form and is
refused with a ValueError naming its position.

With `lowercase=True` the text is lowercased before encoding, so the round trip holds up
to that lowercasing. `normalize` shows exactly what the tokenizer sees: it lowercases
character by character, which equals Python's `str.lower()` except for the Greek final
sigma (Python gives "ς" at the end of a word, the tokenizer "σ"). No Unicode
normalisation (NFC/NFKC) is applied, since it would break exactness.

The four specials of `transformer_lab.data.vocabulary` hold ids 0..3 (`<pad> <unk> <bos>
<eos>`). They are never produced from raw text: a sentence that literally contains
"<eos>" is encoded as ordinary bytes and decodes back to "<eos>". `encode` adds no
`<bos>`/`<eos>`; collation does that. `<unk>` is never produced by encoding (every byte
is in the vocabulary); a model may still emit its id, and `decode` then writes "<unk>".

Decoding ids that cut a multi-byte character in two (a model's output can) gives the
replacement character U+FFFD for the broken bytes rather than an error.

Files: `save` writes the tokenizer's own JSON (vocabulary, merges, pre-tokenizer,
decoder); `load` reads it back and checks it is a tokenizer of this kind. No pickle.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from transformer_lab.data._checks import check_bool, check_integer, is_integer
from transformer_lab.data.vocabulary import (
    SpecialTokenIds,
    BOS_ID,
    EOS_ID,
    NUM_SPECIAL_TOKENS,
    PAD_ID,
    SPECIAL_TOKENS,
    UNK_ID,
    UNK_TOKEN,
)

logger = logging.getLogger(__name__)

# The byte-level alphabet: one symbol for each of the 256 byte values.
BYTE_ALPHABET_SIZE = 256
MIN_VOCAB_SIZE = NUM_SPECIAL_TOKENS + BYTE_ALPHABET_SIZE
PAIR_SIDES: tuple[str, ...] = ("both", "source", "target")


def _check_text(name: str, text: object) -> str:
    if not isinstance(text, str):
        raise ValueError(f"{name} must be a str, got {text!r:.80} ({type(text).__name__})")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        # A lone surrogate (e.g. undecodable bytes smuggled in by surrogateescape) has no
        # UTF-8 form, so it has no bytes for the byte-level BPE; tokenizers would raise TypeError.
        raise ValueError(
            f"{name} must be valid Unicode text, got the lone surrogate U+{ord(text[error.start]):04X} "
            f"at character {error.start} (undecodable input bytes?)"
        ) from None
    return text


def _check_layout(data: dict, where: str) -> bool:
    """Check that a tokenizer's JSON is a byte-level BPE with our specials; return `lowercase`."""

    def part(key: str) -> str | None:
        value = data.get(key)
        return value.get("type") if isinstance(value, dict) else None

    expected = {"model": "BPE", "pre_tokenizer": "ByteLevel", "decoder": "ByteLevel"}
    for key, kind in expected.items():
        if part(key) != kind:
            raise ValueError(
                f"{where}: expected a {kind} {key} (a byte-level BPE tokenizer), got {part(key)!r}"
            )
    if data.get("post_processor") is not None:
        raise ValueError(
            f"{where}: expected no post_processor (bos/eos are added by collation), "
            f"got {part('post_processor')!r}"
        )
    normalizer = part("normalizer")
    if normalizer not in (None, "Lowercase"):
        raise ValueError(f"{where}: expected no normalizer or 'Lowercase', got {normalizer!r}")
    pre_tokenizer = data["pre_tokenizer"]
    if pre_tokenizer.get("add_prefix_space", False):
        raise ValueError(
            f"{where}: expected a ByteLevel pre_tokenizer with add_prefix_space=false (exact "
            f"detokenization), got add_prefix_space=true"
        )
    entries = data.get("added_tokens")
    entries = entries if isinstance(entries, list) else []
    added = {entry.get("id"): entry.get("content") for entry in entries if isinstance(entry, dict)}
    for token_id, token in enumerate(SPECIAL_TOKENS):
        if added.get(token_id) != token:
            raise ValueError(
                f"{where}: expected the special token {token!r} at id {token_id}, got {added.get(token_id)!r}"
            )
    return normalizer == "Lowercase"


class SubwordTokenizer(SpecialTokenIds):
    """Byte-level BPE: text <-> list of ids, exactly reversible (see the module docstring).

    Build one with `train` / `train_from_pairs`, or `load` a saved one. The wrapped
    `tokenizers.Tokenizer` must be byte-level BPE with the four specials at ids 0..3,
    no post-processor and no normalizer other than Lowercase.

    Args:
        tokenizer: a `tokenizers.Tokenizer` of that layout.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        if not isinstance(tokenizer, Tokenizer):
            raise ValueError(f"tokenizer must be a tokenizers.Tokenizer, got {type(tokenizer).__name__}")
        self._lowercase = _check_layout(json.loads(tokenizer.to_str()), "tokenizer")
        # Specials are matched in raw text by default, so a sentence containing "<eos>"
        # would become id 3 and vanish on decoding; treat them as plain text instead.
        # (This switch is not part of the saved JSON, hence set here on every build.)
        tokenizer.encode_special_tokens = True
        self._tokenizer = tokenizer
        self._vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)

    # ------------------------------------------------------------------ construction

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int = 8000,
        lowercase: bool = False,
        min_frequency: int = 2,
    ) -> SubwordTokenizer:
        """Learn BPE merges from `texts` (use the training split only).

        For a joint vocabulary pass the source and the target sentences together (see
        `train_from_pairs`). Training is deterministic: the same texts give the same
        tokenizer.

        Args:
            texts: the training sentences, one str each.
            vocab_size: the largest total size, specials and the 256 byte symbols
                included (>= 260). The result can be smaller when the texts offer fewer
                merges of at least `min_frequency` occurrences.
            lowercase: lowercase all text before encoding (the round trip then holds up
                to lowercasing).
            min_frequency: the fewest occurrences a merge needs to be learned (>= 1).
        """
        vocab_size = check_integer("vocab_size", vocab_size, minimum=MIN_VOCAB_SIZE)
        check_bool("lowercase", lowercase)
        min_frequency = check_integer("min_frequency", min_frequency, minimum=1)
        if isinstance(texts, str):
            raise ValueError(f"texts must be an iterable of sentences, got a single str {texts[:40]!r}")

        counts = {"texts": 0, "non_empty": 0}

        def checked() -> Iterator[str]:
            for index, text in enumerate(texts):
                _check_text(f"texts[{index}]", text)
                counts["texts"] += 1
                counts["non_empty"] += bool(text)
                yield text

        tokenizer = Tokenizer(models.BPE(unk_token=UNK_TOKEN))
        if lowercase:
            tokenizer.normalizer = normalizers.Lowercase()
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=list(SPECIAL_TOKENS),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tokenizer.train_from_iterator(checked(), trainer=trainer)
        if counts["non_empty"] == 0:
            raise ValueError(
                f"texts must hold at least one non-empty sentence, got {counts['texts']} empty one(s)"
            )
        result = cls(tokenizer)
        logger.info(
            "trained a byte-level BPE of %d entries (asked for %d) on %d sentences",
            result.vocab_size,
            vocab_size,
            counts["texts"],
        )
        return result

    @classmethod
    def train_from_pairs(
        cls,
        pairs: Iterable[tuple[str, str]],
        vocab_size: int = 8000,
        lowercase: bool = False,
        min_frequency: int = 2,
        sides: str = "both",
    ) -> SubwordTokenizer:
        """Train on (source, target) sentence pairs; see `train` for the other arguments.

        Args:
            pairs: (source sentence, target sentence), from the training split only.
            sides: "both" (default) learns one joint vocabulary from both languages, so
                the source and target embeddings can be shared; "source" or "target"
                learns from one side only (for separate vocabularies, train two).
        """
        if sides not in PAIR_SIDES:
            raise ValueError(f"sides must be one of {', '.join(PAIR_SIDES)}, got {sides!r}")

        def texts() -> Iterator[str]:
            for index, pair in enumerate(pairs):
                if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                    raise ValueError(
                        f"pairs[{index}] must be a (source, target) pair of str, got {pair!r:.80}"
                    )
                source, target = (
                    _check_text(f"pairs[{index}][{side}]", text) for side, text in enumerate(pair)
                )
                if sides != "target":
                    yield source
                if sides != "source":
                    yield target

        return cls.train(texts(), vocab_size=vocab_size, lowercase=lowercase, min_frequency=min_frequency)

    # ------------------------------------------------------------------ properties

    @property
    def vocab_size(self) -> int:
        """The number of ids, specials included; every id is in [0, vocab_size)."""
        return self._vocab_size

    def __len__(self) -> int:
        """The same as `vocab_size`."""
        return self._vocab_size

    @property
    def lowercase(self) -> bool:
        """Whether text is lowercased before encoding."""
        return self._lowercase

    @property
    def tokenizer(self) -> Tokenizer:
        """The wrapped `tokenizers.Tokenizer` (for inspection; do not change its layout)."""
        return self._tokenizer

    def __repr__(self) -> str:
        return f"SubwordTokenizer(vocab_size={self.vocab_size}, lowercase={self.lowercase})"

    def token_to_id(self, token: str) -> int:
        """The id of a vocabulary entry (a byte-level symbol string), or UNK_ID if unknown."""
        _check_text("token", token)
        token_id = self._tokenizer.token_to_id(token)
        return UNK_ID if token_id is None else token_id

    def id_to_token(self, token_id: int) -> str:
        """The vocabulary entry of `token_id` (byte-level symbols, e.g. "Ġman" for " man")."""
        self._check_id("token_id", token_id)
        return self._tokenizer.id_to_token(int(token_id))

    def _check_id(self, name: str, token_id: object) -> int:
        if not is_integer(token_id) or not 0 <= int(token_id) < self._vocab_size:
            raise ValueError(f"{name} must be an integer in [0, {self._vocab_size}), got {token_id!r}")
        return int(token_id)

    # ------------------------------------------------------------------ encoding

    def normalize(self, text: str) -> str:
        """The text as the tokenizer sees it: itself, or lowercased with `lowercase`.

        `decode(encode(text)) == normalize(text)` for every str.
        """
        _check_text("text", text)
        normalizer = self._tokenizer.normalizer
        return text if normalizer is None else normalizer.normalize_str(text)

    def encode(self, text: str) -> list[int]:
        """The ids of `text`; no `<bos>`/`<eos>` is added. The empty string gives []."""
        _check_text("text", text)
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """`encode` for many texts at once (in parallel, same results)."""
        if isinstance(texts, str):
            raise ValueError(f"texts must be a sequence of str, got a single str {texts[:40]!r}")
        texts = [_check_text(f"texts[{index}]", text) for index, text in enumerate(texts)]
        return [encoding.ids for encoding in self._tokenizer.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids: Sequence[int] | torch.Tensor, skip_special: bool = True) -> str:
        """The text of `ids`; the exact inverse of `encode` (up to `normalize`).

        With `skip_special` the structural specials `<pad>`, `<bos>` and `<eos>` are left
        out wherever they appear; `<unk>` is kept and written "<unk>", because it stands
        for something in the text. Without it every special is written as its string.
        Cutting generated ids at the first `<eos>` is the decoder's job, not this one.

        Shape:
            ids: a sequence of ints, or a 1-D integer tensor [T].
        """
        check_bool("skip_special", skip_special)
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1 or ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
                raise ValueError(
                    f"ids must be a 1-D integer tensor, got dtype {ids.dtype} and shape {tuple(ids.shape)}"
                )
            ids = ids.tolist()
        if isinstance(ids, str):
            raise ValueError(f"ids must be a sequence of integer ids, got a str {ids[:40]!r}")
        checked = [self._check_id(f"ids[{position}]", token_id) for position, token_id in enumerate(ids)]
        if skip_special:
            checked = [token_id for token_id in checked if token_id not in (PAD_ID, BOS_ID, EOS_ID)]
        return self._tokenizer.decode(checked, skip_special_tokens=False)

    # ------------------------------------------------------------------ files

    def to_json(self) -> str:
        """The tokenizer as the JSON text of `tokenizers` (what `save` writes)."""
        return self._tokenizer.to_str()

    @classmethod
    def from_json(cls, text: str) -> SubwordTokenizer:
        """Rebuild a tokenizer from `to_json`'s text (e.g. the copy stored in a checkpoint)."""
        if not isinstance(text, str):
            raise ValueError(f"text must be the tokenizer's JSON as a str, got {type(text).__name__}")
        try:
            tokenizer = Tokenizer.from_str(text)
        except Exception as error:  # tokenizers raises a bare Exception on bad content
            raise ValueError(f"text: expected a tokenizer JSON document, got one tokenizers cannot read ({error})") from None
        return cls(tokenizer)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the tokenizer's JSON (UTF-8) to `path`, atomically (temporary name, rename)."""
        path = Path(path)
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(self.to_json(), encoding="utf-8")
        os.replace(temporary, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SubwordTokenizer:
        """Read a file written by `save`.

        A missing file is a FileNotFoundError; a file that is not a tokenizer JSON, or
        one of another layout (not byte-level BPE, specials not at ids 0..3), is a
        ValueError naming the file.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"path must be an existing tokenizer JSON file, got {str(path)!r}")
        try:
            text = path.read_text(encoding="utf-8")
            data = json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(
                f"{path}: expected a tokenizer JSON file, got unreadable content ({error})"
            ) from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a tokenizer JSON object, got a {type(data).__name__}")
        _check_layout(data, str(path))
        try:
            tokenizer = Tokenizer.from_str(text)
        except Exception as error:  # tokenizers raises a bare Exception on bad content
            raise ValueError(
                f"{path}: expected a tokenizer JSON file, got one tokenizers cannot read ({error})"
            ) from None
        return cls(tokenizer)


def encode_pairs(
    pairs: Sequence[tuple[str, str]],
    source_tokenizer: SubwordTokenizer,
    target_tokenizer: SubwordTokenizer | None = None,
) -> list[tuple[list[int], list[int]]]:
    """Encode (source, target) sentence pairs into (source ids, target ids), in order.

    With one tokenizer (a joint vocabulary) both sides use it. The result feeds
    `collated_lengths` -> `token_budget_batches` / `padding_fraction` and `collate_pairs`:

        encoded = encode_pairs(pairs, tokenizer)
        lengths = collated_lengths(encoded)
        batches = token_budget_batches(lengths, max_tokens=4096)

    Args:
        pairs: (source sentence, target sentence) pairs.
        source_tokenizer: the tokenizer of the source side.
        target_tokenizer: the tokenizer of the target side; None uses source_tokenizer.
    """
    if target_tokenizer is None:
        target_tokenizer = source_tokenizer
    for name, value in (("source_tokenizer", source_tokenizer), ("target_tokenizer", target_tokenizer)):
        if not isinstance(value, SubwordTokenizer):
            raise ValueError(f"{name} must be a SubwordTokenizer, got {type(value).__name__}")
    if isinstance(pairs, str):
        raise ValueError(f"pairs must be a sequence of (source, target) pairs, got a str {pairs[:40]!r}")
    sources, targets = [], []
    for index, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"pairs[{index}] must be a (source, target) pair of str, got {pair!r:.80}")
        sources.append(_check_text(f"pairs[{index}][0]", pair[0]))
        targets.append(_check_text(f"pairs[{index}][1]", pair[1]))
    return list(
        zip(source_tokenizer.encode_batch(sources), target_tokenizer.encode_batch(targets), strict=True)
    )
