"""A translation model scored on sentence pairs: its hypotheses, BLEU (cased and lowercased) and chrF++."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from transformer_lab.data import SubwordTokenizer, TokenizerPair
from transformer_lab.decoding.config import DecodeConfig
from transformer_lab.decoding.sentences import DecodedModel, translate_sentences
from transformer_lab.evaluation.bleu import BleuResult, corpus_bleu, corpus_chrf
from transformer_lab.one_line import line_break_notes, one_line

__all__ = ["BleuReport", "evaluate_bleu"]


@dataclass
class BleuReport:
    cased: BleuResult
    lowercased: BleuResult
    chrf: BleuResult  # chrF++
    hypotheses: list[str]  # one line each, as scored and as a file of them holds them (see one_line)
    notes: list[str]  # how many translations held a line break, where any did


def evaluate_bleu(
    model: DecodedModel,
    tokenizer: SubwordTokenizer | TokenizerPair,
    pairs: Sequence[tuple[str, str]],
    decode_config: DecodeConfig,
    bleu_tokenize: str = "13a",
    names: Sequence[str] | None = None,
    warn: bool = True,
) -> BleuReport:
    """Translate the sources of ``pairs`` and score them against the targets: BLEU (cased, lowercased), chrF++.

    ``bleu_tokenize`` is sacreBLEU's tokenizer; ``bleu_tokenizer_for(target_language)`` picks
    the one for the target language. A line break or tab in a translation is scored as a space,
    as the hypotheses file holds it. ``names``: what a source too long to translate is called
    in the error (its file and line; default ``sentences[i]``). ``warn``: warn of translations that
    ran to the length limit (`translate_sentences`).
    """
    sources = [source for source, _ in pairs]
    translations = translate_sentences(model, tokenizer, sources, decode_config, names=names, warn=warn)
    hypotheses = [one_line(text) for text in translations]
    references = [target for _, target in pairs]
    return BleuReport(
        cased=corpus_bleu(hypotheses, references, tokenize=bleu_tokenize),
        lowercased=corpus_bleu(hypotheses, references, lowercase=True, tokenize=bleu_tokenize),
        chrf=corpus_chrf(hypotheses, references),
        hypotheses=hypotheses,
        notes=line_break_notes(translations, "hypotheses"),
    )
