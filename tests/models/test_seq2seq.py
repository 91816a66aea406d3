"""Seq2SeqTransformer: shapes, masks derived from ids, cached decode steps, tying, errors."""

from __future__ import annotations

import pytest
import torch

from transformer_lab.models import ModelConfig, Seq2SeqTransformer

VOCAB = 12


def tiny_model(**overrides) -> Seq2SeqTransformer:  # type: ignore[no-untyped-def]
    config = ModelConfig(
        src_vocab_size=VOCAB,
        tgt_vocab_size=VOCAB,
        d_model=16,
        nhead=2,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=32,
        dropout=0.0,
        max_len=32,
    )
    for key, value in overrides.items():
        setattr(config, key, value)
    return Seq2SeqTransformer.from_config(config).eval()


def test_forward_shape_and_padding_of_the_source_changes_nothing() -> None:
    model = tiny_model()
    src = torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0]])
    tgt = torch.tensor([[2, 5, 6], [2, 8, 9]])
    logits = model(src, tgt)
    assert logits.shape == (2, 3, VOCAB)
    more_padding = torch.cat([src, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    assert torch.allclose(model(more_padding, tgt), logits, atol=1e-5)


def test_future_target_tokens_do_not_change_earlier_logits() -> None:
    model = tiny_model()
    src = torch.tensor([[5, 6, 7]])
    first = model(src, torch.tensor([[2, 5, 6, 7]]))
    second = model(src, torch.tensor([[2, 5, 9, 11]]))
    assert torch.allclose(first[:, :2], second[:, :2], atol=1e-6)
    assert not torch.allclose(first[:, 2:], second[:, 2:])


@pytest.mark.parametrize("norm_first,aligned", [(False, False), (True, False), (False, True)])
def test_cached_decode_steps_equal_uncached(norm_first: bool, aligned: bool) -> None:
    # tgt is longer than src: the aligned input must also cover positions past the source.
    model = tiny_model(norm_first=norm_first, aligned_decoder_input=aligned)
    src = torch.tensor([[5, 6, 7, 0], [8, 9, 10, 11]])
    tgt = torch.tensor([[2, 5, 6, 7, 3], [2, 11, 10, 9, 8]])
    memory = model.encode(src)
    cache = model.new_cache()
    for length in range(1, tgt.shape[1] + 1):
        cached = model.decode_step(tgt[:, :length], memory, src, cache=cache)
        uncached = model.decode_step(tgt[:, :length], memory, src)
        assert torch.allclose(cached, uncached, atol=1e-5)
    assert cache.length == tgt.shape[1]


def test_aligned_decoder_input_adds_the_memory_at_the_same_position() -> None:
    plain = tiny_model()
    aligned = tiny_model(aligned_decoder_input=True)
    aligned.load_state_dict(plain.state_dict())
    src = torch.tensor([[5, 6, 7, 0], [8, 9, 10, 11]])
    tgt = torch.tensor([[2, 5, 6, 7, 3], [2, 11, 10, 9, 8]])
    memory = plain.encode(src)  # [2, 4, 16]
    # The explicit path: the plain model's decoder on embeddings that hold the memory.
    real = (src != 0).unsqueeze(-1).float()  # [2, 4, 1]
    expected_input = plain.positional_encoding(plain.tgt_embedding(tgt))  # [2, 5, 16]
    expected_input[:, :4] += memory * real
    hidden = plain.transformer.decoder(
        expected_input,
        memory,
        tgt_mask=torch.triu(torch.ones(5, 5, dtype=torch.bool), 1),
        memory_key_padding_mask=src == 0,
    )
    assert torch.allclose(aligned(src, tgt), plain.generator(hidden), atol=1e-5)
    assert not torch.allclose(aligned(src, tgt), plain(src, tgt), atol=1e-3)
    # Source padding adds nothing: more padding columns change no logit.
    more_padding = torch.cat([src, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    assert torch.allclose(aligned(more_padding, tgt), aligned(src, tgt), atol=1e-5)


@pytest.mark.parametrize("tie", ["none", "decoder", "all"])
def test_tie_embeddings_shares_the_matrices(tie: str) -> None:
    model = tiny_model(tie_embeddings=tie)
    generator, target, source = model.generator.weight, model.tgt_embedding.weight, model.src_embedding.weight
    assert (generator is target) == (tie in ("decoder", "all"))
    assert (source is target) == (tie == "all")
    distinct = {id(parameter) for parameter in model.parameters()}
    assert len(distinct) == len(list(model.parameters()))


def test_bad_inputs_are_named() -> None:
    model = tiny_model()
    with pytest.raises(ValueError, match=r"src_ids must hold token ids in \[0, 12\), got 12"):
        model(torch.tensor([[1, 12]]), torch.tensor([[2]]))
    with pytest.raises(ValueError, match=r"tgt_in_ids must be an int64 or int32 tensor of shape \[batch, seq_len\]"):
        model(torch.tensor([[1, 2]]), torch.tensor([2.0]))
    # Ids the embedding cannot read, and ids that are no tensor: were torch's errors, naming no argument.
    for dtype in (torch.int16, torch.uint8):
        with pytest.raises(ValueError, match=rf"src_ids must be an int64 or int32 tensor .* got dtype {dtype}"):
            model(torch.tensor([[1, 2]], dtype=dtype), torch.tensor([[2]]))
    with pytest.raises(TypeError, match=r"^src_ids: expected a torch.Tensor of token ids, got list$"):
        model([[1, 2]], torch.tensor([[2]]))  # type: ignore[arg-type]
    assert model(torch.tensor([[1, 2]], dtype=torch.int32), torch.tensor([[2]], dtype=torch.int32)).shape[:2] == (1, 1)
    with pytest.raises(ValueError, match=r"same batch size, got 1 and 2"):
        model(torch.tensor([[1, 2]]), torch.tensor([[2], [2]]))
    with pytest.raises(ValueError, match=r"sequence length must be <= max_len=32"):
        model(torch.ones(1, 40, dtype=torch.long), torch.tensor([[2]]))
    with pytest.raises(
        ValueError,
        match=r"^tie_embeddings='all': expected one shared vocabulary \(src_vocab_size equal to tgt_vocab_size\), "
        r"got src_vocab_size=10 and tgt_vocab_size=12$",
    ):
        Seq2SeqTransformer(10, 12, d_model=16, nhead=2, tie_embeddings="all")
    with pytest.raises(ValueError, match=r"^eos_id: expected an id in \[0, tgt_vocab_size=12\), got 12$"):
        Seq2SeqTransformer(12, 12, d_model=16, nhead=2, eos_id=12)


def test_cached_generator_uses_a_per_run_copy_that_follows_the_weights() -> None:
    model = tiny_model().eval()
    src_ids = torch.tensor([[5, 6, 7, 3]])
    prefix = torch.tensor([[2, 8]])
    with torch.no_grad():
        memory = model.encode(src_ids)
        cache = model.new_cache()
        model.decode_step(prefix[:, :1], memory, src_ids, cache)
        logits = model.decode_step(prefix, memory, src_ids, cache)  # [1, V]
        assert "generator_weight_t" in cache.derived
        expected = model.decode_step(prefix, memory, src_ids)  # the module's own call, no cache
        assert torch.allclose(logits, expected, atol=1e-5, rtol=0)
        # Weights changed in place between runs: a new run's cache derives a new copy.
        model.generator.weight.mul_(2.0)
        fresh = model.new_cache()
        model.decode_step(prefix[:, :1], memory, src_ids, fresh)
        doubled = model.decode_step(prefix, memory, src_ids, fresh)
        assert torch.allclose(doubled, model.decode_step(prefix, memory, src_ids), atol=1e-5, rtol=0)
        assert not torch.allclose(doubled, logits, atol=1e-3)
    # A hook on the generator sees every call: the module is called as it is.
    calls: list[int] = []
    model.generator.register_forward_hook(lambda module, inputs, output: calls.append(1))
    with torch.no_grad():
        model.decode_step(prefix, memory, src_ids, model.new_cache())
    assert calls == [1]


def test_cached_steps_rebuild_the_source_mask_when_the_source_changes() -> None:
    model = tiny_model().eval()
    src_ids = torch.tensor([[5, 6, 7, 3], [5, 6, 3, 0]])  # the second row is padded
    prefix = torch.tensor([[2, 8], [2, 9]])
    with torch.no_grad():
        memory = model.encode(src_ids)
        cache = model.new_cache()
        model.decode_step(prefix[:, :1], memory, src_ids, cache)
        assert cache.derived["memory_padding"][2] is not None  # the padded row is hidden
        cached = model.decode_step(prefix, memory, src_ids, cache)
        assert torch.allclose(cached, model.decode_step(prefix, memory, src_ids), atol=1e-5, rtol=0)
        # The same tensor edited in place (its version moves): the mask follows it.
        src_ids[1, 3] = 4
        assert model._memory_padding_mask(src_ids, cache) is None  # the same run's cache notices the edit
        fresh_memory = model.encode(src_ids)
        other = model.new_cache()
        model.decode_step(prefix[:, :1], fresh_memory, src_ids, other)
        assert other.derived["memory_padding"][2] is None  # no padding left: no mask at all
        assert torch.allclose(
            model.decode_step(prefix, fresh_memory, src_ids, other),
            model.decode_step(prefix, fresh_memory, src_ids),
            atol=1e-5,
            rtol=0,
        )
