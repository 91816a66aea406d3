"""Character facts that Chinese couplets are judged by: punctuation, Han characters, tones.

A couplet's lower line mirrors the upper line's punctuation and, by the rules of the form,
ends on a level tone (平声). The modern approximation used here, as in most couplet
work: a Han character is level when its standard Mandarin reading has tone 1 or 2, and
oblique (仄) with tone 3 or 4; the neutral tone (5) counts as oblique. Tones come from
`pypinyin` with its default (most frequent) reading of the single character, so a
character with several readings (行 xíng/háng, 重 zhòng/chóng) gets one of them.
"""

from __future__ import annotations

import functools
import unicodedata

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
    readings = pypinyin.pinyin(character, style=pypinyin.Style.TONE3, heteronym=False, errors="ignore", neutral_tone_with_five=True)
    if not readings or not readings[0]:
        return None
    last = readings[0][0][-1:]
    return int(last) if last.isdigit() else None


def is_level_tone(character: str) -> bool:
    """Whether `character` is a Han character read in tone 1 or 2 (平)."""
    return mandarin_tone(character) in LEVEL_TONES


def last_han_character(characters: str) -> str | None:
    """The last Han character of a line (trailing punctuation skipped), or None if it has none."""
    for character in reversed(characters):
        if is_han(character):
            return character
    return None
