"""Subword tokenizers on Hugging Face `tokenizers`: the project's byte-level BPE, or yours.

The project trains a byte-level byte-pair-encoding (BPE) tokenizer (`train`,
`train_from_pairs`). Why byte-level: the text is first turned into its UTF-8 bytes (each
shown as one printable character, as in GPT-2), and BPE merges are learned over those.
Every string, in any script, with emoji, tabs, double or trailing spaces, is therefore
encodable without an `<unk>`, and decoding the ids gives back the *exact* original text:

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

Your own tokenizer.json: `SubwordTokenizer.load(path)` also reads a tokenizer trained
with Hugging Face `tokenizers` of any model type (BPE, WordPiece, Unigram, WordLevel;
byte-level or not). Its one requirement is the four specials at ids 0..3, because
collation and the model use those ids as constants; train it with

    trainer = trainers.WordPieceTrainer(special_tokens=["<pad>", "<unk>", "<bos>", "<eos>"], ...)

(the specials first, in this order) and give the model the unk token "<unk>"
(`models.WordPiece(unk_token="<unk>")`, `models.BPE(unk_token="<unk>")`,
`UnigramTrainer(unk_token="<unk>", ...)`). A file that breaks this is a ValueError naming
the file, what was expected and what was found. The exact round trip above is a property
of the project's layout only (`exact_round_trip` says whether a tokenizer has it): a
non-byte-level tokenizer of yours may normalise text (lowercase, strip accents, drop
control characters, respace words on decoding) and produce `<unk>` for characters it
does not know. It never drops text silently: an unknown character (or word, for
WordPiece) becomes the unk id 1, which counts as unknown, and a piece of raw text that
your model segments into a structural special (a Unigram model turns a literal "<eos>"
into its piece `<eos>`) also becomes id 1 rather than an id that decoding would skip.
A file whose model has no unk token and could therefore lose characters (a BPE without
`unk_token`, byte fallback or a full byte alphabet) is refused. Truncation and padding
settings stored in the file are switched off: collation pads, and nothing is truncated.

Files: `save` writes the tokenizer's own JSON (vocabulary, merges, pre-tokenizer,
decoder); `load` reads it back (or a file of yours) and checks the requirements above;
`to_json` / `from_json` do the same through a str (the copy stored in a checkpoint), so a
model trained with your tokenizer reloads with it. No pickle.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from transformer_lab import strict_json
from transformer_lab.atomic_files import write_text_atomically
from transformer_lab.data._checks import check_bool, check_integer, is_integer, lone_surrogate
from transformer_lab.data.vocabulary import (
    BOS_ID,
    EOS_ID,
    NUM_SPECIAL_TOKENS,
    PAD_ID,
    SPECIAL_TOKENS,
    UNK_ID,
    UNK_TOKEN,
    SpecialTokenIds,
    id_sequence,
)

logger = logging.getLogger(__name__)

# The byte-level alphabet: one symbol for each of the 256 byte values.
BYTE_ALPHABET_SIZE = 256
MIN_VOCAB_SIZE = NUM_SPECIAL_TOKENS + BYTE_ALPHABET_SIZE
# Far above any vocabulary in use (the largest are ~256k); a size the BPE trainer cannot
# hold would abort the process from inside its Rust code.
MAX_VOCAB_SIZE = 1 << 20
PAIR_SIDES: tuple[str, ...] = ("both", "source", "target")
# The longest word BPE training accepts. The trainer's time grows with the square of a
# word's length (a 10,000-letter word takes about 0.5 s, 80,000 take 35 s, one line of
# 2 million took hours, deaf to Ctrl-C inside the native call); no real word comes near it.
MAX_WORD_CHARACTERS = 10_000
# The runs that the byte-level pre-tokenizer (GPT-2's pattern) never splits further: letters,
# digits, other symbols, spaces. Its pieces are these runs or parts of them, after at most one space.
_WORD_RUNS = re.compile(r"[^\W\d_]+|\d+|(?:[^\w\s]|_)+|\s+")

# The structural specials: a decoder skips them, so encoding must never produce them.
_STRUCTURAL_IDS = frozenset((PAD_ID, BOS_ID, EOS_ID))
# The tokens a byte-fallback model (BPE or Unigram) spells bytes with.
_BYTE_FALLBACK_TOKENS = tuple(f"<0x{byte:02X}>" for byte in range(BYTE_ALPHABET_SIZE))
_SPECIALS_HINT = (
    "train it with special_tokens=['<pad>', '<unk>', '<bos>', '<eos>'] in the trainer (the first "
    "entries, in this order, e.g. trainers.WordPieceTrainer(special_tokens=[...])), because "
    "collation and the model use ids 0..3 as constants"
)
_UNK_HINT = (
    "train the model with the unk token '<unk>' (models.BPE(unk_token='<unk>'), "
    "models.WordPiece(unk_token='<unk>'), trainers.UnigramTrainer(unk_token='<unk>', ...))"
)
_TOKENIZER_FILE_HINT = (
    "a tokenizer JSON file is what Hugging Face tokenizers' Tokenizer.save writes (tokenizer.json), "
    "a JSON object with a 'model' entry; a vocab.json, merges.txt or tokenizer_config.json alone is not one"
)


def _check_text(name: str, text: object) -> str:
    if not isinstance(text, str):
        raise ValueError(f"{name} must be a str, got {text!r:.80} ({type(text).__name__})")
    surrogate = lone_surrogate(text)
    if surrogate is not None:
        # No UTF-8 form, so no bytes for the byte-level BPE; tokenizers would raise TypeError.
        raise ValueError(f"{name} must be valid Unicode text, got {surrogate} (undecodable input bytes?)")
    return text


def check_word_lengths(text: str, where: str) -> None:
    """Refuse ``text`` if a word of it is longer than `MAX_WORD_CHARACTERS`; ``where`` names it ("FILE: line 3").

    A word here is a run of letters, of digits, of other symbols or of spaces: what the
    byte-level BPE learns from as one piece.
    """
    if len(text) <= MAX_WORD_CHARACTERS:  # the usual case, with no search
        return
    for run in _WORD_RUNS.finditer(text):
        if run.end() - run.start() > MAX_WORD_CHARACTERS:
            raise ValueError(
                f"{where}: expected words of at most {MAX_WORD_CHARACTERS:,} characters (BPE training takes "
                f"time that grows with the square of a word's length), got one of {run.end() - run.start():,} "
                f"characters at column {run.start() + 1} ({text[run.start() : run.start() + 20]!r}...); "
                "split it or leave that text out"
            )


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, each a str with a UTF-8 form; else a ValueError naming ``texts[i]``
    (or saying that one str was given where a sequence of them was expected)."""
    if isinstance(texts, str):
        raise ValueError(f"texts must be a sequence of str, got a single str {texts[:40]!r}")
    listed = list(texts)
    try:
        "".join(listed).encode("utf-8")  # one pass in C for the usual case
        return listed
    except (TypeError, UnicodeEncodeError):
        pass
    for index, text in enumerate(listed):
        _check_text(f"texts[{index}]", text)
    return listed


