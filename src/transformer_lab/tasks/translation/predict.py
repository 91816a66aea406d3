"""Translating with a trained model: sentences, one sentence's n-best, and BLEU and chrF++ against references."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from transformer_lab.data import SubwordTokenizer, TokenizerPair
from transformer_lab.decoding import DecodeConfig
from transformer_lab.evaluation import BleuResult, corpus_bleu, corpus_chrf
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.tasks import seq2seq
from transformer_lab.tasks.seq2seq import Candidate


def _encode_sources(
    model: Seq2SeqTransformer, tokenizer: SubwordTokenizer, sentences: Sequence[str], name: str
) -> list[list[int]]:
    """The subword ids of each sentence ([] for a blank one); a failure names the sentence's index.

    Every sentence's length is bounded before any is encoded, and each one's ids are
    checked as they come, so that a long input is refused before it costs its ids (2,000
    sentences of 100 kB took 3.7 GB of ids before the first was checked).
    """
    for index, sentence in enumerate(sentences):
        _check_characters(model, tokenizer, sentence, f"{name}[{index}]")
    encoded = []
    for index, sentence in enumerate(sentences):
        try:
            ids = tokenizer.encode(sentence) if sentence.strip() else []
        except ValueError as error:
            raise ValueError(f"{name}[{index}]: {error}") from None
        seq2seq.check_source_length(model, ids, f"{name}[{index}]", "subword tokens")
        encoded.append(ids)
    return encoded


def _check_characters(model: Seq2SeqTransformer, tokenizer: SubwordTokenizer, sentence: str, name: str) -> None:
    """Refuse a sentence whose characters alone prove it longer than the model reads (see ``fewest_tokens``)."""
    fewest = tokenizer.fewest_tokens(sentence)
    if fewest > model.max_len:
        raise ValueError(
            f"{name} must be at most {model.max_len} subword tokens (the model's max_len), got {len(sentence)} "
            f"characters, so at least {fewest}"
        )


def translate_sentences(
    model: Seq2SeqTransformer,
    tokenizer: SubwordTokenizer | TokenizerPair,
    sentences: Sequence[str],
    decode_config: DecodeConfig,
    batch_size: int = 64,
) -> list[str]:
    """Translate ``sentences`` (batched by length); an empty or blank sentence gives ``""``.

    ``tokenizer`` is the checkpoint's pair, or one joint tokenizer. A sentence whose
    subword length exceeds the model's positional table raises ``ValueError`` naming its
    index and length; nothing is truncated.
    """
    tokenizers = TokenizerPair.of(tokenizer)
    encoded = _encode_sources(model, tokenizers.source, sentences, "sentences")
    found = seq2seq.decode_sources(model, encoded, decode_config, batch_size=batch_size)
    return [
        seq2seq.candidates_of(hypotheses[:1], tokenizers.target.decode)[0].text if hypotheses else ""
        for hypotheses in found
    ]


def translate_nbest(
    model: Seq2SeqTransformer,
    tokenizer: SubwordTokenizer | TokenizerPair,
    sentence: str,
    decode_config: DecodeConfig,
    name: str = "sentence",
) -> list[Candidate]:
    """The n-best translations of one sentence, best first.

    Beam search returns ``decode_config.num_return`` candidates (at most ``beam_size``);
    greedy search returns one. A blank sentence or one longer than the positional table
    is a ``ValueError`` naming it as ``name``.
    """
    if not sentence.strip():
        raise ValueError(f"{name}: expected a non-empty sentence to translate, got a blank one")
    tokenizers = TokenizerPair.of(tokenizer)
    _check_characters(model, tokenizers.source, sentence, name)
    source_ids = tokenizers.source.encode(sentence)
    seq2seq.check_source_length(model, source_ids, name, "subword tokens")
    (hypotheses,) = seq2seq.decode_sources(model, [source_ids], decode_config)
    return seq2seq.candidates_of(hypotheses, tokenizers.target.decode)


@dataclass
class BleuReport:
    cased: BleuResult
    lowercased: BleuResult
    chrf: BleuResult  # chrF++
    hypotheses: list[str]


def evaluate_bleu(
    model: Seq2SeqTransformer,
    tokenizer: SubwordTokenizer | TokenizerPair,
    pairs: Sequence[tuple[str, str]],
    decode_config: DecodeConfig,
    bleu_tokenize: str = "13a",
) -> BleuReport:
    """Translate the sources of ``pairs`` and score them against the targets: BLEU (cased, lowercased), chrF++.

    ``bleu_tokenize`` is sacreBLEU's tokenizer; ``bleu_tokenizer_for(target_language)`` picks
    the one for the target language.
    """
    hypotheses = translate_sentences(model, tokenizer, [source for source, _ in pairs], decode_config)
    references = [target for _, target in pairs]
    return BleuReport(
        cased=corpus_bleu(hypotheses, references, tokenize=bleu_tokenize),
        lowercased=corpus_bleu(hypotheses, references, lowercase=True, tokenize=bleu_tokenize),
        chrf=corpus_chrf(hypotheses, references),
        hypotheses=hypotheses,
    )
