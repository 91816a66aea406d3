"""The searches on a real (tiny, random) Seq2SeqTransformer rather than the hand-built fakes.

The fakes of conftest.py pin down the search logic; these tests check that the real
model's key/value cache, its source padding masks and the searches fit together: the
cached path equals re-running the whole prefix, beam size 1 equals greedy, and a padded
batch decodes like each sentence alone. Scores are float32 sums computed along different
kernels (one position at a time vs the whole prefix, padded vs unpadded), so they are
compared with a tolerance; the tokens must be identical. The three equalities run on the
CPU and, marked ``cuda``, on a GPU (the ``device`` fixture of tests/conftest.py).
"""

from __future__ import annotations

import pytest
import torch

from transformer_lab.decoding import (
    DecodeOutput,
    Hypothesis,
    beam_search,
    greedy_search,
)
from transformer_lab.models import Seq2SeqTransformer

VOCAB = 13  # 0 pad, 1 unk, 2 bos, 3 eos, then 9 ordinary tokens
PAD_ID, BOS_ID, EOS_ID = 0, 2, 3
FIRST_TOKEN = 4
MAX_LEN = 10
TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}
# On a GPU the one-position step and the whole-prefix pass may go to different attention
# kernels (SDPA picks by shape), each summing in its own order, and scores add ten such steps.
DEVICE_TOLERANCE = {"cpu": TOLERANCE, "cuda": {"rtol": 1e-4, "atol": 1e-4}}
# Added to the generator's eos bias so that a random model ends some sentences early and
# runs others to max_len: both paths of the searches are then exercised.
EOS_BIAS = 1.5
SOURCE_LENGTHS = [6, 2, 5, 1]


def tiny_model(norm_first: bool = False, device: torch.device | str = "cpu") -> Seq2SeqTransformer:
    """A random 2+2-layer model, d_model 16, dropout 0, in eval mode on ``device``."""
    model = Seq2SeqTransformer(
        src_vocab_size=VOCAB,
        tgt_vocab_size=VOCAB,
        d_model=16,
        nhead=2,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=32,
        dropout=0.0,
        norm_first=norm_first,
        max_len=32,
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
    )
    with torch.no_grad():
        model.generator.bias[EOS_ID] += EOS_BIAS
    return model.eval().to(device)


def padded_sources(
    lengths: list[int] = SOURCE_LENGTHS, seed: int = 7, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """Random sources of the given lengths, right-padded with pad_id, on ``device``.

    Shape:
        returns LongTensor[B, max(lengths)].
    """
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths)
    src_ids = torch.full((len(lengths), width), PAD_ID, dtype=torch.long)
    for row, length in enumerate(lengths):
        src_ids[row, :length] = torch.randint(FIRST_TOKEN, VOCAB, (length,), generator=generator)
    return src_ids.to(device)


def greedy_rows(output: DecodeOutput) -> list[list[int]]:
    """Each row's generated tokens up to and including its eos (padding cut off)."""
    return [output.best_ids[row, :length].tolist() for row, length in enumerate(output.lengths.tolist())]


def assert_same_hypotheses(
    first: list[list[Hypothesis]], second: list[list[Hypothesis]], tolerance: dict[str, float] = TOLERANCE
) -> None:
    """Same n-best token lists per sentence; scores and raw log-probs equal within ``tolerance``."""
    assert len(first) == len(second)
    rel, abs_ = tolerance["rtol"], tolerance["atol"]
    for sentence_first, sentence_second in zip(first, second):
        assert [hypothesis.ids for hypothesis in sentence_first] == [hypothesis.ids for hypothesis in sentence_second]
        for hypothesis_first, hypothesis_second in zip(sentence_first, sentence_second):
            assert hypothesis_first.score == pytest.approx(hypothesis_second.score, rel=rel, abs=abs_)
            assert hypothesis_first.log_prob == pytest.approx(hypothesis_second.log_prob, rel=rel, abs=abs_)


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_random_model_ends_some_outputs_early_and_runs_others_to_max_len(norm_first: bool) -> None:
    # A guard for the tests below: they mean little if every output stops at the same step.
    model = tiny_model(norm_first)
    src_ids = padded_sources()
    lengths = greedy_search(model, src_ids, max_len=MAX_LEN).lengths.tolist()
    beam = beam_search(model, src_ids, beam_size=3, max_len=MAX_LEN, length_penalty=0.6, num_return=2)
    lengths += [len(hypothesis.ids) for hypotheses in beam.hypotheses for hypothesis in hypotheses]
    assert min(lengths) < MAX_LEN and max(lengths) == MAX_LEN, lengths


