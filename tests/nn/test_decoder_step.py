"""The single-position decoder step computes what the decoder's modules compute, and steps aside where it cannot."""

from __future__ import annotations

import copy
import types

import pytest
import torch

from tests.nn.helpers import max_difference, random_key_padding_mask
from transformer_lab import nn as ours
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.models.bfloat16 import bf16_for_inference
from transformer_lab.models.quantization import int8_for_inference
from transformer_lab.nn import decoder_step
from transformer_lab.nn.decoder_step import DecoderStep
from transformer_lab.nn.tracing import recording_shapes

D_MODEL, NHEAD, BATCH, SRC_LEN, TGT_LEN = 16, 2, 3, 6, 7


def build_decoder(norm_first: bool, activation: str = "relu", final_norm: bool = True) -> ours.TransformerDecoder:
    layer = ours.TransformerDecoderLayer(
        D_MODEL, NHEAD, 32, dropout=0.1, activation=activation, batch_first=True, norm_first=norm_first
    )
    norm = torch.nn.LayerNorm(D_MODEL) if final_norm else None
    return ours.TransformerDecoder(layer, num_layers=2, norm=norm).eval()


@pytest.mark.parametrize(
    "norm_first, activation, final_norm, padded",
    [
        (False, "relu", True, True),
        (True, "gelu", False, True),
        (False, "gelu", True, False),
        (True, "relu", True, False),
    ],
)
def test_step_equals_the_modules_position_by_position(
    norm_first: bool, activation: str, final_norm: bool, padded: bool
) -> None:
    torch.manual_seed(0)
    decoder = build_decoder(norm_first, activation, final_norm)
    tgt, memory = torch.randn(BATCH, TGT_LEN, D_MODEL), torch.randn(BATCH, SRC_LEN, D_MODEL)
    memory_padding = random_key_padding_mask(BATCH, SRC_LEN, "bool") if padded else None
    step = DecoderStep(decoder)
    module_cache, step_cache = decoder.new_cache(), decoder.new_cache()
    with torch.no_grad():
        for cache in (module_cache, step_cache):  # the first position fills both caches through the modules
            decoder(tgt[:, :1], memory, memory_key_padding_mask=memory_padding, cache=cache)
        for position in range(1, TGT_LEN):
            new = tgt[:, position : position + 1]  # [B, 1, D]
            assert DecoderStep.applies(new, step_cache)
            expected = decoder(new, memory, memory_key_padding_mask=memory_padding, cache=module_cache)[:, 0]
            got = step(new[:, 0], step_cache, memory_padding)  # [B, D]
            assert max_difference(got, expected) <= 1e-5
            assert step_cache.length == module_cache.length == position + 1


def test_step_follows_beam_reorders_of_the_cache() -> None:
    torch.manual_seed(1)
    decoder = build_decoder(norm_first=False)
    tgt, memory = torch.randn(4, TGT_LEN, D_MODEL), torch.randn(4, SRC_LEN, D_MODEL)
    step = DecoderStep(decoder)
    module_cache, step_cache = decoder.new_cache(), decoder.new_cache()
    indexes = [torch.tensor([1, 1, 3, 2]), torch.tensor([0, 2, 2, 3]), torch.tensor([3, 3, 1, 0])]
    with torch.no_grad():
        for cache in (module_cache, step_cache):
            decoder(tgt[:, :1], memory, cache=cache)
        for position, index in zip(range(1, TGT_LEN), indexes * 2):
            # Reorders that keep the batch, as beam search does between the beams of one sentence.
            memory = memory[index]
            module_cache.reorder(index)
            step_cache.reorder(index)
            new = tgt[:, position : position + 1]
            expected = decoder(new, memory, cache=module_cache)[:, 0]
            assert max_difference(step(new[:, 0], step_cache, None), expected) <= 1e-5


