"""Incremental decoding with the key/value cache equals the full causal decoder."""

from __future__ import annotations

import pytest
import torch

from tests.nn.helpers import max_difference, random_key_padding_mask
from transformer_lab import nn as ours

D_MODEL, NHEAD, BATCH, SRC_LEN, TGT_LEN = 16, 2, 3, 6, 7


def build_decoder(norm_first: bool, batch_first: bool = True) -> ours.TransformerDecoder:
    layer = ours.TransformerDecoderLayer(
        D_MODEL, NHEAD, 32, dropout=0.0, batch_first=batch_first, norm_first=norm_first
    )
    decoder = ours.TransformerDecoder(layer, num_layers=2, norm=torch.nn.LayerNorm(D_MODEL))
    return decoder.eval()


def full_decoder(decoder, tgt, memory, memory_padding):  # type: ignore[no-untyped-def]
    return decoder(tgt, memory, tgt_mask=ours.causal_mask(tgt.shape[1]), memory_key_padding_mask=memory_padding)


@pytest.mark.parametrize("norm_first", [False, True])
def test_step_by_step_with_cache_equals_full_decoder(norm_first: bool) -> None:
    decoder = build_decoder(norm_first)
    tgt, memory = torch.randn(BATCH, TGT_LEN, D_MODEL), torch.randn(BATCH, SRC_LEN, D_MODEL)
    memory_padding = random_key_padding_mask(BATCH, SRC_LEN, "bool")
    expected = full_decoder(decoder, tgt, memory, memory_padding)  # [B, T, D]
    cache = decoder.new_cache()
    steps = []
    for position in range(TGT_LEN):
        steps.append(
            decoder(tgt[:, position : position + 1], memory, memory_key_padding_mask=memory_padding, cache=cache)
        )
        assert cache.length == position + 1
    assert max_difference(torch.cat(steps, dim=1), expected) <= 1e-5


def test_prefill_several_positions_then_single_steps() -> None:
    decoder = build_decoder(norm_first=False)
    tgt, memory = torch.randn(BATCH, TGT_LEN, D_MODEL), torch.randn(BATCH, SRC_LEN, D_MODEL)
    expected = full_decoder(decoder, tgt, memory, None)
    cache = decoder.new_cache()
    first = decoder(tgt[:, :4], memory, cache=cache)  # four positions at once: shifted causal mask
    rest = [decoder(tgt[:, position : position + 1], memory, cache=cache) for position in range(4, TGT_LEN)]
    assert max_difference(torch.cat([first, *rest], dim=1), expected) <= 1e-5


def test_sequence_first_layout_with_cache() -> None:
    decoder = build_decoder(norm_first=False, batch_first=False)
    tgt, memory = torch.randn(TGT_LEN, BATCH, D_MODEL), torch.randn(SRC_LEN, BATCH, D_MODEL)
    expected = decoder(tgt, memory, tgt_mask=ours.causal_mask(TGT_LEN))
    cache = ours.DecoderCache(2)
    steps = [decoder(tgt[position : position + 1], memory, cache=cache) for position in range(TGT_LEN)]
    assert max_difference(torch.cat(steps, dim=0), expected) <= 1e-5


