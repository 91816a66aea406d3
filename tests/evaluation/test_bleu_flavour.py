"""The papers' BLEU flavour: lowercased, Moses-normalized and tokenized, against sacreBLEU's cased 13a, by hand."""

from __future__ import annotations

import math
import sys

import pytest

from transformer_lab.evaluation import corpus_bleu, papers_bleu
from transformer_lab.evaluation.bleu_flavour import check_bleu_flavour, moses_tokenized
from transformer_lab.extras import MissingExtraError


def test_case_alone_costs_the_cased_score_and_nothing_in_the_papers_flavour() -> None:
    hypothesis, reference = ["Two dogs play in the snow."], ["two dogs play in the snow."]
    # Cased 13a: 7 tokens, the first differs: n-gram precisions 6/7, 5/6, 4/5, 3/4, no brevity penalty.
    assert corpus_bleu(hypothesis, reference).score == pytest.approx(100 * (6 / 7 * 5 / 6 * 4 / 5 * 3 / 4) ** 0.25)
    papers = papers_bleu(hypothesis, reference, "en")
    assert papers.score == pytest.approx(100.0)


def test_quotes_are_normalized_and_split_as_moses_does_where_13a_leaves_them_on_the_word() -> None:
    hypothesis, reference = ["A man says “hello”."], ['a man says "hello".']
    # Normalized to straight quotes, the English rule moves the period inside them, then
    # the tokenizer splits and escapes them: one text for both.
    expected = "a man says &quot; hello . &quot;"
    assert moses_tokenized(hypothesis, "en") == moses_tokenized(reference, "en") == [expected]
    assert papers_bleu(hypothesis, reference, "en").score == pytest.approx(100.0)
    # Lowercased 13a keeps “hello” one token (5 tokens against 7): precisions 4/5, 2/4, 1/3,
    # and 0/2 smoothed to 1/(2*2); brevity penalty exp(1 - 7/5).
    lowercased = corpus_bleu(hypothesis, reference, lowercase=True).score
    expected_lowercased = 100 * math.exp(1 - 7 / 5) * (4 / 5 * 2 / 4 * 1 / 3 * 1 / 4) ** 0.25
    assert lowercased == pytest.approx(expected_lowercased)


def test_apostrophes_are_split_as_moses_does_for_english() -> None:
    assert moses_tokenized(["The dog's ball & a rope."], "en") == ["the dog &apos;s ball &amp; a rope ."]


def test_the_signature_names_the_flavour_and_what_ran() -> None:
    signature = papers_bleu(["a cat"], ["a cat"], "de").signature
    fields = dict(part.split(":", 1) for part in signature.split("|"))
    assert signature.startswith("flavour:papers|nrefs:1|case:lc|")
    assert fields["tok"] == "moses-de" and fields["sacremoses"] == "0.2.0"
    assert signature.endswith(f"|version:{fields['version']}")
    assert "flavour" not in corpus_bleu(["a cat"], ["a cat"]).signature  # the default is sacreBLEU's own


def test_bad_input_names_the_argument() -> None:
    with pytest.raises(ValueError, match=r"--bleu-flavour: expected one of sacrebleu, papers, got 'paper'"):
        check_bleu_flavour("paper")
    with pytest.raises(ValueError, match=r"--bleu-flavour papers: expected a target language written with spaces"):
        papers_bleu(["一只猫"], ["一只猫"], "zh")
    with pytest.raises(ValueError, match="same length, got 1 and 2"):
        papers_bleu(["a"], ["a", "b"], "en")


def test_without_sacremoses_it_is_one_line_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sacremoses", None)
    with pytest.raises(MissingExtraError, match=r'pip install -e "\.\[moses\]"') as error:
        papers_bleu(["a cat"], ["a cat"], "en")
    assert "--bleu-flavour papers" in str(error.value) and "\n" not in str(error.value)


def test_the_papers_flavour_scores_its_own_tokenization_without_sacrebleus_detokenize_warning(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # Was: "That's 100 lines that end in a tokenized period ('.') ... you forgot to detokenize" on every
    # papers score of a test set: the Moses tokenization is the flavour's own, not the user's mistake.
    hypotheses = [f"A dog runs {number}." for number in range(120)]
    score = papers_bleu(hypotheses, hypotheses, "en")
    assert score.score == pytest.approx(100.0)
    captured = capsys.readouterr()
    assert "detokenize" not in captured.out + captured.err + caplog.text
