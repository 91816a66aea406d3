"""Beam search on hand-built log-probabilities (fakes in conftest.py)."""

import math

import pytest
import torch

from transformer_lab.decoding import DecodeOutput, Hypothesis, beam_search, gnmt_length_penalty, greedy_search

PAD, EOS, A, B, C, D = 0, 2, 3, 4, 5, 6


def test_beam_finds_the_best_sequence_that_greedy_misses(table_model, sources):
    src_ids = sources([0])
    greedy = greedy_search(table_model, src_ids, max_len=6)
    assert greedy.best_ids.tolist() == [[A, C, EOS]]
    output = beam_search(table_model, src_ids, beam_size=2, max_len=6, length_penalty=0.6)
    assert isinstance(output, DecodeOutput)
    best = output.hypotheses[0][0]
    assert isinstance(best, Hypothesis)
    assert best.ids == [B, EOS]
    assert best.log_prob == pytest.approx(math.log(0.4) + math.log(0.95), abs=1e-5)
    assert best.log_prob > greedy.scores[0].item()
    assert best.score == pytest.approx(best.log_prob / ((5 + 2) / 6) ** 0.6, rel=1e-6)
    assert output.best_ids.tolist() == [[B, EOS]]


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_nbest_is_ordered_scored_and_matches_exhaustive_search(table_model, sources, alpha, oracle_length_penalty):
    # With beam_size >= every candidate count the search is exhaustive, so its n-best
    # must equal the brute-force ranking; that also shows the early stop is exact.
    src_ids = sources([0])
    output = beam_search(table_model, src_ids, beam_size=80, max_len=3, length_penalty=alpha, num_return=4)
    hypotheses = output.hypotheses[0]
    assert len(hypotheses) == 4
    scores = [hypothesis.score for hypothesis in hypotheses]
    assert scores == sorted(scores, reverse=True)
    assert len({tuple(hypothesis.ids) for hypothesis in hypotheses}) == 4
    for hypothesis in hypotheses:
        assert hypothesis.log_prob == pytest.approx(table_model.sequence_log_prob(0, hypothesis.ids), abs=1e-5)
        assert hypothesis.score == pytest.approx(
            hypothesis.log_prob / oracle_length_penalty(len(hypothesis.ids), alpha), rel=1e-6
        )
    oracle = table_model.exhaustive_nbest(0, max_len=3, alpha=alpha, count=4)
    assert [hypothesis.ids for hypothesis in hypotheses] == [ids for ids, _ in oracle]
    assert scores == pytest.approx([score for _, score in oracle], abs=1e-5)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_exhaustive_beam_equals_brute_force_on_random_models(make_random_model, sources, seed, alpha):
    model = make_random_model(vocab_size=5, seed=seed)  # tokens eos, 3, 4
    src_ids = sources([0, 1])
    output = beam_search(model, src_ids, beam_size=24, max_len=4, length_penalty=alpha, num_return=3)
    for key, hypotheses in zip([0, 1], output.hypotheses):
        oracle = model.exhaustive_nbest(key, max_len=4, alpha=alpha, count=3)
        assert [hypothesis.ids for hypothesis in hypotheses] == [ids for ids, _ in oracle]
        assert [hypothesis.score for hypothesis in hypotheses] == pytest.approx(
            [score for _, score in oracle], abs=1e-5
        )


def test_eos_ends_a_hypothesis_and_best_ids_pad_after_it(table_model, sources):
    output = beam_search(table_model, sources([0, 1, 4]), beam_size=3, max_len=8, num_return=2, length_penalty=0.0)
    for hypotheses in output.hypotheses:
        for hypothesis in hypotheses:
            assert hypothesis.ids[-1] == EOS
            assert EOS not in hypothesis.ids[:-1]
    assert output.best_ids.tolist() == [[B, EOS], [A, EOS], [EOS, PAD]]


