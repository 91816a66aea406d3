"""Sentences in, sentences out: a subword tokenizer around :func:`decode_sources`, nothing cut.

Every sentence's length is bounded by its characters before any is encoded, and by its ids
after; a sentence the model cannot read whole is a ``ValueError`` naming it, never truncated.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

from transformer_lab.data import SubwordTokenizer, TokenizerPair
from transformer_lab.decoding.config import DecodeConfig
from transformer_lab.decoding.sources import Candidate, DecodedModel, candidates_of, decode_sources

__all__ = [
    "best_translations",
    "check_sentences",
    "cut_note",
    "sentence_names",
    "translate_nbest",
    "translate_sentences",
    "warn_cut",
]

logger = logging.getLogger(__name__)


def sentence_names(names: Iterable[str] | None, count: int) -> list[str]:
    """What errors call each of ``count`` sentences: ``names`` (a file and line), checked; None: ``sentences[i]``.

    A str is refused, not read as one name per character; any other iterable (a generator
    too) is read once, and each name must be a str.
    """
    if names is None:
        return [f"sentences[{index}]" for index in range(count)]
    if isinstance(names, (str, bytes, bytearray, Mapping, AbstractSet)) or not isinstance(names, Iterable):
        given = f"str {names!r}" if isinstance(names, str) else type(names).__name__
        raise ValueError(f"names: expected a list of str, one per sentence, got {given}")
    listed = list(names)
    for index, name in enumerate(listed):
        if not isinstance(name, str):
            raise ValueError(f"names[{index}]: expected a str, got {type(name).__name__}")
    if len(listed) != count:
        raise ValueError(f"names: expected one per sentence ({count}), got {len(listed)}")
    return listed


def _encode_sources(
    model: DecodedModel, tokenizer: SubwordTokenizer, sentences: Sequence[str], names: Sequence[str]
) -> list[list[int]]:
    """The subword ids of each sentence ([] for a blank one); a failure names the sentence as ``names`` does.

    Every sentence's length is bounded before any is encoded, and each one's ids are
    checked as they come, so that a long input is refused before it costs its ids (2,000
    sentences of 100 kB took 3.7 GB of ids before the first was checked).
    """
    for sentence, name in zip(sentences, names, strict=True):
        _check_characters(model, tokenizer, sentence, name)
    return [
        _encoded(model, tokenizer, sentence, name) if sentence.strip() else []
        for sentence, name in zip(sentences, names, strict=True)
    ]


def check_sentences(
    model: DecodedModel, tokenizer: SubwordTokenizer | TokenizerPair, sentences: Sequence[str], names: Sequence[str]
) -> None:
    """Refuse the first of ``sentences`` that `translate_sentences` would refuse, named as ``names`` name it.

    Nothing is translated, and each sentence's ids are dropped once checked: a command answering
    a long file in parts refuses its bad line before the first part is decoded.
    """
    source = TokenizerPair.of(tokenizer).source
    for sentence, name in zip(sentences, names, strict=True):
        _check_characters(model, source, sentence, name)
    for sentence, name in zip(sentences, names, strict=True):
        if sentence.strip():
            _encoded(model, source, sentence, name)


def _check_characters(model: DecodedModel, tokenizer: SubwordTokenizer, sentence: str, name: str) -> None:
    """Refuse a sentence whose characters alone prove it longer than the model reads (see ``fewest_tokens``)."""
    fewest = tokenizer.fewest_tokens(sentence)
    if fewest > model.max_len:
        raise ValueError(
            f"{name} must be at most {model.max_len} subword tokens (the model's max_len), got {len(sentence)} "
            f"characters, so at least {fewest}"
        )


def _encoded(model: DecodedModel, tokenizer: SubwordTokenizer, sentence: str, name: str) -> list[int]:
    """The sentence's ids; text the tokenizer refuses or longer than the positional table is named (none is cut)."""
    try:
        ids = tokenizer.encode(sentence)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None
    if len(ids) > model.max_len:
        raise ValueError(f"{name} must be at most {model.max_len} subword tokens (the model's max_len), got {len(ids)}")
    return ids