def test_reorder_that_drops_rows_refolds_the_cross_attention() -> None:
    torch.manual_seed(2)
    decoder = build_decoder(norm_first=True)
    tgt, memory = torch.randn(3, 4, D_MODEL), torch.randn(3, SRC_LEN, D_MODEL)
    step = DecoderStep(decoder)
    module_cache, step_cache = decoder.new_cache(), decoder.new_cache()
    with torch.no_grad():
        for cache in (module_cache, step_cache):
            decoder(tgt[:, :1], memory, cache=cache)
        step(tgt[:, 1], step_cache, None)
        decoder(tgt[:, 1:2], memory, cache=module_cache)
        keep = torch.tensor([2, 0])  # a sentence leaves the batch
        module_cache.reorder(keep)
        step_cache.reorder(keep)
        expected = decoder(tgt[keep, 2:3], memory[keep], cache=module_cache)[:, 0]
        assert max_difference(step(tgt[keep, 2], step_cache, None), expected) <= 1e-5


def test_applies_only_to_plain_single_position_inference() -> None:
    decoder = build_decoder(norm_first=False)
    memory = torch.randn(BATCH, SRC_LEN, D_MODEL)
    cache = decoder.new_cache()
    one = torch.randn(BATCH, 1, D_MODEL)
    with torch.no_grad():
        assert not DecoderStep.applies(one, cache)  # empty cache: the modules fill it
        decoder(one, memory, cache=cache)
        assert DecoderStep.applies(one, cache)
        assert not DecoderStep.applies(torch.randn(BATCH, 2, D_MODEL), cache)  # several new positions
        with recording_shapes():
            assert not DecoderStep.applies(one, cache)  # the shape explainer traces the modules
    assert not DecoderStep.applies(one, cache)  # autograd


def test_unsupported_decoders_are_named() -> None:
    decoder = build_decoder(norm_first=False)
    assert DecoderStep.unsupported_reason(decoder) is None
    assert "training" in str(DecoderStep.unsupported_reason(build_decoder(norm_first=False).train()))
    hooked = build_decoder(norm_first=False)
    hooked.layers[1].linear1.register_forward_hook(lambda module, inputs, output: None)
    assert "hooks" in str(DecoderStep.unsupported_reason(hooked))
    explicit = build_decoder(norm_first=False)
    ours.set_attention_path(explicit, "explicit")
    assert "explicit" in str(DecoderStep.unsupported_reason(explicit))
    sequence_first = ours.TransformerDecoder(ours.TransformerDecoderLayer(D_MODEL, NHEAD, 32), 1).eval()
    assert "batch-first" in str(DecoderStep.unsupported_reason(sequence_first))
    with pytest.raises(ValueError, match="decoder not supported: .*hooks"):
        DecoderStep(hooked)


def build_model(**overrides: object) -> Seq2SeqTransformer:
    torch.manual_seed(3)
    settings: dict = dict(
        src_vocab_size=23,
        tgt_vocab_size=23,
        d_model=D_MODEL,
        nhead=NHEAD,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=32,
        dropout=0.0,
        max_len=32,
    )
    settings.update(overrides)
    return Seq2SeqTransformer(**settings).eval()  # type: ignore[arg-type]


def run_steps(model: Seq2SeqTransformer, src_ids: torch.Tensor, steps: int) -> tuple[torch.Tensor, ours.DecoderCache]:
    """Teacher-forced cached steps over a fixed prefix; the logits of every step ``[B, steps, V]``."""
    generator = torch.Generator().manual_seed(4)
    prefix = torch.randint(4, model.tgt_vocab_size, (src_ids.shape[0], steps), generator=generator)
    prefix[:, 0] = model.bos_id
    cache = model.new_cache()
    with torch.no_grad():
        memory = model.encode(src_ids)
        logits = [model.decode_step(prefix[:, : length + 1], memory, src_ids, cache) for length in range(steps)]
    return torch.stack(logits, dim=1), cache


