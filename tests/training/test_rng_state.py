"""RandomState and isolated_rng: a captured state replays the same draws; an isolated block leaves none behind."""

import io
import random

import torch

from transformer_lab.training.rng_state import RandomState, isolated_rng, seed_all

CPU = torch.device("cpu")


def draws() -> tuple[list[float], list[float]]:
    # Both generators, and a gauss() whose cached second value is part of Python's state.
    return torch.rand(5).tolist() + torch.randn(2).tolist(), [random.random(), random.gauss(0.0, 1.0)]


def test_restore_replays_the_same_draws_even_after_a_checkpoint_round_trip():
    random.gauss(0.0, 1.0)  # leaves gauss_next set: the state must carry it
    state = RandomState.capture(CPU)
    expected = draws()
    assert draws() != expected  # the generators did move on
    state.restore(CPU)
    assert draws() == expected

    buffer = io.BytesIO()
    torch.save(state.to_dict(), buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)  # the form trainer_state.pt loads with
    assert set(loaded) == {"torch", "python"}  # no "cuda" on a CPU run
    RandomState.from_dict(loaded).restore(CPU)
    assert draws() == expected


def test_the_saved_form_is_plain_data():
    saved = RandomState.capture(CPU).to_dict()
    assert saved["torch"].dtype == torch.uint8 and saved["torch"].dim() == 1
    version, words, gauss_next = saved["python"]
    assert isinstance(version, int) and isinstance(words, list) and len(words) == 625
    assert gauss_next is None or isinstance(gauss_next, float)


def test_isolated_rng_leaves_the_generators_where_they_were():
    seed_all(7)
    expected = draws()
    seed_all(7)
    with isolated_rng(CPU):
        inside = draws()
    assert inside == expected  # the block drew from the same generators...
    assert draws() == expected  # ...and what follows is as if it had not


def test_seed_all_seeds_both_generators():
    seed_all(3)
    first = draws()
    seed_all(3)
    assert draws() == first
    seed_all(4)
    assert draws() != first