def _component_types(component: object) -> list[str]:
    """The `type` of a normalizer / pre-tokenizer / decoder entry and of its Sequence members."""
    if not isinstance(component, dict):
        return []
    kind = component.get("type")
    types = [kind] if isinstance(kind, str) else []
    for key in ("normalizers", "pretokenizers", "decoders", "processors"):
        for member in component.get(key) or []:
            types += _component_types(member)
    return types


def _parse_tokenizer_json(text: str, where: str, noun: str) -> dict:
    """The JSON object of a tokenizers file; a ValueError naming `where` for anything else."""
    try:
        data = strict_json.loads(text)
    except strict_json.DuplicateKeyError as error:
        raise ValueError(
            f"{where}: expected a tokenizer JSON {noun} giving each key once, got one where {error}"
        ) from None
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{where}: expected a tokenizer JSON {noun}, got content that is not JSON ({error}); "
            f"{_TOKENIZER_FILE_HINT}"
        ) from None
    if not isinstance(data, dict):
        raise ValueError(
            f"{where}: expected a tokenizer JSON {noun}, got a JSON {type(data).__name__}; {_TOKENIZER_FILE_HINT}"
        )
    model = data.get("model")
    if not isinstance(model, dict) or not isinstance(model.get("type"), str):
        keys = ", ".join(repr(key) for key in list(data)[:6]) or "none"
        raise ValueError(
            f"{where}: expected a tokenizer JSON {noun}, got a JSON object without a typed 'model' "
            f"entry (its keys: {keys}); {_TOKENIZER_FILE_HINT}"
        )
    return data


