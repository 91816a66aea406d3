"""The chunked generator loss against the generator applied whole and torch's cross-entropy over its logits."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_lab.training import generator_cross_entropy, label_smoothed_cross_entropy

PAD_ID = 0


def _case(dtype: torch.dtype = torch.float64, bias: bool = True, vocabulary_size: int = 13):
    generator_seed = torch.Generator().manual_seed(0)
    hidden = torch.randn(3, 7, 5, dtype=dtype, generator=generator_seed, requires_grad=True)  # [B, T, D]
    target_ids = torch.randint(1, vocabulary_size, (3, 7), generator=generator_seed)
    target_ids[0, 5:] = PAD_ID
    target_ids[2, 2:] = PAD_ID
    generator = nn.Linear(5, vocabulary_size, bias=bias).to(dtype)
    return hidden, generator, target_ids


def _torch_oracle(logits, target_ids, smoothing, reduction):
    # Ours spreads the smoothing over the V - 1 wrong classes, torch's over all V: equal at e = s V / (V - 1).
    vocabulary_size = logits.shape[-1]
    return F.cross_entropy(
        logits.reshape(-1, vocabulary_size),
        target_ids.reshape(-1),
        ignore_index=PAD_ID,
        reduction=reduction,
        label_smoothing=smoothing * vocabulary_size / (vocabulary_size - 1),
    )


def _gradients(loss: torch.Tensor, hidden: torch.Tensor, generator: nn.Linear) -> list[torch.Tensor]:
    inputs = [hidden, *generator.parameters()]
    return list(torch.autograd.grad(loss, inputs))


@pytest.mark.parametrize("chunk_rows", [1, 4, 21, 64])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("bias", [True, False])
def test_equals_the_loss_over_whole_logits(chunk_rows, smoothing, reduction, bias):
    hidden, generator, target_ids = _case(bias=bias)
    oracle = _torch_oracle(generator(hidden), target_ids, smoothing, reduction)
    ours = generator_cross_entropy(hidden, generator, target_ids, smoothing, PAD_ID, reduction, chunk_rows=chunk_rows)
    torch.testing.assert_close(ours, oracle, rtol=1e-12, atol=1e-12)
    for got, expected in zip(_gradients(ours, hidden, generator), _gradients(oracle, hidden, generator)):
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_backward_scales_by_the_gradient_at_the_sum():
    hidden, generator, target_ids = _case()
    # The loss scaled as the trainer scales it (a DDP weight, 1 / accumulation), then checked numerically.
    assert torch.autograd.gradcheck(
        lambda hidden_in: 3.5 * generator_cross_entropy(hidden_in, generator, target_ids, 0.1, PAD_ID, chunk_rows=4),
        (hidden,),
    )
    oracle = 3.5 * _torch_oracle(generator(hidden), target_ids, 0.1, "sum")
    ours = 3.5 * generator_cross_entropy(hidden, generator, target_ids, 0.1, PAD_ID, "sum", chunk_rows=4)
    for got, expected in zip(_gradients(ours, hidden, generator), _gradients(oracle, hidden, generator)):
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_a_weight_shared_with_an_embedding_sums_both_gradients():
    hidden_ids = torch.tensor([[1, 4, 2, 0]])
    embedding = nn.Embedding(13, 5).double()
    generator = nn.Linear(5, 13, bias=False).double()
    generator.weight = embedding.weight  # tied, as the models tie them
    target_ids = torch.tensor([[4, 2, 7, PAD_ID]])
    oracle = _torch_oracle(generator(embedding(hidden_ids)), target_ids, 0.1, "mean")
    (expected,) = torch.autograd.grad(oracle, [embedding.weight])
    ours = generator_cross_entropy(embedding(hidden_ids), generator, target_ids, 0.1, PAD_ID, chunk_rows=3)
    (got,) = torch.autograd.grad(ours, [embedding.weight])
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_all_padding_is_zero_with_zero_gradients():
    hidden, generator, target_ids = _case()
    loss = generator_cross_entropy(hidden, generator, torch.full_like(target_ids, PAD_ID), 0.1, PAD_ID)
    assert loss.item() == 0.0
    assert all(torch.count_nonzero(grad) == 0 for grad in _gradients(loss, hidden, generator))


def test_without_gradients_and_with_a_hooked_generator_it_is_the_whole_loss():
    hidden, generator, target_ids = _case()
    oracle = label_smoothed_cross_entropy(generator(hidden), target_ids, 0.1, PAD_ID)
    with torch.no_grad():
        assert torch.equal(generator_cross_entropy(hidden, generator, target_ids, 0.1, PAD_ID), oracle.detach())
    calls = []
    generator.register_forward_hook(lambda module, args, output: calls.append(output.shape))
    hooked = generator_cross_entropy(hidden, generator, target_ids, 0.1, PAD_ID)
    assert calls == [torch.Size([3, 7, 13])]  # the hook saw the whole logits
    assert torch.equal(hooked, oracle)


def test_under_bfloat16_autocast_it_follows_the_generator_within_rounding():
    hidden, generator, target_ids = _case(dtype=torch.float32, vocabulary_size=50)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        oracle = label_smoothed_cross_entropy(generator(hidden), target_ids, 0.1, PAD_ID)
        ours = generator_cross_entropy(hidden, generator, target_ids, 0.1, PAD_ID, chunk_rows=5)
    torch.testing.assert_close(ours, oracle, rtol=1e-5, atol=1e-5)  # the same bf16 logits, summed per chunk
    for got, expected in zip(_gradients(ours, hidden, generator), _gradients(oracle, hidden, generator)):
        assert got.dtype == expected.dtype == torch.float32
        torch.testing.assert_close(got, expected, rtol=2e-2, atol=2e-3)


def test_bad_arguments_name_what_was_expected():
    hidden, generator, target_ids = _case()
    with pytest.raises(ValueError, match=r"target_ids: expected shape \(3, 7\)"):
        generator_cross_entropy(hidden, generator, target_ids[:, :6], 0.1, PAD_ID)
    with pytest.raises(ValueError, match=r"target_ids: expected ids in \[0, 13\)"):
        generator_cross_entropy(hidden, generator, target_ids + 13, 0.1, PAD_ID)
    with pytest.raises(ValueError, match="target_ids: expected an integer tensor, got dtype torch.float32"):
        generator_cross_entropy(hidden, generator, target_ids.float(), 0.1, PAD_ID)
    with pytest.raises(ValueError, match="chunk_rows: expected a positive number"):
        generator_cross_entropy(hidden, generator, target_ids, 0.1, PAD_ID, chunk_rows=0)
    with pytest.raises(ValueError, match=r"smoothing: expected a float in \[0, 1\)"):
        generator_cross_entropy(hidden, generator, target_ids, 1.0, PAD_ID)


def test_the_default_chunk_is_512_rows_on_the_cpu_and_sized_by_free_memory_on_cuda(monkeypatch):
    from transformer_lab.training import generator_loss

    assert generator_loss.default_chunk_rows(torch.device("cpu"), 8000) == 512
    free = {"bytes": 64 << 30}
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free["bytes"], 141 << 30))
    cuda = torch.device("cuda")
    # A sixteenth of 64 GiB is 4 GiB, over the 2 GiB cap: 2 GiB of float32 logits of 8,000 words.
    assert generator_loss.default_chunk_rows(cuda, 8000) == (2 << 30) // (4 * 8000)
    free["bytes"] = 160 << 20  # 10 MiB for the logits: fewer rows than the CPU's, so the CPU's floor
    assert generator_loss.default_chunk_rows(cuda, 8000) == 512
    free["bytes"] = 1 << 30  # 64 MiB: 2,097 rows of 8,000 words
    assert generator_loss.default_chunk_rows(cuda, 8000) == (1 << 30) // 16 // (4 * 8000)


def test_the_default_chunk_gives_the_loss_of_a_chosen_chunk():
    hidden, generator, target_ids = _case()
    default = generator_cross_entropy(hidden, generator, target_ids, 0.1, PAD_ID)
    chosen = generator_cross_entropy(hidden, generator, target_ids, 0.1, PAD_ID, chunk_rows=512)
    assert torch.equal(default, chosen)
    assert _gradients(default, hidden, generator)[0].equal(_gradients(chosen, hidden, generator)[0])