@pytest.mark.parametrize("norm_first", [False, True])
def test_greedy_with_the_cache_equals_greedy_without(norm_first: bool, device: torch.device) -> None:
    model = tiny_model(norm_first, device)
    src_ids = padded_sources(device=device)
    cached = greedy_search(model, src_ids, max_len=MAX_LEN, use_cache=True)
    uncached = greedy_search(model, src_ids, max_len=MAX_LEN, use_cache=False)
    assert cached.best_ids.device.type == device.type
    assert torch.equal(cached.best_ids, uncached.best_ids)
    assert torch.equal(cached.lengths, uncached.lengths)
    torch.testing.assert_close(cached.scores, uncached.scores, **DEVICE_TOLERANCE[device.type])


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("length_penalty", [0.0, 0.6])
def test_beam_with_the_cache_equals_beam_without(norm_first: bool, length_penalty: float, device: torch.device) -> None:
    model = tiny_model(norm_first, device)
    src_ids = padded_sources(device=device)
    cached = beam_search(
        model,
        src_ids,
        beam_size=3,
        max_len=MAX_LEN,
        length_penalty=length_penalty,
        num_return=2,
        use_cache=True,
    )
    uncached = beam_search(
        model,
        src_ids,
        beam_size=3,
        max_len=MAX_LEN,
        length_penalty=length_penalty,
        num_return=2,
        use_cache=False,
    )
    assert torch.equal(cached.best_ids, uncached.best_ids)
    assert_same_hypotheses(cached.hypotheses, uncached.hypotheses, DEVICE_TOLERANCE[device.type])


@pytest.mark.parametrize("use_cache", [True, False])
def test_beam_size_one_without_length_penalty_equals_greedy(use_cache: bool) -> None:
    model = tiny_model()
    src_ids = padded_sources()
    greedy = greedy_search(model, src_ids, max_len=MAX_LEN, use_cache=use_cache)
    beam = beam_search(model, src_ids, beam_size=1, max_len=MAX_LEN, length_penalty=0.0, use_cache=use_cache)
    assert [hypotheses[0].ids for hypotheses in beam.hypotheses] == greedy_rows(greedy)
    beam_log_probs = torch.tensor([hypotheses[0].log_prob for hypotheses in beam.hypotheses])
    torch.testing.assert_close(beam_log_probs, greedy.scores, **TOLERANCE)


@pytest.mark.parametrize("use_cache", [True, False])
def test_a_padded_batch_decodes_like_each_sentence_alone(use_cache: bool, device: torch.device) -> None:
    tolerance = DEVICE_TOLERANCE[device.type]
    model = tiny_model(device=device)
    src_ids = padded_sources(device=device)
    greedy = greedy_search(model, src_ids, max_len=MAX_LEN, use_cache=use_cache)
    beam = beam_search(
        model,
        src_ids,
        beam_size=3,
        max_len=MAX_LEN,
        length_penalty=0.6,
        num_return=2,
        use_cache=use_cache,
    )
    batch_rows = greedy_rows(greedy)
    for row, length in enumerate(SOURCE_LENGTHS):
        alone_src_ids = src_ids[row : row + 1, :length]  # [1, length]: no padding at all
        assert not bool((alone_src_ids == PAD_ID).any())
        greedy_alone = greedy_search(model, alone_src_ids, max_len=MAX_LEN, use_cache=use_cache)
        assert greedy_rows(greedy_alone) == [batch_rows[row]]
        torch.testing.assert_close(greedy_alone.scores, greedy.scores[row : row + 1], **tolerance)
        beam_alone = beam_search(
            model,
            alone_src_ids,
            beam_size=3,
            max_len=MAX_LEN,
            length_penalty=0.6,
            num_return=2,
            use_cache=use_cache,
        )
        assert_same_hypotheses(beam_alone.hypotheses, [beam.hypotheses[row]], tolerance)


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_bf16_precision_runs_the_model_in_bf16_and_keeps_scores_float32(strategy: str) -> None:
    from transformer_lab.decoding import DecodeConfig, decode

    model = tiny_model()
    src_ids = padded_sources()
    generator_dtypes: list[torch.dtype] = []
    handle = model.generator.register_forward_hook(lambda module, inputs, output: generator_dtypes.append(output.dtype))
    try:
        for precision in ("fp32", "bf16"):
            generator_dtypes.clear()
            config = DecodeConfig(strategy=strategy, beam_size=3, max_len=MAX_LEN, precision=precision)
            output = decode(model, src_ids, config)
            expected = torch.float32 if precision == "fp32" else torch.bfloat16
            assert generator_dtypes and set(generator_dtypes) == {expected}
            if strategy == "greedy":
                assert output.scores.dtype == torch.float32
            else:
                assert all(isinstance(hypotheses[0].score, float) for hypotheses in output.hypotheses)
    finally:
        handle.remove()
    # Autocast is left as it was found.
    assert not torch.is_autocast_enabled("cpu")
    choices = r"\('auto', 'fp32', 'bf16', 'int8'\)"
    with pytest.raises(ValueError, match=rf"precision: expected one of {choices}, given 'fp16'"):
        DecodeConfig(precision="fp16")