def _check_declared_specials(data: dict, where: str) -> None:
    """Refuse added tokens that the file itself places at ids 0..3 with other contents.

    tokenizers quietly moves such an entry to a new id on reading (keeping the model's
    own token at the id), so the file's intent is visible only here.
    """
    entries = data.get("added_tokens")
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or not is_integer(entry.get("id")):
            continue
        token_id = int(entry["id"])
        if 0 <= token_id < NUM_SPECIAL_TOKENS and entry.get("content") != SPECIAL_TOKENS[token_id]:
            raise ValueError(
                f"{where}: expected the special token {SPECIAL_TOKENS[token_id]!r} at id {token_id}, "
                f"got {entry.get('content')!r}; {_SPECIALS_HINT}"
            )


def _tokenizer_from_json(text: str, where: str, noun: str) -> Tokenizer:
    _check_declared_specials(_parse_tokenizer_json(text, where, noun), where)
    try:
        return Tokenizer.from_str(text)
    except Exception as error:  # tokenizers raises a bare Exception on bad content
        raise ValueError(
            f"{where}: expected a tokenizer JSON {noun}, got one tokenizers cannot read ({error}); "
            f"{_TOKENIZER_FILE_HINT}"
        ) from None


@dataclasses.dataclass(frozen=True)
class _Layout:
    """What `_inspect` found: the model type, whether the exact round trip holds, and
    whether a text's ids are its space-separated words' ids end to end."""

    model_type: str
    exact: bool
    words_encode_alone: bool


def _inspect(tokenizer: Tokenizer, where: str) -> _Layout:
    """Check that `tokenizer` can serve the project; say whether it is of the exact layout.

    Required of every tokenizer: the four specials at ids 0..3 (in the tokenizer and in
    its model's own vocabulary), an unknown-token path that ends at id 1 (so nothing is
    dropped), and a byte-level decoder only together with byte-level input (else decoding
    garbles every non-ASCII character). Exact: the project's own byte-level BPE layout.
    """
    data = json.loads(tokenizer.to_str())
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    model_vocab = tokenizer.get_vocab(with_added_tokens=False)
    for token_id, token in enumerate(SPECIAL_TOKENS):
        found = tokenizer.id_to_token(token_id)
        if found != token:
            shown = repr(found) if found is not None else f"missing (the vocabulary has {size} entries)"
            raise ValueError(
                f"{where}: expected the special token {token!r} at id {token_id}, got {shown}; {_SPECIALS_HINT}"
            )
        if model_vocab.get(token) != token_id:
            raise ValueError(
                f"{where}: expected the special token {token!r} at id {token_id} of the model's own "
                f"vocabulary too, got {model_vocab.get(token)!r} (added to the tokenizer, not trained into "
                f"the model); {_SPECIALS_HINT}"
            )

    model = data["model"]
    model_type = model.get("type")
    input_types = _component_types(data.get("normalizer")) + _component_types(data.get("pre_tokenizer"))
    byte_level_input = "ByteLevel" in input_types
    byte_level_output = "ByteLevel" in _component_types(data.get("decoder"))
    full_alphabet = byte_level_input and set(pre_tokenizers.ByteLevel.alphabet()) <= model_vocab.keys()
    byte_fallback = bool(model.get("byte_fallback")) and all(token in model_vocab for token in _BYTE_FALLBACK_TOKENS)
    if model_type in ("BPE", "WordPiece", "WordLevel"):
        unk = model.get("unk_token")
        # A BPE without an unk token silently drops what it cannot spell; that is safe
        # only when every byte (or byte fallback token) is in the vocabulary.
        safe = unk == UNK_TOKEN or (model_type == "BPE" and unk is None and (full_alphabet or byte_fallback))
        found_unk = repr(unk)
    elif model_type == "Unigram":
        unk_id = model.get("unk_id")
        safe = unk_id == UNK_ID or (unk_id is None and byte_fallback)
        found_unk = f"unk_id {unk_id!r}"
    else:
        raise ValueError(f"{where}: expected a BPE, WordPiece, WordLevel or Unigram model, got {model_type!r}")
    if not safe:
        raise ValueError(
            f"{where}: expected the {model_type} model's unk token to be {UNK_TOKEN!r} (id {UNK_ID}), so "
            f"that a character it does not know becomes id {UNK_ID} instead of vanishing or failing, "
            f"got {found_unk}; {_UNK_HINT}"
        )
    pre_tokenizer_types = _component_types(data.get("pre_tokenizer"))
    if byte_level_output and not byte_level_input:
        raise ValueError(
            f"{where}: expected a ByteLevel pre_tokenizer (or normalizer) to go with the ByteLevel "
            f"decoder (else decoding garbles every non-ASCII character), got "
            f"{pre_tokenizer_types[0] if pre_tokenizer_types else None!r}"
        )
    if byte_level_input and not byte_level_output:
        decoder_types = _component_types(data.get("decoder"))
        raise ValueError(
            f"{where}: expected a ByteLevel decoder to go with the ByteLevel pre_tokenizer (else decoding "
            f"writes byte symbols such as 'Ġ'), got {decoder_types[0] if decoder_types else None!r}"
        )

    def part(key: str) -> str | None:
        value = data.get(key)
        return value.get("type") if isinstance(value, dict) else None

    exact = (
        model_type == "BPE"
        and model.get("unk_token") == UNK_TOKEN
        and full_alphabet
        and part("pre_tokenizer") == "ByteLevel"
        and not data["pre_tokenizer"].get("add_prefix_space", False)
        and part("decoder") == "ByteLevel"
        and part("normalizer") in (None, "Lowercase")
        and data.get("post_processor") is None
    )
    # The ByteLevel split (GPT-2's pattern) starts a new piece at every space that follows a
    # non-space and never runs a piece across one; BPE then works piece by piece. So where a
    # text's only whitespace is single spaces between words, its ids are the first word's
    # followed by each further word's encoded with its space. Dropout, or an added token
    # split out before that (one may contain a space), would break this.
    words_encode_alone = (
        exact
        and data["pre_tokenizer"].get("use_regex", True)
        and not model.get("dropout")
        and all(token.get("special", False) for token in data.get("added_tokens") or [])
    )
    return _Layout(model_type=model_type, exact=exact, words_encode_alone=words_encode_alone)


