"""DecodeConfig validation, its length limit, and `decode` dispatching to the searches."""

import pytest
import torch

from transformer_lab.decoding import DecodeConfig, DecodeOutput, IncrementalDecoder, decode, decoding_model

PAD, EOS, A = 0, 2, 3


def test_defaults_and_validation():
    config = DecodeConfig()
    assert (config.strategy, config.beam_size, config.max_len) == ("beam", 5, 128)
    assert (config.length_penalty, config.num_return, config.use_cache) == (0.6, 1, True)
    for field, value in [
        ("strategy", "sampling"),
        ("beam_size", 0),
        ("max_len", 0),
        ("num_return", 6),
        ("max_len_a", -1.0),
        ("max_len_a", 10**400),  # past a float's range: was an OverflowError from math.isfinite
        ("length_penalty", 10**400),
        ("max_len_b", 2.5),
        ("length_penalty", float("inf")),
        ("use_cache", "no"),  # was accepted, and "no" decoded with the cache
    ]:
        with pytest.raises(ValueError, match=field):
            DecodeConfig(**{field: value})


def test_max_new_tokens_follows_a_times_src_len_plus_b_capped_by_max_len():
    assert DecodeConfig(max_len=50).max_new_tokens(20) == 50
    assert DecodeConfig(max_len=50, max_len_a=1.5, max_len_b=4).max_new_tokens(10) == 19
    assert DecodeConfig(max_len=50, max_len_b=7).max_new_tokens(10) == 7
    assert DecodeConfig(max_len=50, max_len_a=2.0, max_len_b=10).max_new_tokens(100) == 50
    with pytest.raises(ValueError, match="max_len_a"):
        DecodeConfig(max_len_a=0.0, max_len_b=0).max_new_tokens(5)


def test_the_fake_models_follow_the_protocol(table_model, sources):
    # isinstance against a runtime-checkable Protocol checks method names only: call them.
    assert isinstance(table_model, IncrementalDecoder)
    src_ids = sources([3, 0], [3, 2])  # [2, S]
    memory = table_model.encode(src_ids)
    assert memory.shape[0] == 2
    cache = table_model.new_cache()
    prefix_ids = torch.full((2, 1), table_model.bos_id, dtype=torch.long)  # [2, 1]
    logits = table_model.decode_step(prefix_ids, memory, src_ids, cache=cache)
    assert logits.shape == (2, 7) and logits.dtype.is_floating_point
    # The cache follows the protocol too: reorder keeps the rows asked for.
    cache.reorder(torch.tensor([1, 1, 0]))


def test_decode_dispatches_on_strategy_and_applies_the_length_limit(table_model, sources):
    src_ids = sources([3, 0], [3, 2])  # longest non-pad source: 3 tokens
    greedy = decode(table_model, src_ids, DecodeConfig(strategy="greedy", max_len_a=1.0, max_len_b=1))
    assert isinstance(greedy, DecodeOutput)
    # Row 0 may hold 1.0 * 3 + 1 = 4 tokens, row 1 3: each row stops at its own limit (an
    # eos is forced after row 0's fourth token; row 1 ends by itself before its limit).
    assert greedy.best_ids.tolist() == [[A, A, A, A, EOS], [A, 5, EOS, PAD, PAD]]
    alone = decode(table_model, src_ids[:1, :3], DecodeConfig(strategy="greedy", max_len_a=1.0, max_len_b=1))
    assert alone.best_ids.tolist() == [[A, A, A, A]]  # alone: cut at the same 4 tokens
    beam = decode(table_model, src_ids, DecodeConfig(strategy="beam", beam_size=2, num_return=2, max_len=4))
    assert isinstance(beam, DecodeOutput)
    assert [len(hypotheses) for hypotheses in beam.hypotheses] == [2, 2]
    assert beam.best_ids.tolist() == [[A, A, A, A], [4, EOS, PAD, PAD]]
    assert beam.best_ids.dtype == torch.long


def test_decode_checks_a_config_changed_after_it_was_built_and_refuses_another_type(table_model, sources):
    config = DecodeConfig(strategy="greedy")
    config.strategy = "Greedy"  # was: beam search with 5 beams, without a word
    with pytest.raises(ValueError, match=r"^strategy: expected one of \('greedy', 'beam'\), given 'Greedy'$"):
        decode(table_model, sources([0]), config)
    with pytest.raises(TypeError, match=r"^config: expected a DecodeConfig, got dict$"):
        decode(table_model, sources([0]), {"strategy": "greedy"})  # was: AttributeError 'max_len_a'


def test_decoding_model_refuses_a_precision_it_does_not_know():
    model = torch.nn.Linear(2, 2)
    for precision in ("BF16", "fp16", None):  # each gave the fp32 model back without a word
        with pytest.raises(ValueError, match=r"^precision: expected one of \('auto', 'fp32', 'bf16', 'int8'\)"):
            decoding_model(model, precision)
    assert decoding_model(model, "fp32") is model


def test_decode_passes_the_beam_stop_to_the_search(table_model, sources):
    # Sentence 5 of the table: the exact stop waits for a long hypothesis the penalty favours.
    src_ids = sources([5])
    exact = decode(table_model, src_ids, DecodeConfig(beam_size=2, max_len=8, length_penalty=1.0))
    finished = decode(
        table_model, src_ids, DecodeConfig(beam_size=2, max_len=8, length_penalty=1.0, beam_stop="finished")
    )
    assert exact.hypotheses[0][0].ids != finished.hypotheses[0][0].ids