@pytest.mark.parametrize("aligned", [False, True])
def test_model_steps_through_it_and_matches_decoding_without_the_cache(aligned: bool) -> None:
    model = build_model(aligned_decoder_input=aligned)
    src_ids = torch.randint(4, 23, (3, 7))
    src_ids[0, 5:] = model.pad_id
    logits, cache = run_steps(model, src_ids, 6)
    assert isinstance(cache.derived["decoder_step"], DecoderStep)
    generator = torch.Generator().manual_seed(4)
    prefix = torch.randint(4, model.tgt_vocab_size, (3, 6), generator=generator)
    prefix[:, 0] = model.bos_id
    with torch.no_grad():
        expected = model.decode(prefix, model.encode(src_ids), src_ids)  # [B, 6, V], no cache at all
    assert max_difference(logits, expected) <= 1e-5


def test_a_source_row_of_padding_only_stays_with_the_modules() -> None:
    model = build_model()
    src_ids = torch.randint(4, 23, (2, 5))
    src_ids[1] = model.pad_id  # nothing to attend to: the modules define that row's output
    logits, cache = run_steps(model, src_ids, 4)
    assert cache.derived["source_fully_hidden"] is True
    assert "decoder_step" not in cache.derived
    assert torch.isfinite(logits).all()


def test_int8_copy_steps_through_it_with_its_quantized_layers() -> None:
    model = build_model()
    quantized = int8_for_inference(model)
    src_ids = torch.randint(4, 23, (2, 6))
    logits, cache = run_steps(quantized, src_ids, 5)
    assert isinstance(cache.derived["decoder_step"], DecoderStep)
    module_logits, _ = run_steps_with_modules(quantized, src_ids, 5)
    assert max_difference(logits, module_logits) <= 1e-4


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reduced_precision_copy_steps_through_it_with_sdpa_and_matches_its_modules(
    dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = build_model()
    bf16_model = bf16_for_inference(model) if dtype == torch.bfloat16 else copy.deepcopy(model).to(dtype)
    src_ids = torch.randint(4, 23, (3, 6))
    src_ids[2, 4:] = model.pad_id  # the cross-attention's mask, in SDPA's polarity
    sdpa_calls = []

    def counting_sdpa(*arguments, **keywords):  # type: ignore[no-untyped-def]
        sdpa_calls.append(keywords.get("attn_mask") is not None)
        return torch.nn.functional.scaled_dot_product_attention(*arguments, **keywords)

    # The step's own calls only (the modules reach nn/sdpa.py through their own import).
    monkeypatch.setattr(decoder_step, "sdpa", types.SimpleNamespace(scaled_dot_product_attention=counting_sdpa))
    logits, cache = run_steps(bf16_model, src_ids, 5)
    monkeypatch.undo()
    assert isinstance(cache.derived["decoder_step"], DecoderStep)
    assert logits.dtype == dtype
    # 4 single-position steps x 2 layers x (self, cross); only the cross-attention has a mask.
    assert len(sdpa_calls) == 16 and sum(sdpa_calls) == 8
    module_logits, module_cache = run_steps_with_modules(bf16_model, src_ids, 5)
    assert "decoder_step" in module_cache.derived  # built, but switched off for this run
    # Both paths round to bf16 (8 bits of mantissa) at different points: close, not equal.
    scale = float(module_logits.float().abs().max())
    assert 0 < scale and max_difference(logits.float(), module_logits.float()) <= 0.03 * scale
    float_logits, _ = run_steps(model, src_ids, 5)
    assert max_difference(logits.float(), float_logits) <= 0.05 * float(float_logits.abs().max())


def run_steps_with_modules(model: Seq2SeqTransformer, src_ids: torch.Tensor, steps: int):  # type: ignore[no-untyped-def]
    """``run_steps`` with the single-position step switched off (the modules' own path)."""
    original = DecoderStep.applies
    try:
        DecoderStep.applies = staticmethod(lambda x, cache: False)  # type: ignore[method-assign]
        return run_steps(model, src_ids, steps)
    finally:
        DecoderStep.applies = original  # type: ignore[method-assign]
