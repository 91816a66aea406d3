"""The searches own the positional-table limit: they stop at model.max_len, whatever max_len they are asked for."""

from __future__ import annotations

import pytest
import torch

from transformer_lab.decoding import DecodeConfig, DecodeOutput, beam_search, decode, greedy_search
from transformer_lab.models import Seq2SeqTransformer

VOCAB, PAD_ID, BOS_ID, EOS_ID = 11, 0, 2, 3
POSITIONS = 6


def tiny_model(max_len: int = 64) -> Seq2SeqTransformer:
    """A random one-layer model of the tests' vocabulary, in eval mode."""
    return Seq2SeqTransformer(
        VOCAB,
        VOCAB,
        d_model=16,
        nhead=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dim_feedforward=32,
        dropout=0.0,
        max_len=max_len,
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
    ).eval()


def never_ending_model() -> Seq2SeqTransformer:
    """A random model whose eos can never win, so every search runs to its length limit."""
    model = tiny_model(POSITIONS)
    with torch.no_grad():
        model.generator.bias[EOS_ID] = -1e4
    return model


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_a_search_asked_for_more_than_the_table_stops_exactly_at_it(strategy: str) -> None:
    model = never_ending_model()
    src_ids = torch.tensor([[4, 5, 6], [7, 8, PAD_ID]])
    output = decode(model, src_ids, DecodeConfig(strategy=strategy, beam_size=3, max_len=100, length_penalty=0.0))
    assert isinstance(output, DecodeOutput)
    # All POSITIONS new tokens fit: the last one is chosen at position POSITIONS - 1 and never fed back.
    assert output.best_ids.shape == (2, POSITIONS)
    assert output.lengths.tolist() == [POSITIONS, POSITIONS]
    assert all(len(sentence[0].ids) == POSITIONS for sentence in output.hypotheses)


def test_the_cap_does_not_change_what_fits() -> None:
    model = never_ending_model()
    src_ids = torch.tensor([[4, 5, 6]])
    capped = greedy_search(model, src_ids, max_len=100)
    exact = greedy_search(model, src_ids, max_len=POSITIONS)
    shorter = greedy_search(model, src_ids, max_len=POSITIONS - 2)
    assert torch.equal(capped.best_ids, exact.best_ids)
    assert torch.equal(shorter.best_ids, exact.best_ids[:, : POSITIONS - 2])
    beam = beam_search(model, src_ids, 2, max_len=100, length_penalty=0.0)
    assert beam.best_ids.shape == (1, POSITIONS)


def test_greedy_and_beam_fill_the_same_fields() -> None:
    model = never_ending_model()
    with torch.no_grad():
        model.generator.bias[EOS_ID] = 2.0  # now some rows end early
    src_ids = torch.tensor([[4, 5, 6], [7, PAD_ID, PAD_ID]])
    greedy = greedy_search(model, src_ids, max_len=5, length_penalty=1.0)
    beam = beam_search(model, src_ids, 1, max_len=5, length_penalty=0.0)
    for output in (greedy, beam):
        for row, sentence in enumerate(output.hypotheses):
            best = sentence[0]
            assert output.best_ids[row, : len(best.ids)].tolist() == best.ids
            assert int(output.lengths[row]) == len(best.ids)
            assert float(output.scores[row]) == pytest.approx(best.log_prob)
    # Beam search with one beam and no length penalty follows greedy token for token.
    assert torch.equal(greedy.best_ids, beam.best_ids)
    # Greedy reports the penalised score as beam search would rank it.
    best = greedy.hypotheses[0][0]
    assert best.score == pytest.approx(best.log_prob / ((5 + len(best.ids)) / 6))


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_each_sentence_stops_at_its_own_length_limit_whatever_it_is_batched_with(strategy: str) -> None:
    from transformer_lab.decoding import DecodeConfig

    model = tiny_model()
    with torch.no_grad():
        model.generator.bias[EOS_ID] = -1e4  # never ends by itself: every row runs to its limit
    config = DecodeConfig(strategy=strategy, beam_size=2, max_len=60, max_len_a=1.5, max_len_b=2, length_penalty=0.0)
    short = [4, 5]  # limit int(1.5 * 2) + 2 = 5 tokens
    long = [4, 5, 6, 7, 8, 9, 10, 4, 5, 6]  # limit 17 tokens
    batch = torch.tensor([short + [PAD_ID] * 8, long])
    together = decode(model, batch, config)
    alone = decode(model, torch.tensor([short]), config)
    tokens = [[token for token in sentence[0].ids if token != EOS_ID] for sentence in together.hypotheses]
    # Each row holds its own limit of tokens (the short one was cut at 17 before).
    assert [len(row) for row in tokens] == [5, 17] and len(alone.hypotheses[0][0].ids) == 5
    # The same tokens as alone.
    assert tokens[0] == alone.hypotheses[0][0].ids


@pytest.mark.parametrize("beam_stop", ["exact", "finished"])
def test_beam_search_batched_with_longer_sentences_finds_the_n_best_list_it_finds_alone(beam_stop: str) -> None:
    # A sentence whose beams reach its length limit: alone they end there without eos; in a
    # batch whose other sentence allows more tokens they must end the same way, with the same
    # scores (a forced eos used to add its log-probability and a token, reranking the list).
    torch.manual_seed(0)
    model = tiny_model()
    with torch.no_grad():
        model.generator.bias[EOS_ID] = -4.0  # eos is possible but unlikely: most beams reach the limit
    config = DecodeConfig(
        strategy="beam",
        beam_size=3,
        num_return=3,
        max_len=60,
        max_len_a=1.5,
        max_len_b=2,
        length_penalty=1.0,
        beam_stop=beam_stop,
    )
    short = [4, 5]  # limit 5 tokens
    long = [4, 5, 6, 7, 8, 9, 10, 4, 5, 6]  # limit 17 tokens
    together = decode(model, torch.tensor([short + [PAD_ID] * 8, long]), config)
    for row, source in enumerate((short, long)):
        alone = decode(model, torch.tensor([source]), config)
        assert [hypothesis.ids for hypothesis in together.hypotheses[row]] == [
            hypothesis.ids for hypothesis in alone.hypotheses[0]
        ]
        assert [hypothesis.score for hypothesis in together.hypotheses[row]] == pytest.approx(
            [hypothesis.score for hypothesis in alone.hypotheses[0]], abs=1e-5
        )
    # The short sentence's list holds hypotheses cut at its limit, so the test checks them.
    assert any(len(hypothesis.ids) == 5 and hypothesis.ids[-1] != EOS_ID for hypothesis in together.hypotheses[0])