def check_vocab_size(name: str, vocab_size: object) -> int:
    """``vocab_size`` as an int in [MIN_VOCAB_SIZE, MAX_VOCAB_SIZE], else a ValueError naming ``name``."""
    size = check_integer(name, vocab_size, minimum=MIN_VOCAB_SIZE)
    if size > MAX_VOCAB_SIZE:
        raise ValueError(f"{name}: expected at most {MAX_VOCAB_SIZE:,} entries, got {size:,}")
    return size


class SubwordTokenizer(SpecialTokenIds):
    """Subword tokenizer: text <-> list of ids (see the module docstring).

    Build one with `train` / `train_from_pairs` (the project's byte-level BPE, exactly
    reversible), or `load` a saved one or a tokenizer.json of your own (any model type,
    with the four specials at ids 0..3 and the unk token `<unk>`).

    Args:
        tokenizer: a `tokenizers.Tokenizer` meeting those requirements. Its truncation
            and padding are switched off, in place.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._adopt(tokenizer, "tokenizer")

    def _adopt(self, tokenizer: Tokenizer, where: str) -> None:
        if not isinstance(tokenizer, Tokenizer):
            raise ValueError(f"tokenizer must be a tokenizers.Tokenizer, got {type(tokenizer).__name__}")
        layout = _inspect(tokenizer, where)
        # Specials are matched in raw text by default, so a sentence containing "<eos>"
        # would become id 3 and vanish on decoding; treat them as plain text instead.
        # (This switch is not part of the saved JSON, hence set here on every build.)
        tokenizer.encode_special_tokens = True
        # A user's file may carry truncation (it would cut sentences silently) or padding
        # (pad ids inside the ids of one sentence); collation pads, nothing truncates.
        if tokenizer.truncation is not None or tokenizer.padding is not None:
            logger.info("%s: switched off the truncation/padding stored in the tokenizer file", where)
            tokenizer.no_truncation()
            tokenizer.no_padding()
        self._tokenizer = tokenizer
        self._layout = layout
        normalizer = tokenizer.normalizer
        # Probed rather than read from the JSON, so that BERT's normalizer or a Sequence
        # holding Lowercase count too.
        self._lowercase = normalizer is not None and normalizer.normalize_str("AZ") == "az"
        self._vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        self._longest_token: int | None = None  # symbols of the longest entry, found on first need

    @classmethod
    def _from_tokenizer(cls, tokenizer: Tokenizer, where: str) -> SubwordTokenizer:
        instance = cls.__new__(cls)
        instance._adopt(tokenizer, where)
        return instance

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
            texts: the training sentences, one str each, none with a word longer than
                `MAX_WORD_CHARACTERS` (see `check_word_lengths`).
            vocab_size: the largest total size, specials and the 256 byte symbols
                included (>= 260). The result can be smaller when the texts offer fewer
                merges of at least `min_frequency` occurrences.
            lowercase: lowercase all text before encoding (the round trip then holds up
                to lowercasing).
            min_frequency: the fewest occurrences a merge needs to be learned (>= 1).
        """
        vocab_size = check_vocab_size("vocab_size", vocab_size)
        check_bool("lowercase", lowercase)
        min_frequency = check_integer("min_frequency", min_frequency, minimum=1)
        if isinstance(texts, str):
            raise ValueError(f"texts must be an iterable of sentences, got a single str {texts[:40]!r}")

        counts = {"texts": 0, "non_empty": 0}

        def checked() -> Iterator[str]:
            for index, text in enumerate(texts):
                _check_text(f"texts[{index}]", text)
                check_word_lengths(text, f"texts[{index}]")
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
            raise ValueError(f"texts must hold at least one non-empty sentence, got {counts['texts']} empty one(s)")
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
                    raise ValueError(f"pairs[{index}] must be a (source, target) pair of str, got {pair!r:.80}")
                source, target = (_check_text(f"pairs[{index}][{side}]", text) for side, text in enumerate(pair))
                check_word_lengths(source, f"pairs[{index}][0]")
                check_word_lengths(target, f"pairs[{index}][1]")
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
    def tokens(self) -> list[str]:
        """The vocabulary entry of every id, in id order (see `id_to_token`)."""
        return [self.id_to_token(token_id) for token_id in range(self._vocab_size)]

    @property
    def lowercase(self) -> bool:
        """Whether text is lowercased before encoding."""
        return self._lowercase

    @property
    def model_type(self) -> str:
        """The subword model: "BPE" (the project's), "WordPiece", "Unigram" or "WordLevel"."""
        return self._layout.model_type

    @property
    def exact_round_trip(self) -> bool:
        """Whether `decode(encode(text)) == normalize(text)` holds for every str.

        True for the project's byte-level BPE layout (what `train` builds); a tokenizer of
        yours of another kind may normalise text or produce `<unk>`.
        """
        return self._layout.exact

    @property
    def words_encode_alone(self) -> bool:
        """Whether a text whose only whitespace is single spaces between words encodes as its
        first word followed by each further word encoded with its leading space.

        True for the project's byte-level BPE (what `WordCachedEncoder` relies on to encode
        a large corpus a word at a time); False for other layouts.
        """
        return self._layout.words_encode_alone

    @property
    def tokenizer(self) -> Tokenizer:
        """The wrapped `tokenizers.Tokenizer` (for inspection; do not change its layout)."""
        return self._tokenizer

    def __repr__(self) -> str:
        kind = "" if self.exact_round_trip else f", model_type={self.model_type!r}, exact_round_trip=False"
        return f"SubwordTokenizer(vocab_size={self.vocab_size}, lowercase={self.lowercase}{kind})"

    def token_to_id(self, token: str) -> int:
        """The id of a vocabulary entry (for byte-level BPE a byte-symbol string), or UNK_ID if unknown."""
        _check_text("token", token)
        token_id = self._tokenizer.token_to_id(token)
        return UNK_ID if token_id is None else token_id

    def id_to_token(self, token_id: int) -> str:
        """The vocabulary entry of `token_id` (for byte-level BPE byte symbols, e.g. "Ġman" for " man")."""
        token = self._tokenizer.id_to_token(self._check_id("token_id", token_id))
        # Every id in [0, vocab_size) names an entry, so the tokenizer found one.
        assert token is not None, token_id
        return token

    def _check_id(self, name: str, token_id: object) -> int:
        if not is_integer(token_id) or not 0 <= int(token_id) < self._vocab_size:
            raise ValueError(f"{name} must be an integer in [0, {self._vocab_size}), got {token_id!r}")
        return int(token_id)

    # ------------------------------------------------------------------ encoding

    def normalize(self, text: str) -> str:
        """The text as the tokenizer sees it: itself, or lowercased with `lowercase`.

        `decode(encode(text)) == normalize(text)` for every str where `exact_round_trip`;
        for a tokenizer of yours this is its normalizer's output, and decoding may differ
        further (spacing, `<unk>`).
        """
        _check_text("text", text)
        normalizer = self._tokenizer.normalizer
        return text if normalizer is None else normalizer.normalize_str(text)

    def fewest_tokens(self, text: str) -> int:
        """A lower bound of ``len(encode(text))`` known without encoding it (0 where none is known).

        With the byte-level BPE layout a token stands for at most as many bytes as the longest
        vocabulary entry has symbols, and a text has at least as many bytes as characters
        (lowercasing never shortens it), so a text too long for a model is refused before
        it costs its ids. Other layouts may fold any run of text into one token.
        """
        if not self._layout.exact or not text:
            return 0
        if self._longest_token is None:
            self._longest_token = max(1, *map(len, self._tokenizer.get_vocab(with_added_tokens=False)))
        return -(-len(text) // self._longest_token)

    def encode(self, text: str) -> list[int]:
        """The ids of `text`; no `<bos>`/`<eos>` is added. The empty string gives [].

        What the tokenizer does not know is UNK_ID (1), never left out.
        """
        _check_text("text", text)
        return self._guard(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def _guard(self, ids: list[int]) -> list[int]:
        # A user's model can hold the specials as pieces and segment raw text into them
        # (a Unigram model turns "<eos>" into the piece <eos>); decoding would then skip
        # the text, so such a piece counts as unknown instead. The exact layout never does.
        if self._layout.exact:
            return ids
        return [UNK_ID if token_id in _STRUCTURAL_IDS else token_id for token_id in ids]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """`encode` for many texts at once (in parallel, same results)."""
        texts = check_texts(texts)
        # encode_batch_fast (tokenizers >= 0.21) skips the character offsets, which nothing here reads.
        encode = getattr(self._tokenizer, "encode_batch_fast", self._tokenizer.encode_batch)
        return [self._guard(encoding.ids) for encoding in encode(texts, add_special_tokens=False)]

    def decode(self, ids: Sequence[int] | torch.Tensor, skip_special: bool = True) -> str:
        """The text of `ids`; the exact inverse of `encode` (up to `normalize`) where
        `exact_round_trip`.

        With `skip_special` the structural specials `<pad>`, `<bos>` and `<eos>` are left
        out wherever they appear; `<unk>` is kept and written "<unk>", because it stands
        for something in the text. Without it every special is written as its string.
        Cutting generated ids at the first `<eos>` is the decoder's job, not this one.

        Shape:
            ids: a sequence of ints, or a 1-D integer tensor [T].
        """
        check_bool("skip_special", skip_special)
        ids = id_sequence(ids)
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
    def from_json(cls, text: str, where: str = "text") -> SubwordTokenizer:
        """Rebuild a tokenizer from `to_json`'s text (e.g. the copy stored in a checkpoint).

        Accepts what `load` accepts; errors start with `where` (the name of the text's source).
        """
        if not isinstance(text, str):
            raise ValueError(f"text must be the tokenizer's JSON as a str, got {type(text).__name__}")
        return cls._from_tokenizer(_tokenizer_from_json(text, where, "document"), where)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the tokenizer's JSON (UTF-8) to `path`, atomically (temporary name, rename)."""
        write_text_atomically(path, self.to_json(), name="path")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SubwordTokenizer:
        """Read a file written by `save`, or a tokenizer.json of your own.

        Yours may be of any `tokenizers` model type (BPE, WordPiece, Unigram, WordLevel;
        byte-level or not) trained with special_tokens=["<pad>", "<unk>", "<bos>",
        "<eos>"] first in the trainer and the unk token "<unk>" (see the module
        docstring). A missing file is a FileNotFoundError; a file that is not JSON, not a
        tokenizers file, or breaks those requirements is a ValueError naming the file.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"path must be an existing tokenizer JSON file, got {str(path)!r}")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(
                f"{path}: expected a tokenizer JSON file, got bytes that are not UTF-8 ({error})"
            ) from None
        return cls._from_tokenizer(_tokenizer_from_json(text, str(path), "file"), str(path))


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
    return list(zip(source_tokenizer.encode_batch(sources), target_tokenizer.encode_batch(targets), strict=True))


def token_labels(tokenizer: SubwordTokenizer, ids: Sequence[int]) -> list[str]:
    """One readable label per subword id: its text, or its token string where that is blank or unprintable.

    A byte-level token alone may decode to a control character (byte 0x12) or half a
    character, which no font draws; its token string spells the bytes in printable form.
    """
    labels = []
    for token_id in ids:
        text = tokenizer.decode([token_id]).strip()
        labels.append(text if text and text.isprintable() else tokenizer.id_to_token(token_id))
    return labels
