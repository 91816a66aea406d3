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
from dataclasses import dataclass
from typing import Sequence

import sacrebleu

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
def _japanese_tokenizer() -> str:
    try:
        sacrebleu.BLEU(tokenize="ja-mecab").corpus_score(["テスト"], [["テスト"]])
    except (RuntimeError, ImportError):
        return "char"  # sacrebleu[ja] (MeCab and its dictionary) is not installed
    return "ja-mecab"


def bleu_tokenizer_for(language: str) -> str:
    """The sacreBLEU tokenizer for text in ``language`` (an ISO code such as "zh", "zh-CN", "ja", "de")."""
    base = language.strip().lower().replace("_", "-").split("-")[0]
    if base in _CHINESE:
        return "zh"
    if base in _JAPANESE:
        return _japanese_tokenizer()
    return "13a"
