"""Label-smoothed cross-entropy against torch's cross-entropy and a hand-computed case."""

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_lab.training import label_smoothed_cross_entropy

PAD_ID = 0


def _batch(vocabulary_size: int = 11) -> tuple[torch.Tensor, torch.Tensor]:
    logits = torch.randn(3, 6, vocabulary_size)
    target_ids = torch.randint(1, vocabulary_size, (3, 6))
    target_ids[0, 4:] = PAD_ID
    target_ids[2, 1:] = PAD_ID
    return logits, target_ids


def _torch_oracle(logits, target_ids, reduction, label_smoothing=0.0):
    vocabulary_size = logits.shape[-1]
    return F.cross_entropy(
        logits.reshape(-1, vocabulary_size),
        target_ids.reshape(-1),
        ignore_index=PAD_ID,
        reduction=reduction,
        label_smoothing=label_smoothing,
    )


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_no_smoothing_equals_cross_entropy_exactly(reduction):
    logits, target_ids = _batch()
    loss = label_smoothed_cross_entropy(logits, target_ids, 0.0, PAD_ID, reduction)
    assert torch.equal(loss, _torch_oracle(logits, target_ids, reduction))


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_smoothing_over_wrong_classes_matches_torch_rescaled(reduction):
    # torch spreads e over all V classes; ours spreads s over V - 1: equal for e = s V/(V-1).
    logits, target_ids = _batch(vocabulary_size=13)
    smoothing = 0.1
    ours = label_smoothed_cross_entropy(logits, target_ids, smoothing, PAD_ID, reduction)
    oracle = _torch_oracle(logits, target_ids, reduction, label_smoothing=smoothing * 13 / 12)
    torch.testing.assert_close(ours, oracle, rtol=1e-6, atol=1e-6)
    # And it is not torch's own convention with the same number.
    assert not torch.allclose(ours, _torch_oracle(logits, target_ids, reduction, smoothing))


def test_hand_computed_case():
    # V = 3, logits zero except the true class: p = softmax([2, 0, 0]).
    logits = torch.tensor([[2.0, 0.0, 0.0]])
    target_ids = torch.tensor([0])
    smoothing = 0.3
    normaliser = math.exp(2.0) + 2.0
    log_true, log_wrong = 2.0 - math.log(normaliser), -math.log(normaliser)
    # q = [0.7, 0.15, 0.15]: loss = -(0.7 log p0 + 0.15 log p1 + 0.15 log p2).
    expected = -(0.7 * log_true + 0.15 * log_wrong + 0.15 * log_wrong)
    loss = label_smoothed_cross_entropy(logits, target_ids, smoothing, ignore_index=-100)
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_padding_positions_do_not_matter():
    logits, target_ids = _batch()
    logits.requires_grad_(True)
    reference = label_smoothed_cross_entropy(logits, target_ids, 0.1, PAD_ID)
    reference.backward()
    changed = logits.detach().clone()
    pad_mask = target_ids == PAD_ID
    changed[pad_mask] = torch.randn(int(pad_mask.sum()), logits.shape[-1]) * 100
    changed[0, 5, 3] = float("inf")  # even a non-finite logit at a padded position
    assert torch.equal(label_smoothed_cross_entropy(changed, target_ids, 0.1, PAD_ID), reference.detach())
    assert torch.count_nonzero(logits.grad[pad_mask]) == 0
    # The mean is over real tokens only.
    total = label_smoothed_cross_entropy(logits, target_ids, 0.1, PAD_ID, reduction="sum")
    torch.testing.assert_close(reference, total / (~pad_mask).sum())


def test_all_padding_gives_zero_not_nan():
    logits = torch.randn(2, 3, 5, requires_grad=True)
    target_ids = torch.full((2, 3), PAD_ID)
    loss = label_smoothed_cross_entropy(logits, target_ids, 0.1, PAD_ID)
    loss.backward()
    assert loss.item() == 0.0
    assert torch.count_nonzero(logits.grad) == 0


