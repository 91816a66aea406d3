"""The token <-> id table shared by every task, with the four special tokens first.

The specials always occupy ids 0..3 in this order, so that code which only needs the
special ids (collation, losses, decoding) can use the module constants without a
vocabulary at hand:

    <pad> = 0   padding; ignored by the loss and hidden by the padding masks
    <unk> = 1   any token the vocabulary does not know
    <bos> = 2   start of a target sequence (the decoder's first input)
    <eos> = 3   end of a sequence (the decoder's last output)

A vocabulary is saved as a plain UTF-8 text file, one token per line, in id order,
starting with the four specials: readable, diffable, and loaded without unpickling.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from transformer_lab.data._checks import check_integer, is_integer

PAD_TOKEN = "<pad>"
UNK_TOKEN = "<unk>"
BOS_TOKEN = "<bos>"
EOS_TOKEN = "<eos>"
SPECIAL_TOKENS: tuple[str, ...] = (PAD_TOKEN, UNK_TOKEN, BOS_TOKEN, EOS_TOKEN)

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
NUM_SPECIAL_TOKENS = len(SPECIAL_TOKENS)

# Characters that would break the one-token-per-line file format.
_LINE_BREAKS = ("\n", "\r")


def id_sequence(ids: Sequence[int] | torch.Tensor) -> Sequence[int]:
    """The ids to decode: a 1-D integer tensor as a list, anything else as given (the caller checks each id)."""
    if isinstance(ids, torch.Tensor):
        if ids.dim() != 1 or ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
            raise ValueError(f"ids must be a 1-D integer tensor, got dtype {ids.dtype} and shape {tuple(ids.shape)}")
        return ids.tolist()
    return ids


def _check_token(token: object, where: str) -> str:
    """Return `token` if it can be stored in a vocabulary, else raise a ValueError."""
    if not isinstance(token, str):
        raise ValueError(f"{where}: expected a str token, got {token!r} ({type(token).__name__})")
    if token == "":
        raise ValueError(f"{where}: expected a non-empty token, got ''")
    if any(mark in token for mark in _LINE_BREAKS):
        raise ValueError(
            f"{where}: expected a token without line breaks (the file format is one token " f"per line), got {token!r}"
        )
    return token


def _check_token_sequence(name: str, tokens: object) -> None:
    """Refuse a bare str where a sequence of tokens is expected.

    Iterating a str yields characters, so `encode("hello world")` would quietly encode
    eleven characters instead of two words; asking for an explicit split avoids that.
    """
    if isinstance(tokens, str):
        raise ValueError(
            f"{name} must be a sequence of tokens, got a str ({tokens[:40]!r}); split it "
            f"first (for example text.split() for words or list(text) for characters)"
        )


class SpecialTokenIds:
    """The fixed ids of the four specials, shared by every vocabulary of the project."""

    @property
    def pad_id(self) -> int:
        """The id of `<pad>` (PAD_ID)."""
        return PAD_ID

    @property
    def unk_id(self) -> int:
        """The id of `<unk>` (UNK_ID)."""
        return UNK_ID

    @property
    def bos_id(self) -> int:
        """The id of `<bos>` (BOS_ID)."""
        return BOS_ID

    @property
    def eos_id(self) -> int:
        """The id of `<eos>` (EOS_ID)."""
        return EOS_ID


class Vocabulary(SpecialTokenIds):
    """A fixed mapping between tokens (str) and ids (int), specials at ids 0..3.

    Args:
        tokens: the ordinary tokens in id order; they get ids 4, 5, ... The specials are
            added in front automatically and must not be repeated here. Tokens must be
            distinct, non-empty and free of line breaks.

    Encoding an unknown token gives `UNK_ID`. A corpus that literally contains a special
    string such as "<eos>" encodes it to that special's id; tokenizers that may see such
    strings in raw text should escape them first.
    """

    def __init__(self, tokens: Iterable[str] = ()) -> None:
        _check_token_sequence("tokens", tokens)
        self._id_to_token: list[str] = list(SPECIAL_TOKENS)
        self._token_to_id: dict[str, int] = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
        for position, token in enumerate(tokens):
            _check_token(token, f"tokens[{position}]")
            if token in self._token_to_id:
                kind = "a special token" if token in SPECIAL_TOKENS else "a duplicate"
                raise ValueError(f"tokens[{position}] must be a new token, got {token!r} which is {kind}")
            self._token_to_id[token] = len(self._id_to_token)
            self._id_to_token.append(token)

    # ------------------------------------------------------------------ construction

    @classmethod
    def build(
        cls,
        sentences: Iterable[Iterable[str]],
        min_frequency: int = 1,
        max_size: int | None = None,
    ) -> Vocabulary:
        """Count the tokens of a corpus and keep the frequent ones.

        Tokens are ranked by frequency, most frequent first; tokens of equal frequency
        are ordered lexicographically (by Unicode code point), so the result depends only
        on the token counts, not on the order of the corpus. Tokens seen fewer than
        `min_frequency` times are left out, then the ranking is cut so that the whole
        vocabulary, specials included, has at most `max_size` entries. Occurrences of the
        special strings themselves are not counted: they already have their ids.

        Args:
            sentences: an iterable of token sequences (one per sentence); a bare str as a
                sentence is refused, see `encode`.
            min_frequency: the smallest count a token needs to be kept (>= 1).
            max_size: the largest total size including the four specials (>= 4), or None
                for no limit.
        """
        min_frequency = check_integer("min_frequency", min_frequency, minimum=1)
        if max_size is not None:
            max_size = check_integer("max_size", max_size, minimum=NUM_SPECIAL_TOKENS)
        _check_token_sequence("sentences", sentences)
        counts: Counter[str] = Counter()
        for index, sentence in enumerate(sentences):
            _check_token_sequence(f"sentences[{index}]", sentence)
            counts.update(sentence)
        for special in SPECIAL_TOKENS:
            counts.pop(special, None)
        ranked = sorted(
            (token for token, count in counts.items() if count >= min_frequency),
            key=lambda token: (-counts[token], token),
        )
        if max_size is not None:
            ranked = ranked[: max_size - NUM_SPECIAL_TOKENS]
        # The constructor checks every token (type, emptiness, line breaks) with the
        # position in `ranked`; name the source so the message is traceable.
        try:
            return cls(ranked)
        except ValueError as error:
            raise ValueError(f"sentences contain a token that cannot be stored: {error}") from None

    @classmethod
    def from_size(cls, size: int) -> Vocabulary:
        """A vocabulary for synthetic tasks: the specials, then the ids 4..size-1 as strings.

        The token of id i is str(i), so a decoded synthetic sequence reads as its ids.

        Args:
            size: the total size including the four specials (>= 5).
        """
        size = check_integer("size", size, minimum=NUM_SPECIAL_TOKENS + 1)
        return cls(str(index) for index in range(NUM_SPECIAL_TOKENS, size))

    # ------------------------------------------------------------------ lookup

    def __len__(self) -> int:
        """The number of entries, specials included."""
        return len(self._id_to_token)

    def __contains__(self, token: object) -> bool:
        """Whether `token` has its own id (True for the specials)."""
        return token in self._token_to_id

    def __repr__(self) -> str:
        first = self._id_to_token[NUM_SPECIAL_TOKENS : NUM_SPECIAL_TOKENS + 5]
        preview = ", ".join(repr(token) for token in first)
        more = ", ..." if len(self) > NUM_SPECIAL_TOKENS + 5 else ""
        return f"Vocabulary(size={len(self)}, tokens=[{preview}{more}])"

    @property
    def tokens(self) -> list[str]:
        """All tokens in id order, specials first (a copy)."""
        return list(self._id_to_token)

    def token_to_id(self, token: str) -> int:
        """The id of `token`, or `UNK_ID` if the vocabulary does not know it."""
        if not isinstance(token, str):
            raise ValueError(f"token must be a str, got {token!r} ({type(token).__name__})")
        return self._token_to_id.get(token, UNK_ID)

    def id_to_token(self, token_id: int) -> str:
        """The token of `token_id`; an id outside [0, len(self)) is a ValueError."""
        if not is_integer(token_id) or not 0 <= int(token_id) < len(self):
            raise ValueError(f"token_id must be an integer in [0, {len(self)}), got {token_id!r}")
        return self._id_to_token[int(token_id)]

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Map tokens to ids; unknown tokens become `UNK_ID`. No bos/eos is added.

        A bare str is refused: iterating it would encode characters, which is rarely
        what was meant; pass `list(text)` to encode characters on purpose.
        """
        _check_token_sequence("tokens", tokens)
        ids = []
        for position, token in enumerate(tokens):
            if not isinstance(token, str):
                raise ValueError(f"tokens[{position}] must be a str, got {token!r} ({type(token).__name__})")
            ids.append(self._token_to_id.get(token, UNK_ID))
        return ids

    def decode(self, ids: Sequence[int] | torch.Tensor, skip_special: bool = True) -> list[str]:
        """Map ids back to tokens.

        With `skip_special`, the structural specials `<pad>`, `<bos>` and `<eos>` are
        left out wherever they appear; `<unk>` is kept, because it stands for a real
        token of the text and dropping it would silently shorten the sentence. Cutting
        a generated sequence at its first `<eos>` is the decoder's job, not this one.

        Shape:
            ids: a sequence of ints, or a 1-D integer tensor [T].
        """
        ids = id_sequence(ids)
        tokens = []
        size = len(self)
        for position, token_id in enumerate(ids):
            if not is_integer(token_id) or not 0 <= int(token_id) < size:
                raise ValueError(f"ids[{position}] must be an integer in [0, {size}), got {token_id!r}")
            token_id = int(token_id)
            if skip_special and token_id in (PAD_ID, BOS_ID, EOS_ID):
                continue
            tokens.append(self._id_to_token[token_id])
        return tokens

    # ------------------------------------------------------------------ files

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the vocabulary as UTF-8 text, one token per line in id order.

        The file is written under a temporary name and then renamed, so a crash never
        leaves half a vocabulary behind.
        """
        path = Path(path)
        temporary = path.with_name(path.name + ".tmp")
        with open(temporary, "w", encoding="utf-8", newline="\n") as file:
            for token in self._id_to_token:
                file.write(token + "\n")
        os.replace(temporary, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Vocabulary:
        """Read a file written by `save`.

        The first four lines must be the specials in order; every other line is one
        token. A malformed file (bad UTF-8, an empty line, a duplicate token, wrong
        specials) is a ValueError naming the file and the line.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{str(path)!r}: expected a vocabulary file (one token a line), got no such file")
        raw_lines = path.read_bytes().split(b"\n")
        # A file written by `save` ends with a newline, which leaves one empty piece.
        if raw_lines and raw_lines[-1] == b"":
            raw_lines.pop()
        tokens: list[str] = []
        for number, raw in enumerate(raw_lines, start=1):
            where = f"{path}: line {number}"
            # Tolerate Windows line endings: tokens never contain "\r" (see _check_token).
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            try:
                token = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(f"{where}: expected UTF-8 text, got invalid bytes ({error.reason})") from None
            if number <= NUM_SPECIAL_TOKENS:
                expected = SPECIAL_TOKENS[number - 1]
                if token != expected:
                    raise ValueError(f"{where}: expected the special token {expected!r}, got {token!r}")
                continue
            _check_token(token, where)
            tokens.append(token)
        if len(raw_lines) < NUM_SPECIAL_TOKENS:
            raise ValueError(
                f"{path}: expected at least the {NUM_SPECIAL_TOKENS} special tokens "
                f"{', '.join(SPECIAL_TOKENS)}, one per line, got {len(raw_lines)} line(s)"
            )
        seen: dict[str, int] = {}
        for offset, token in enumerate(tokens):
            number = offset + NUM_SPECIAL_TOKENS + 1
            if token in SPECIAL_TOKENS:
                raise ValueError(f"{path}: line {number}: expected an ordinary token, got the special {token!r}")
            if token in seen:
                raise ValueError(
                    f"{path}: line {number}: expected a new token, got {token!r} " f"already on line {seen[token]}"
                )
            seen[token] = number
        return cls(tokens)
