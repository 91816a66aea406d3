"""Character facts that Chinese couplets are judged by: punctuation, Han characters, tones.

A couplet's lower line mirrors the upper line's punctuation and, by the rules of the form,
ends on a level tone (平声). The modern approximation used here, as in most couplet
work: a Han character is level when its standard Mandarin reading has tone 1 or 2, and
oblique (仄) with tone 3 or 4; the neutral tone (5) counts as oblique. Tones come from
`pypinyin` with its default (most frequent) reading of the single character, so a
character with several readings (行 xíng/háng, 重 zhòng/chóng) gets one of them.

Words and their parts of speech come from `jieba` (its default dictionary and HMM for
unknown words), the segmenter couplet evaluation tools use.
"""

from __future__ import annotations

import functools
import logging
import unicodedata
from types import ModuleType

from transformer_lab.extras import require_extra

LEVEL_TONES = (1, 2)


def is_punctuation(character: str) -> bool:
    """Whether `character` is a punctuation mark (Unicode category P*: ，。、？！；：- 《 ...).

    Symbols such as □ (category So), letters and digits are not punctuation.
    """
    return len(character) == 1 and unicodedata.category(character).startswith("P")


def is_han(character: str) -> bool:
    """Whether `character` is a Han ideograph (the CJK Unified Ideographs blocks)."""
    return len(character) == 1 and unicodedata.name(character, "").startswith("CJK UNIFIED IDEOGRAPH")


@functools.lru_cache(maxsize=65536)
def mandarin_tone(character: str) -> int | None:
    """The Mandarin tone (1-4, or 5 for the neutral tone) of a Han character, else None.

    The default reading of `pypinyin` for the character alone (no word context).
    """
    if not is_han(character):
        return None
    pypinyin = require_extra("pypinyin", "the couplet tone rules")
    readings = pypinyin.pinyin(
        character, style=pypinyin.Style.TONE3, heteronym=False, errors="ignore", neutral_tone_with_five=True
    )
    if not readings or not readings[0]:
        return None
    last = readings[0][0][-1:]
    return int(last) if last.isdigit() else None


def is_level_tone(character: str) -> bool:
    """Whether `character` is a Han character read in tone 1 or 2 (平)."""
    return tone_class(character) == "level"


def last_han_character(characters: str) -> str | None:
    """The last Han character of a line (trailing punctuation skipped), or None if it has none."""
    for character in reversed(characters):
        if is_han(character):
            return character
    return None


def tone_class(character: str) -> str | None:
    """ "level" (平, tone 1 or 2) or "oblique" (仄, tone 3, 4 or neutral) for a Han character, else None."""
    tone = mandarin_tone(character)
    if tone is None:
        return None
    return "level" if tone in LEVEL_TONES else "oblique"


def require_couplet_packages() -> None:
    """Import the tone and word rules' packages now: a run that needs them says a missing one before any work."""
    require_extra("pypinyin", "the couplet tone rules")
    _jieba()


@functools.lru_cache(maxsize=1)
def _jieba() -> ModuleType:
    jieba = require_extra("jieba", "the couplet word rules")
    # jieba logs its dictionary loading at DEBUG to stderr; a library keeps that quiet.
    jieba.setLogLevel(logging.WARNING)
    return jieba


@functools.lru_cache(maxsize=65536)
def segment_words(line: str) -> tuple[str, ...]:
    """The words `jieba.cut` splits a line into (punctuation marks are words of their own)."""
    return tuple(_jieba().cut(line))


@functools.lru_cache(maxsize=65536)
def tagged_words(line: str) -> tuple[tuple[str, str], ...]:
    """(word, part-of-speech tag) pairs from `jieba.posseg` (ICTCLAS tags: n noun, v verb, a adjective, x other, ...).

    Its segmentation can differ from :func:`segment_words`: the tagger runs its own pass.
    """
    _jieba()
    import jieba.posseg as posseg  # a submodule: importable once require_extra found jieba

    return tuple((pair.word, pair.flag) for pair in posseg.cut(line))