def test_max_len_is_honoured_and_unfinished_beams_are_returned_without_eos(table_model, sources):
    output = beam_search(table_model, sources([3]), beam_size=3, max_len=5, num_return=3, length_penalty=0.0)
    hypotheses = output.hypotheses[0]
    assert all(len(hypothesis.ids) <= 5 for hypothesis in hypotheses)
    assert hypotheses[0].ids == [A] * 5  # the never-ending table: best is cut at max_len
    assert hypotheses[0].log_prob == pytest.approx(5 * math.log(0.9), abs=1e-5)
    assert len(table_model.step_rows) == 5
    assert output.best_ids.tolist() == [[A] * 5]


def test_length_penalty_decides_between_short_and_long(table_model, sources):
    src_ids = sources([1])
    short = beam_search(table_model, src_ids, beam_size=4, max_len=6, length_penalty=0.0).hypotheses[0][0]
    long = beam_search(table_model, src_ids, beam_size=4, max_len=6, length_penalty=1.0).hypotheses[0][0]
    assert short.ids == [A, EOS]
    assert short.log_prob == pytest.approx(-0.99425, abs=1e-4)  # ln .5 + ln .74
    assert long.ids == [B, C, D, EOS]
    assert long.log_prob == pytest.approx(-1.17830, abs=1e-4)  # ln .45 + ln .8 + ln .9 + ln .95
    assert long.score == pytest.approx(-1.17830 / 1.5, abs=1e-4)
    assert long.log_prob < short.log_prob  # the long one wins on normalised score only
    assert gnmt_length_penalty(4, 1.0) == pytest.approx(1.5)
    assert gnmt_length_penalty(7, 0.0) == 1.0


