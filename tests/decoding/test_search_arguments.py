"""The searches refuse special ids the model cannot hold and a use_cache that is no bool, naming the argument."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch

from tests.decoding.test_real_model import VOCAB, tiny_model
from transformer_lab.decoding import beam_search, greedy_search

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
