"""Which BLEU a figure is: sacreBLEU's default (cased, ``13a``) or the papers' (lowercased, Moses-tokenized).

A BLEU figure means something only with the text it was counted on. sacreBLEU's default
scores detokenized, cased text with its ``13a`` tokenizer, and its signature says so. The
WMT multimodal tasks, and the papers that report Multi30k, scored lowercased text after
the Moses scripts (the Multi30k repository's own preparation: ``lowercase.perl |
normalize-punctuation.perl -l L | tokenizer.perl -l L``), then counted BLEU on those tokens
as ``multi-bleu.perl`` does. The ``papers`` flavour does the same with sacremoses, the
Python port of those scripts (the ``moses`` extra), and sacreBLEU with its tokenizer off;
on Multi30k it reads about 0.5-1 BLEU above the default. Its signature starts with
``flavour:papers`` and names the Moses tokenization and sacremoses' version, so that the
figure is never mistaken for a sacreBLEU default one.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Sequence

import sacrebleu

from transformer_lab.evaluation.bleu import BleuResult, bleu_tokenizer_for, check_lists
from transformer_lab.extras import require_extra

SACREBLEU_FLAVOUR = "sacrebleu"  # sacreBLEU's default: cased, 13a over detokenized text
PAPERS_FLAVOUR = "papers"  # lowercased, Moses punctuation normalization and tokenization
BLEU_FLAVOURS = (SACREBLEU_FLAVOUR, PAPERS_FLAVOUR)


def check_bleu_flavour(flavour: str) -> str:
    """``flavour`` if it is one of :data:`BLEU_FLAVOURS`, else a ``ValueError`` naming ``--bleu-flavour``."""
    if flavour not in BLEU_FLAVOURS:
        raise ValueError(f"--bleu-flavour: expected one of {', '.join(BLEU_FLAVOURS)}, got {flavour!r}")
    return flavour


def check_papers_flavour(language: str) -> str:
    """The Moses language code for a target in ``language``, once the papers flavour can score it.

    A language written without spaces (Chinese, Japanese), whose words Moses does not find,
    is a ``ValueError`` naming ``--bleu-flavour``; a missing sacremoses is a
    :class:`~transformer_lab.extras.MissingExtraError` naming the ``moses`` extra. Checked
    before anything is translated, so that neither is found after the decoding.
    """
    if bleu_tokenizer_for(language) != "13a":
        raise ValueError(
            f"--bleu-flavour papers: expected a target language written with spaces between words "
            f"(Moses tokenization), got {language!r}; score it with the sacrebleu flavour"
        )
    require_extra("sacremoses", "--bleu-flavour papers (Moses tokenization)")
    return language.strip().lower().replace("_", "-").split("-")[0]


def moses_tokenized(sentences: Sequence[str], language: str) -> list[str]:
    """``sentences`` lowercased, punctuation-normalized and tokenized as the Moses scripts do for ``language``.

    Tokens are joined by single spaces, with Moses's escapes (``&amp;``, ``&apos;``...), as
    ``tokenizer.perl`` writes them without options. Needs the ``moses`` extra (sacremoses).
    """
    sacremoses = require_extra("sacremoses", "--bleu-flavour papers (Moses tokenization)")
    normalizer = sacremoses.MosesPunctNormalizer(lang=language)
    tokenizer = sacremoses.MosesTokenizer(lang=language)
    return [tokenizer.tokenize(normalizer.normalize(sentence.lower()), return_str=True) for sentence in sentences]


def papers_bleu(hypotheses: Sequence[str], references: Sequence[str], language: str) -> BleuResult:
    """BLEU as the Multi30k papers report it: lowercased, Moses-tokenized for ``language`` (the target's).

    Refuses what :func:`check_papers_flavour` refuses; lists of different lengths are a
    ``ValueError`` as in :func:`~transformer_lab.evaluation.bleu.corpus_bleu`.
    """
    check_lists(hypotheses, references)
    base = check_papers_flavour(language)
    # force: the text is tokenized on purpose (Moses), so sacreBLEU's "forgot to detokenize" warning is not for it.
    metric = sacrebleu.BLEU(lowercase=True, tokenize="none", force=True)
    result = metric.corpus_score(moses_tokenized(hypotheses, base), [moses_tokenized(references, base)])
    return BleuResult(
        score=result.score, signature=_papers_signature(str(metric.get_signature()), base), text=str(result)
    )


def _papers_signature(sacrebleu_signature: str, language: str) -> str:
    """sacreBLEU's signature with the flavour first, ``tok:none`` named for what ran, and sacremoses' version."""
    fields = dict(part.split(":", 1) for part in sacrebleu_signature.split("|"))
    fields["tok"] = f"moses-{language}"
    last = fields.pop("version")
    parts = ["flavour:papers", *(f"{key}:{value}" for key, value in fields.items())]
    return "|".join([*parts, f"sacremoses:{version('sacremoses')}", f"version:{last}"])