def test_cross_attention_keys_are_projected_once() -> None:
    decoder = build_decoder(norm_first=False)
    tgt, memory = torch.randn(BATCH, 3, D_MODEL), torch.randn(BATCH, SRC_LEN, D_MODEL)
    cache = decoder.new_cache()
    decoder(tgt[:, :1], memory, cache=cache)
    cross_keys = cache.layers[0].cross_attention.keys
    decoder(tgt[:, 1:2], memory, cache=cache)
    assert cache.layers[0].cross_attention.keys is cross_keys
    assert cache.layers[0].self_attention.keys.shape == (BATCH, NHEAD, 2, D_MODEL // NHEAD)


def test_reorder_along_the_batch_follows_the_chosen_rows() -> None:
    decoder = build_decoder(norm_first=True)
    tgt, memory = torch.randn(BATCH, TGT_LEN, D_MODEL), torch.randn(BATCH, SRC_LEN, D_MODEL)
    index = torch.tensor([2, 0, 0, 1])  # reorder and expand, as beam search does
    expected = full_decoder(decoder, tgt[index], memory[index], None)
    cache = decoder.new_cache()
    outputs = [decoder(tgt[:, position : position + 1], memory, cache=cache) for position in range(3)]
    cache.reorder(index)
    outputs = [output[index] for output in outputs]
    outputs += [
        decoder(tgt[index, position : position + 1], memory[index], cache=cache) for position in range(3, TGT_LEN)
    ]
    assert max_difference(torch.cat(outputs, dim=1), expected) <= 1e-5


def test_reorder_rejects_a_bad_index_and_cache_of_wrong_depth() -> None:
    cache = ours.DecoderCache(2)
    with pytest.raises(ValueError, match="index must be a 1-D long tensor"):
        cache.reorder(torch.tensor([[0]]))
    with pytest.raises(TypeError, match="index must be a 1-D long tensor, got list"):  # was an AttributeError
        cache.reorder([0, 1])  # type: ignore[arg-type]
    decoder = build_decoder(norm_first=False)
    with pytest.raises(ValueError, match="one entry per decoder layer"):
        decoder(torch.randn(1, 1, D_MODEL), torch.randn(1, 2, D_MODEL), cache=ours.DecoderCache(3))
    with pytest.raises(TypeError, match=r"^cache: expected a DecoderCache .*, got dict$"):  # was an AttributeError
        decoder(torch.randn(1, 1, D_MODEL), torch.randn(1, 2, D_MODEL), cache={})  # type: ignore[arg-type]
    filled = decoder.new_cache()
    decoder(torch.randn(BATCH, 1, D_MODEL), torch.randn(BATCH, SRC_LEN, D_MODEL), cache=filled)
    # Was torch's "index out of range in self", naming nothing.
    expected = rf"^DecoderCache.reorder: index must hold values in \[0, {BATCH}\), got values from 0 to 9$"
    with pytest.raises(IndexError, match=expected):
        filled.reorder(torch.tensor([0, 9]))


def test_a_cache_filled_from_one_memory_refuses_a_memory_of_another_length() -> None:
    # Was read on: the cached keys of the first memory answered the second (a cache serves one memory).
    decoder = build_decoder(norm_first=False)
    tgt = torch.randn(BATCH, TGT_LEN, D_MODEL)
    cache = decoder.new_cache()
    decoder(tgt[:, :2], torch.randn(BATCH, SRC_LEN, D_MODEL), cache=cache)
    with pytest.raises(ValueError, match=rf"holds the keys of a memory of {SRC_LEN} positions, got a memory of 2; "):
        decoder(tgt[:, 2:3], torch.randn(BATCH, 2, D_MODEL), cache=cache)


def test_reorder_without_static_state_between_rows_of_one_memory() -> None:
    # Beam search: rows 0-1 and 2-3 are beams of two sentences, each pair sharing a memory.
    decoder = build_decoder(norm_first=False)
    memory = torch.randn(2, SRC_LEN, D_MODEL).repeat_interleave(2, dim=0)  # [4, S, D]
    tgt = torch.randn(4, TGT_LEN, D_MODEL)
    index = torch.tensor([1, 1, 3, 2])  # each new beam's parent is a beam of its own sentence
    expected = full_decoder(decoder, tgt[index], memory[index], None)
    cache = decoder.new_cache()
    outputs = [decoder(tgt[:, position : position + 1], memory, cache=cache) for position in range(3)]
    cross_keys = cache.layers[0].cross_attention.keys
    cache.reorder(index, include_static=False)
    assert cache.layers[0].cross_attention.keys is cross_keys  # not copied
    outputs = [output[index] for output in outputs]
    outputs += [decoder(tgt[index, position : position + 1], memory, cache=cache) for position in range(3, TGT_LEN)]
    assert max_difference(torch.cat(outputs, dim=1), expected) <= 1e-5
    with pytest.raises(ValueError, match="include_static=False needs an index that keeps the batch size 4, got 2"):
        cache.reorder(torch.tensor([0, 2]), include_static=False)


def test_growing_cache_appends_in_place_and_doubles_its_room() -> None:
    from transformer_lab.nn.cache import AttentionCache

    generator = torch.Generator().manual_seed(0)
    cache = AttentionCache(static=False)
    appended_keys, appended_values = [], []
    buffers = set()
    for step in range(AttentionCache.INITIAL_CAPACITY * 2 + 3):
        new_keys = torch.randn(3, 2, 1, 4, generator=generator)  # [B, H, 1, Dh]
        new_values = torch.randn(3, 2, 1, 4, generator=generator)
        appended_keys.append(new_keys)
        appended_values.append(new_values)
        keys, values = cache.update(new_keys, new_values)
        # What attention sees is exactly what torch.cat of every append would give.
        assert torch.equal(keys, torch.cat(appended_keys, dim=2))
        assert torch.equal(values, torch.cat(appended_values, dim=2))
        assert cache.length == step + 1
        buffers.add(keys.untyped_storage().data_ptr())
    # 35 positions: 16, then 32, then 64 places; three buffers in all, not one per step.
    assert cache.capacity == 4 * AttentionCache.INITIAL_CAPACITY and len(buffers) == 3
    # Beam search's reorder selects rows of the filled part (and keeps the room).
    index = torch.tensor([2, 2, 0])
    cache.reorder(index)
    assert torch.equal(cache.keys, torch.cat(appended_keys, dim=2)[index])
    assert torch.equal(cache.values, torch.cat(appended_values, dim=2)[index])
    assert cache.capacity == 4 * AttentionCache.INITIAL_CAPACITY
    with pytest.raises(ValueError, match="batch"):
        cache.update(torch.zeros(2, 2, 1, 4), torch.zeros(2, 2, 1, 4))