def translate_sentences(
    model: DecodedModel,
    tokenizer: SubwordTokenizer | TokenizerPair,
    sentences: Sequence[str],
    decode_config: DecodeConfig,
    batch_size: int = 64,
    names: Sequence[str] | None = None,
    *,
    warn: bool = True,
) -> list[str]:
    """Translate ``sentences`` (batched by length); an empty or blank sentence gives ``""``.

    ``tokenizer`` is the checkpoint's pair, or one joint tokenizer. A sentence whose
    subword length exceeds the model's positional table raises ``ValueError`` naming it
    (``names``, one per sentence, e.g. its file and line; default ``sentences[i]``) and its
    length; nothing is truncated. ``warn``: log :func:`warn_cut`'s warning where translations
    ran to the search's length limit.
    """
    names = sentence_names(names, len(sentences))  # read once: they may come from a generator
    best = best_translations(model, tokenizer, sentences, decode_config, batch_size, names)
    if warn:
        warn_cut([[candidate] if candidate else [] for candidate in best], names)
    return [candidate.text if candidate else "" for candidate in best]


def best_translations(
    model: DecodedModel,
    tokenizer: SubwordTokenizer | TokenizerPair,
    sentences: Sequence[str],
    decode_config: DecodeConfig,
    batch_size: int = 64,
    names: Sequence[str] | None = None,
) -> list[Candidate | None]:
    """Each sentence's best translation as `translate_sentences` finds it, a `Candidate` (None: a blank sentence).

    Its ``cut`` says whether it ran to the search's length limit, for a caller that says so once for many parts.
    """
    tokenizers = TokenizerPair.of(tokenizer)
    names = sentence_names(names, len(sentences))
    encoded = _encode_sources(model, tokenizers.source, sentences, names)
    found = decode_sources(model, encoded, decode_config, batch_size=batch_size)
    return [
        candidates_of(hypotheses[:1], tokenizers.target.decode, decode_config.max_new_tokens(len(source)))[0]
        if hypotheses
        else None
        for hypotheses, source in zip(found, encoded, strict=True)
    ]


def translate_nbest(
    model: DecodedModel,
    tokenizer: SubwordTokenizer | TokenizerPair,
    sentence: str,
    decode_config: DecodeConfig,
    name: str = "sentence",
    *,
    warn: bool = True,
) -> list[Candidate]:
    """The n-best translations of one sentence, best first.

    Beam search returns ``decode_config.num_return`` candidates (at most ``beam_size``);
    greedy search returns one. A blank sentence or one longer than the positional table
    is a ``ValueError`` naming it as ``name``. ``warn``: as :func:`translate_sentences`'.
    """
    if not sentence.strip():
        raise ValueError(f"{name}: expected a non-empty sentence to translate, got a blank one")
    tokenizers = TokenizerPair.of(tokenizer)
    _check_characters(model, tokenizers.source, sentence, name)
    source_ids = _encoded(model, tokenizers.source, sentence, name)
    (hypotheses,) = decode_sources(model, [source_ids], decode_config)
    candidates = candidates_of(hypotheses, tokenizers.target.decode, decode_config.max_new_tokens(len(source_ids)))
    if warn:
        warn_cut([candidates], [name])
    return candidates


def warn_cut(found: Sequence[Sequence[Candidate]], names: Sequence[str]) -> None:
    """One warning where any sentence's best translation (``found[i][0]``, sentence ``names[i]``) was cut."""
    cut = [index for index, candidates in enumerate(found) if candidates and candidates[0].cut]
    if cut:
        first = (names[cut[0]], len(found[cut[0]][0].ids))
        logger.warning(cut_note(len(cut), sum(1 for candidates in found if candidates), first))


def cut_note(cut: int, searched: int, first: tuple[str, int]) -> str:
    """What :func:`warn_cut` says of ``cut`` translations among ``searched``, the first (its name, its tokens)."""
    return (
        f"{cut:,} of {searched:,} translations stopped at the search's length limit without ending, so may be "
        f"cut (the first: {first[0]}, at {first[1]} tokens; the limit is decode.max_len_a x the source's tokens + "
        "decode.max_len_b, at most decode.max_len): a model that repeats itself up to the limit is typical of one "
        "trained briefly"
    )
