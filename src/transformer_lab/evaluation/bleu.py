"""Corpus BLEU with sacreBLEU, the field's standard, reported with its signature."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import sacrebleu


@dataclass(frozen=True)
class BleuResult:
    score: float  # 0-100
    signature: str  # sacreBLEU's signature, so that the number can be reproduced
    text: str  # sacreBLEU's one-line summary (precisions, brevity penalty, lengths)


def corpus_bleu(
    hypotheses: Sequence[str], references: Sequence[str], *, lowercase: bool = False, tokenize: str = "13a"
) -> BleuResult:
    """sacreBLEU over detokenized text: cased ``13a`` by default; ``tokenize="char"`` for Chinese.

    Raises ``ValueError`` when the two lists differ in length (nothing is dropped).
    """
    if len(hypotheses) != len(references):
        raise ValueError(
            f"hypotheses and references must have the same length, got {len(hypotheses)} and {len(references)}"
        )
    if not hypotheses:
        raise ValueError("hypotheses must not be empty, got 0 sentences")
    metric = sacrebleu.BLEU(lowercase=lowercase, tokenize=tokenize)
    result = metric.corpus_score(list(hypotheses), [list(references)])
    return BleuResult(score=result.score, signature=str(metric.get_signature()), text=str(result))