def test_early_stop_waits_for_a_long_hypothesis_the_penalty_favours(table_model, sources):
    src_ids = sources([5])
    flat = beam_search(table_model, src_ids, beam_size=2, max_len=8, length_penalty=0.0)
    assert flat.hypotheses[0][0].ids == [A, EOS]
    penalised = beam_search(table_model, src_ids, beam_size=2, max_len=8, length_penalty=1.0)
    best = penalised.hypotheses[0][0]
    assert best.ids == [B, C, D, C, D, EOS]
    assert best.score == pytest.approx((math.log(0.4) + 5 * math.log(0.999)) / (11 / 6), abs=1e-4)
    assert penalised.hypotheses[0][0].score > (math.log(0.6) + math.log(0.9)) / (7 / 6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_size_one_equals_greedy_without_length_penalty(make_random_model, sources, seed):
    model = make_random_model(vocab_size=8, seed=seed)
    src_ids = sources([0, 1, 2, 3])
    greedy = greedy_search(model, src_ids, max_len=7)
    beam = beam_search(model, src_ids, beam_size=1, max_len=7, length_penalty=0.0)
    for row, hypotheses in enumerate(beam.hypotheses):
        length = int(greedy.lengths[row])
        assert hypotheses[0].ids == greedy.best_ids[row, :length].tolist()
        assert hypotheses[0].log_prob == greedy.scores[row].item()  # same float32 sums
    width = beam.best_ids.size(1)
    assert torch.equal(beam.best_ids, greedy.best_ids[:, :width])


def test_beam_size_one_may_outrun_greedy_with_a_length_penalty(table_model, sources):
    # Documented behaviour: the early stop is exact, so with alpha > 0 one beam goes on
    # past greedy's eos and finds the longer output whose normalised score is higher.
    src_ids = sources([2])
    assert greedy_search(table_model, src_ids, max_len=6).best_ids.tolist() == [[A, EOS]]
    flat = beam_search(table_model, src_ids, beam_size=1, max_len=6, length_penalty=0.0)
    assert flat.hypotheses[0][0].ids == [A, EOS]
    penalised = beam_search(table_model, src_ids, beam_size=1, max_len=6, length_penalty=1.0)
    assert penalised.hypotheses[0][0].ids == [A, B, EOS]


@pytest.mark.parametrize("use_cache", [True, False])
def test_a_batch_decodes_like_each_sentence_alone(table_model, sources, use_cache):
    keys, lengths = [0, 3, 1, 4], [4, 2, 5, 3]
    batch = beam_search(table_model, sources(keys, lengths), beam_size=3, max_len=6, num_return=2, use_cache=use_cache)
    assert [hypotheses[0].ids[0] for hypotheses in batch.hypotheses] == [B, A, A, EOS]
    for row, (key, length) in enumerate(zip(keys, lengths)):
        alone = beam_search(
            table_model, sources([key], [length]), beam_size=3, max_len=6, num_return=2, use_cache=use_cache
        )
        assert [h.ids for h in batch.hypotheses[row]] == [h.ids for h in alone.hypotheses[0]]
        assert [h.log_prob for h in batch.hypotheses[row]] == pytest.approx(
            [h.log_prob for h in alone.hypotheses[0]], abs=1e-6
        )
        best = alone.hypotheses[0][0].ids
        assert batch.best_ids[row, : len(best)].tolist() == best
        assert (batch.best_ids[row, len(best) :] == PAD).all()


def test_cache_is_reordered_and_finished_sentences_leave_the_batch(table_model, sources):
    output = beam_search(table_model, sources([0, 3]), beam_size=3, max_len=6)
    assert [hypotheses[0].ids for hypotheses in output.hypotheses] == [[B, EOS], [A] * 6]
    cache = table_model.caches[-1]
    # Every cached step checked cache == prefix minus last token (see conftest). The
    # batch starts as 2 sentences * 3 beams; sentence 0 is done after two steps (b eos
    # at -0.97 beats any continuation, bounded by the best live -1.83 / lp(6)) and
    # leaves, so the reorder that follows keeps only sentence 1's 3 rows.
    assert table_model.step_rows == [6, 6, 3, 3, 3, 3]
    assert cache.reorder_sizes == [6, 3, 3, 3, 3]


def test_logits_processor_forbidding_early_eos_is_respected(table_model, sources):
    calls = []

    def forbid_eos_before_length_three(step, prefix_ids, log_probs):
        calls.append((step, tuple(prefix_ids.shape), tuple(log_probs.shape)))
        assert torch.allclose(
            log_probs.logsumexp(dim=-1), torch.zeros(log_probs.size(0)), atol=1e-5
        ), "the processor receives log-probabilities"
        if step < 2:
            log_probs = log_probs.clone()
            log_probs[:, EOS] = -math.inf
        return log_probs

    src_ids = sources([4, 0])
    plain = beam_search(table_model, src_ids, beam_size=3, max_len=6, num_return=3)
    assert plain.hypotheses[0][0].ids == [EOS]
    forced = beam_search(
        table_model, src_ids, beam_size=3, max_len=6, num_return=3, logits_processor=forbid_eos_before_length_three
    )
    for hypotheses in forced.hypotheses:
        assert len(hypotheses) == 3
        assert all(len(hypothesis.ids) >= 3 for hypothesis in hypotheses)
    assert forced.hypotheses[0][0].ids == [A, B, EOS]
    assert calls[0] == (0, (6, 1), (6, 7))
    assert all(prefix_shape[1] == step + 1 for step, prefix_shape, _ in calls)


def test_impossible_sequences_are_never_returned(table_model, sources):
    def only_a_or_eos(step, prefix_ids, log_probs):
        allowed = torch.full_like(log_probs, -math.inf)
        allowed[:, [A, EOS]] = 0.0
        return log_probs + allowed

    output = beam_search(
        table_model, sources([0]), beam_size=3, max_len=1, num_return=3, logits_processor=only_a_or_eos
    )
    # Only two sequences of length <= 1 remain possible, so only two come back.
    assert sorted(hypothesis.ids for hypothesis in output.hypotheses[0]) == [[EOS], [A]]
    assert all(math.isfinite(hypothesis.score) for hypothesis in output.hypotheses[0])


def test_bad_arguments_raise_value_errors_naming_them(table_model, sources):
    src_ids = sources([0])
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(table_model, src_ids, beam_size=0, max_len=3)
    with pytest.raises(ValueError, match="max_len"):
        beam_search(table_model, src_ids, beam_size=2, max_len=0)
    with pytest.raises(ValueError, match="num_return"):
        beam_search(table_model, src_ids, beam_size=2, max_len=3, num_return=3)
    with pytest.raises(ValueError, match="length_penalty"):
        beam_search(table_model, src_ids, beam_size=2, max_len=3, length_penalty=math.nan)
    with pytest.raises(ValueError, match="src_ids"):
        beam_search(table_model, src_ids[0], beam_size=2, max_len=3)


def finished_rule_oracle(model, key: int, beam_size: int, max_len: int, alpha: float) -> tuple[list[int], float]:
    """fairseq's stop written plainly for one sentence: the best of the first beam_size hypotheses to end.

    Each step ranks every continuation of the live beams by raw log-prob; an eos among
    the first beam_size ends a hypothesis, the best beam_size others live on; at max_len
    the live beams end too.
    """
    live: list[tuple[tuple[int, ...], float]] = [((), 0.0)]
    ended: list[tuple[list[int], float]] = []
    for step in range(max_len):
        candidates = []
        for prefix, log_prob in live:
            for token, token_log_prob in enumerate(model.log_probs_for(key, prefix).tolist()):
                if token_log_prob != -math.inf:
                    candidates.append((prefix + (token,), log_prob + token_log_prob))
        candidates.sort(key=lambda candidate: -candidate[1])  # stable: ties keep their order
        top = candidates[: 2 * beam_size]
        ended += [(list(ids), log_prob) for ids, log_prob in top[:beam_size] if ids[-1] == EOS]
        live = [(ids, log_prob) for ids, log_prob in top if ids[-1] != EOS][:beam_size]
        if step == max_len - 1:
            ended += [(list(ids), log_prob) for ids, log_prob in live]
        if len(ended) >= beam_size or step == max_len - 1 or not live:
            break
    return max(ended, key=lambda hypothesis: hypothesis[1] / gnmt_length_penalty(len(hypothesis[0]), alpha))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_the_finished_stop_is_fairseqs_rule(make_random_model, sources, seed, alpha):
    model = make_random_model(vocab_size=6, seed=seed)
    src_ids = sources([0, 1, 2])
    output = beam_search(model, src_ids, beam_size=3, max_len=6, length_penalty=alpha, stop="finished")
    for key, hypotheses in zip([0, 1, 2], output.hypotheses):
        ids, log_prob = finished_rule_oracle(model, key, beam_size=3, max_len=6, alpha=alpha)
        assert hypotheses[0].ids == ids
        assert hypotheses[0].log_prob == pytest.approx(log_prob, abs=1e-5)


def test_the_finished_stop_does_not_wait_for_the_long_hypothesis(table_model, sources):
    # The exact stop finds the long hypothesis the penalty favours (the test above); the
    # field's stop ends the sentence once beam_size hypotheses have ended, before it.
    src_ids = sources([5])
    exact = beam_search(table_model, src_ids, beam_size=2, max_len=8, length_penalty=1.0)
    quick = beam_search(table_model, src_ids, beam_size=2, max_len=8, length_penalty=1.0, stop="finished")
    assert exact.hypotheses[0][0].ids == [B, C, D, C, D, EOS]
    assert quick.hypotheses[0][0].ids != exact.hypotheses[0][0].ids
    assert quick.hypotheses[0][0].score < exact.hypotheses[0][0].score
    with pytest.raises(ValueError, match="^stop: expected one of 'exact', 'finished', got 'never'$"):
        beam_search(table_model, src_ids, beam_size=2, max_len=8, stop="never")
