"""The searches refuse special ids the model cannot hold and a use_cache that is no bool, naming the argument."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
import torch

from tests.decoding.test_real_model import VOCAB, tiny_model
from transformer_lab.decoding import DecodeConfig, beam_search, gnmt_length_penalty, greedy_search

SEARCHES: dict[str, Callable[..., Any]] = {
    "greedy": lambda model, src_ids, **keywords: greedy_search(model, src_ids, 4, **keywords),
    "beam": lambda model, src_ids, **keywords: beam_search(model, src_ids, 2, 4, **keywords),
}


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("name", ["bos_id", "eos_id", "pad_id"])
@pytest.mark.parametrize("value", [-1, VOCAB, 10**6])
def test_a_special_id_outside_the_vocabulary_is_refused(search: str, name: str, value: int) -> None:
    # An eos of -1 was accepted and never emitted: every sentence ran to max_len without ending.
    src_ids = torch.tensor([[5, 6, 7]])
    message = rf"^{name}: expected a token id in \[0, {VOCAB}\) \(the model's tgt_vocab_size\), given {value}$"
    with pytest.raises(ValueError, match=message):
        SEARCHES[search](tiny_model(), src_ids, **{name: value})


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("value", ["no", None, 0])
def test_use_cache_must_be_a_bool(search: str, value: object) -> None:
    # "no" was read as true (the cache used), None as false.
    with pytest.raises(ValueError, match=rf"^use_cache: expected True or False, given {value!r}$"):
        SEARCHES[search](tiny_model(), torch.tensor([[5, 6, 7]]), use_cache=value)


@pytest.mark.parametrize("search", SEARCHES)
def test_numpy_ints_are_taken_as_the_ints_they_hold(search: str) -> None:
    # Was: "max_len: expected an int >= 1, given np.int64(5)", a refusal of the very value asked for.
    model, src_ids = tiny_model(), torch.tensor([[5, 6, 7]])
    plain = SEARCHES[search](model, src_ids, eos_id=3)
    numpy = SEARCHES[search](model, src_ids, eos_id=np.int64(3))
    assert numpy.best_ids.tolist() == plain.best_ids.tolist()
    greedy = greedy_search(model, src_ids, np.int64(4), bos_id=np.int64(model.bos_id))
    assert greedy.best_ids.tolist() == greedy_search(model, src_ids, 4).best_ids.tolist()
    config = DecodeConfig(beam_size=np.int64(3), max_len=np.int64(9))
    assert (config.beam_size, config.max_len) == (3, 9) and type(config.beam_size) is int


@pytest.mark.parametrize("search", SEARCHES)
def test_a_logits_processor_that_is_not_callable_is_named(search: str) -> None:
    with pytest.raises(TypeError, match=r"^logits_processor: expected a callable .*, given int$"):
        SEARCHES[search](tiny_model(), torch.tensor([[5, 6, 7]]), logits_processor=3)


def test_the_length_penalty_refuses_a_negative_length() -> None:
    # (5 - 11) / 6 to the power 0.5 was a complex number; -5 gave 0, which a score is divided by.
    with pytest.raises(ValueError, match=r"^length: expected an int >= 0, given -11$"):
        gnmt_length_penalty(-11, 0.5)
    assert gnmt_length_penalty(1, 1.0) == 1.0