def test_flat_inputs_and_bf16_logits_are_computed_in_float32():
    logits, target_ids = _batch()
    flat = label_smoothed_cross_entropy(logits.reshape(-1, 11), target_ids.reshape(-1), 0.1, PAD_ID)
    assert torch.equal(flat, label_smoothed_cross_entropy(logits, target_ids, 0.1, PAD_ID))
    low_precision = label_smoothed_cross_entropy(logits.bfloat16(), target_ids, 0.1, PAD_ID)
    assert low_precision.dtype == torch.float32
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        projected = torch.nn.Linear(11, 11)(logits)
        assert projected.dtype == torch.bfloat16
        assert label_smoothed_cross_entropy(projected, target_ids, 0.1, PAD_ID).dtype == torch.float32


@pytest.mark.parametrize(
    ("logits_shape", "target_shape", "match"),
    [
        ((2, 3, 5), (2, 4), "target_ids: expected shape"),
        ((5,), (5,), "logits: expected shape"),
        ((2, 3, 4, 5), (2, 3, 4), "logits: expected shape"),
    ],
)
def test_shape_errors(logits_shape, target_shape, match):
    with pytest.raises(ValueError, match=match):
        label_smoothed_cross_entropy(
            torch.randn(logits_shape), torch.zeros(target_shape, dtype=torch.long), 0.1, PAD_ID
        )


def test_argument_errors():
    with pytest.raises(ValueError, match="target_ids: expected ids in"):
        label_smoothed_cross_entropy(torch.randn(2, 5), torch.tensor([1, 5]), 0.1, PAD_ID)
    with pytest.raises(ValueError, match="target_ids: expected an integer"):
        label_smoothed_cross_entropy(torch.randn(2, 5), torch.tensor([1.0, 2.0]), 0.1, PAD_ID)
    with pytest.raises(ValueError, match="smoothing"):
        label_smoothed_cross_entropy(torch.randn(2, 5), torch.tensor([1, 2]), 1.0, PAD_ID)
    with pytest.raises(ValueError, match="reduction"):
        label_smoothed_cross_entropy(torch.randn(2, 5), torch.tensor([1, 2]), 0.1, PAD_ID, reduction="none")  # type: ignore[arg-type]


def test_gradient_matches_the_composed_oracle_and_gradcheck():
    """The hand-written backward against autograd through torch's cross-entropy, and gradcheck."""
    logits, target_ids = _batch(vocabulary_size=13)
    smoothing = 0.1
    ours_input = logits.clone().requires_grad_(True)
    oracle_input = logits.clone().requires_grad_(True)
    label_smoothed_cross_entropy(ours_input, target_ids, smoothing, PAD_ID).backward()
    _torch_oracle(oracle_input, target_ids, "mean", label_smoothing=smoothing * 13 / 12).backward()
    torch.testing.assert_close(ours_input.grad, oracle_input.grad, rtol=1e-5, atol=1e-7)

    double = logits.double().requires_grad_(True)
    for reduction in ("mean", "sum"):
        assert torch.autograd.gradcheck(
            lambda values: label_smoothed_cross_entropy(values, target_ids, 0.2, PAD_ID, reduction), (double,)
        )


def test_bf16_logits_get_a_bf16_gradient_close_to_float32():
    logits, target_ids = _batch(vocabulary_size=13)
    low = logits.bfloat16().requires_grad_(True)
    high = low.detach().float().requires_grad_(True)
    label_smoothed_cross_entropy(low, target_ids, 0.1, PAD_ID).backward()
    label_smoothed_cross_entropy(high, target_ids, 0.1, PAD_ID).backward()
    assert low.grad.dtype == torch.bfloat16
    torch.testing.assert_close(low.grad.float(), high.grad, rtol=1e-2, atol=1e-3)
