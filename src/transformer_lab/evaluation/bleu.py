"""Corpus BLEU and chrF++ with sacreBLEU, the field's standard, reported with their signatures.

BLEU counts word n-grams, so the words must be found first: sacreBLEU's ``13a`` splits on
spaces and punctuation, which is right for German or English and wrong for text written
without spaces. :func:`bleu_tokenizer_for` picks the tokenizer sacreBLEU provides for the
target language: ``zh`` for Chinese, ``ja-mecab`` for Japanese where its extra is installed
(else ``char``), ``13a`` otherwise. chrF++ (character n-grams plus word 1-2-grams) needs no
tokenizer and is printed beside BLEU.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Sequence

import sacrebleu

from transformer_lab.extras import MissingExtraError

_CHINESE = ("zh", "zho", "chi", "cmn", "yue")
_JAPANESE = ("ja", "jpn")


@dataclass(frozen=True)
class BleuResult:
    score: float  # 0-100
    signature: str  # sacreBLEU's signature, so that the number can be reproduced
    text: str  # sacreBLEU's one-line summary (precisions, brevity penalty, lengths)


def check_lists(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    """A ``ValueError`` unless there are as many hypotheses as references, and at least one."""
    if len(hypotheses) != len(references):
        raise ValueError(
            f"hypotheses and references must have the same length, got {len(hypotheses)} and {len(references)}"
        )
    if not hypotheses:
        raise ValueError("hypotheses must not be empty, got 0 sentences")


def corpus_bleu(
    hypotheses: Sequence[str], references: Sequence[str], *, lowercase: bool = False, tokenize: str = "13a"
) -> BleuResult:
    """sacreBLEU over detokenized text: cased ``13a`` by default; see :func:`bleu_tokenizer_for`.

    Raises ``ValueError`` when the two lists differ in length (nothing is dropped).
    """
    check_lists(hypotheses, references)
    metric = sacrebleu.BLEU(lowercase=lowercase, tokenize=tokenize)
    result = metric.corpus_score(list(hypotheses), [list(references)])
    return BleuResult(score=result.score, signature=str(metric.get_signature()), text=str(result))


def corpus_chrf(hypotheses: Sequence[str], references: Sequence[str]) -> BleuResult:
    """sacreBLEU's chrF++ (character 6-grams and word 2-grams, beta 2), with its signature."""
    check_lists(hypotheses, references)
    metric = sacrebleu.CHRF(word_order=2)
    result = metric.corpus_score(list(hypotheses), [list(references)])
    return BleuResult(score=result.score, signature=str(metric.get_signature()), text=str(result))


@functools.lru_cache(maxsize=None)
def _missing_package(tokenize: str) -> str | None:
    """What sacreBLEU's ``tokenize`` needs installed here (its own words, in one line), or None where it runs.

    sacreBLEU says so only once it scores (ja-mecab and ko-mecab need its extras, flores101
    and flores200 sentencepiece): after a whole test set was translated.
    """
    try:
        sacrebleu.BLEU(tokenize=tokenize).corpus_score(["テスト a"], [["テスト a"]])
    except (RuntimeError, ImportError) as error:
        text = " ".join(str(error).split())
        command = re.search(r"pip install (\S+)", text)
        return f"pip install '{command.group(1)}'" if command else text or type(error).__name__
    return None


def check_bleu_tokenizer(tokenize: str, name: str = "tokenize") -> str:
    """``tokenize`` if sacreBLEU can run it here; else a :class:`~transformer_lab.extras.MissingExtraError` naming
    ``name`` and what to install (no extra of ours brings it), as a missing extra is said."""
    missing = _missing_package(tokenize)
    if missing is not None:
        raise MissingExtraError(
            f"{name} {tokenize}: the package sacreBLEU needs for this tokenizer is not installed: run {missing}"
        )
    return tokenize


def _japanese_tokenizer() -> str:
    # "char" where sacrebleu[ja] (MeCab and its dictionary) is not installed.
    return "char" if _missing_package("ja-mecab") is not None else "ja-mecab"


def bleu_tokenizer_for(language: str) -> str:
    """The sacreBLEU tokenizer for text in ``language`` (an ISO code such as "zh", "zh-CN", "ja", "de")."""
    base = language.strip().lower().replace("_", "-").split("-")[0]
    if base in _CHINESE:
        return "zh"
    if base in _JAPANESE:
        return _japanese_tokenizer()
    return "13a"
