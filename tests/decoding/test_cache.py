"""Decoding with the cache equals decoding the whole prefix again at every step."""

import pytest
import torch

from transformer_lab.decoding import beam_search, greedy_search


@pytest.mark.parametrize("seed", [0, 1])
def test_greedy_with_and_without_cache_agree(make_random_model, sources, seed):
    model = make_random_model(vocab_size=8, seed=seed, eos_bias=-0.5)
    src_ids = sources([0, 1, 2, 3], [4, 2, 3, 4])
    cached = greedy_search(model, src_ids, max_len=8, use_cache=True)
    assert len(model.caches) == 1  # the cached run made (and checked) one cache
    uncached = greedy_search(model, src_ids, max_len=8, use_cache=False)
    assert len(model.caches) == 1  # the uncached run asked for none
    assert torch.equal(cached.best_ids, uncached.best_ids)
    assert torch.equal(cached.scores, uncached.scores)
    assert torch.equal(cached.lengths, uncached.lengths)


@pytest.mark.parametrize("seed", [0, 1])
def test_beam_with_and_without_cache_agree(make_random_model, sources, seed):
    model = make_random_model(vocab_size=8, seed=seed, eos_bias=-0.5)
    src_ids = sources([0, 1, 2], [4, 2, 3])
    cached = beam_search(model, src_ids, beam_size=4, max_len=8, num_return=3, use_cache=True)
    assert model.caches[-1].reorder_sizes, "beam search must reorder the cache"
    uncached = beam_search(model, src_ids, beam_size=4, max_len=8, num_return=3, use_cache=False)
    assert len(model.caches) == 1
    assert torch.equal(cached.best_ids, uncached.best_ids)
    for with_cache, without_cache in zip(cached.hypotheses, uncached.hypotheses):
        assert with_cache == without_cache  # ids, scores and log-probs, exactly
