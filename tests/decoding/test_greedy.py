"""Greedy search on hand-built log-probabilities (fakes in conftest.py)."""

import math

import pytest
import torch

from transformer_lab.decoding import DecodeOutput, greedy_search

PAD, EOS, A, B, C = 0, 2, 3, 4, 5


def test_greedy_takes_the_locally_best_token(table_model, sources):
    output = greedy_search(table_model, sources([0]), max_len=6)
    assert isinstance(output, DecodeOutput)
    # Table 0: a (0.5) then c (0.32) then eos (0.9); beam search beats this (test_beam).
    assert output.best_ids.tolist() == [[A, C, EOS]]
    assert output.scores.dtype == torch.float32
    assert output.scores.item() == pytest.approx(math.log(0.5) + math.log(0.32) + math.log(0.9), abs=1e-5)
    assert output.lengths.tolist() == [3]


def test_rows_are_padded_after_eos_and_padding_adds_no_score(table_model, sources):
    keys = [0, 1, 4]
    output = greedy_search(table_model, sources(keys, lengths=[4, 2, 3]), max_len=6)
    expected = [[A, C, EOS], [A, EOS, PAD], [EOS, PAD, PAD]]
    assert output.best_ids.tolist() == expected
    assert output.lengths.tolist() == [3, 2, 1]
    for row, key in enumerate(keys):
        generated = output.best_ids[row, : output.lengths[row]].tolist()
        assert generated[-1] == EOS and EOS not in generated[:-1]
        assert output.scores[row].item() == pytest.approx(table_model.sequence_log_prob(key, generated), abs=1e-6)


def test_stops_as_soon_as_every_row_has_finished(table_model, sources):
    output = greedy_search(table_model, sources([0, 1]), max_len=50)
    assert output.best_ids.size(1) == 3
    assert len(table_model.step_rows) == 3  # one decode_step per generated column


def test_finished_rows_leave_the_batch(table_model, sources):
    # The rows end after 3, 2 and 1 tokens: each step decodes only the rows still going
    # (the fake checks that memory, source and prefix rows stay aligned), and the output
    # keeps every row in its place.
    output = greedy_search(table_model, sources([0, 1, 4], lengths=[4, 2, 3]), max_len=6)
    assert table_model.step_rows == [3, 2, 1]
    assert output.best_ids.tolist() == [[A, C, EOS], [A, EOS, PAD], [EOS, PAD, PAD]]


def test_max_len_is_honoured_without_eos(table_model, sources):
    output = greedy_search(table_model, sources([3, 0]), max_len=4)
    assert output.best_ids.tolist() == [[A, A, A, A], [A, C, EOS, PAD]]
    assert output.lengths.tolist() == [4, 3]
    assert output.scores[0].item() == pytest.approx(4 * math.log(0.9), abs=1e-5)


def test_logits_processor_forbidding_early_eos_is_respected(table_model, sources):
    seen = []

    def forbid_eos_before_length_three(step, prefix_ids, log_probs):
        seen.append(step)
        assert prefix_ids.size(1) == step + 1
        # The hook gets normalised log-probs, not logits.
        assert torch.allclose(log_probs.logsumexp(dim=-1), torch.zeros(log_probs.size(0)), atol=1e-5)
        if step < 2:  # eos now would end the output at length step + 1 < 3
            log_probs = log_probs.clone()
            log_probs[:, EOS] = -math.inf
        return log_probs

    plain = greedy_search(table_model, sources([4]), max_len=6)
    assert plain.best_ids.tolist() == [[EOS]]
    forced = greedy_search(table_model, sources([4]), max_len=6, logits_processor=forbid_eos_before_length_three)
    assert forced.best_ids.tolist() == [[A, B, EOS]]
    assert forced.lengths.tolist() == [3]
    assert seen == [0, 1, 2]


@pytest.mark.parametrize("check_every", [1, 3])
@pytest.mark.parametrize("blocked", [-math.inf, math.nan])
def test_a_sentence_left_no_possible_token_has_no_hypothesis_as_in_beam_search(
    table_model, sources, check_every, blocked
):
    # Row 1's processor forbids every token from its second step (was: pad ids and a score of
    # -inf or NaN returned as its answer); row 0 decodes as without the processor.
    def block_row_one(step, prefix_ids, log_probs):
        if step >= 1 and log_probs.size(0) > 1:
            log_probs = log_probs.clone()
            log_probs[1] = blocked
        return log_probs

    output = greedy_search(
        table_model, sources([0, 3]), max_len=6, logits_processor=block_row_one, check_every=check_every
    )
    assert output.hypotheses[1] == []
    assert output.best_ids.tolist() == [[A, C, EOS], [PAD, PAD, PAD]]
    assert output.lengths.tolist() == [3, 0]
    assert output.scores[1].item() == -math.inf
    assert output.hypotheses[0][0].ids == [A, C, EOS]


def test_explicit_ids_override_the_models(table_model, sources):
    output = greedy_search(table_model, sources([0]), max_len=6, eos_id=A)
    assert output.best_ids.tolist() == [[A]]  # a now ends the output
    output = greedy_search(table_model, sources([0, 4]), max_len=6, pad_id=9)
    assert output.best_ids.tolist() == [[A, C, EOS], [EOS, 9, 9]]


def test_bad_arguments_raise_value_errors_naming_them(table_model, sources):
    with pytest.raises(ValueError, match="max_len"):
        greedy_search(table_model, sources([0]), max_len=0)
    with pytest.raises(ValueError, match="src_ids"):
        greedy_search(table_model, sources([0])[0], max_len=3)
    with pytest.raises(ValueError, match="src_ids"):
        greedy_search(table_model, sources([0]).float(), max_len=3)

    class NoIds:
        encode = table_model.encode

    with pytest.raises(ValueError, match="bos_id"):
        greedy_search(NoIds(), sources([0]), max_len=3)
    with pytest.raises(ValueError, match="logits_processor"):
        greedy_search(table_model, sources([0]), max_len=3, logits_processor=lambda s, p, log_probs: log_probs[:, :2])
