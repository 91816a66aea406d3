"""R-Drop's loss: its value and gradient against autograd's composition, and the tasks' loss functions using it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tests.training.test_seq2seq_training import VOCAB, tiny_config
from transformer_lab.cli import main
from transformer_lab.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    ClassificationBatch,
    Seq2SeqBatch,
    collate_pairs,
    make_synthetic_pairs,
)
from transformer_lab.models import ClassifierConfig, Seq2SeqTransformer, TransformerClassifier
from transformer_lab.training import TrainConfig
from transformer_lab.training.batch_losses import classification_loss_fn, seq2seq_loss_fn
from transformer_lab.training.losses import label_smoothed_cross_entropy
from transformer_lab.training.rdrop import rdrop_loss


def composed_rdrop(
    first: torch.Tensor, second: torch.Tensor, targets: torch.Tensor, smoothing: float, alpha: float
) -> torch.Tensor:
    """The oracle: both copies' smoothed cross-entropy plus alpha x the symmetric KL from torch's kl_div, over 2N."""
    log_first, log_second = F.log_softmax(first, dim=-1), F.log_softmax(second, dim=-1)
    # kl_div(input, target) is KL(target || input).
    first_to_second = F.kl_div(log_second, log_first, log_target=True, reduction="sum")
    second_to_first = F.kl_div(log_first, log_second, log_target=True, reduction="sum")
    both = torch.cat([first, second])  # [2N, V]
    count = both.shape[0]
    smoothed = label_smoothed_cross_entropy(both, targets.repeat(2), smoothing, ignore_index=-1, reduction="sum")
    return (smoothed + alpha * (first_to_second + second_to_first) / 2) / count


@pytest.mark.parametrize(("smoothing", "alpha"), [(0.1, 5.0), (0.0, 2.0), (0.3, 0.0)])
def test_value_and_gradient_equal_autograds_composition(smoothing: float, alpha: float) -> None:
    generator = torch.Generator().manual_seed(0)
    first = torch.randn(6, 9, dtype=torch.float64, generator=generator, requires_grad=True)
    second = torch.randn(6, 9, dtype=torch.float64, generator=generator, requires_grad=True)
    targets = torch.randint(0, 9, (6,), generator=generator)
    fused = rdrop_loss(first, second, targets, smoothing, alpha)
    fused_grads = torch.autograd.grad(fused, (first, second))
    # The oracle's cross-entropy runs in float32 when smoothing is 0.
    composed = composed_rdrop(first, second, targets, smoothing, alpha)
    composed_grads = torch.autograd.grad(composed, (first, second))
    torch.testing.assert_close(fused, composed.to(fused.dtype), rtol=1e-6, atol=1e-7)
    for fused_grad, composed_grad in zip(fused_grads, composed_grads, strict=True):
        torch.testing.assert_close(fused_grad, composed_grad, rtol=1e-5, atol=1e-7)
    assert torch.autograd.gradcheck(lambda a, b: rdrop_loss(a, b, targets, smoothing, alpha), (first, second))


def test_identical_copies_give_the_plain_loss_and_its_gradient() -> None:
    logits = torch.randn(5, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(1), requires_grad=True)
    targets = torch.tensor([0, 3, 6, 2, 2])
    (fused_grad,) = torch.autograd.grad(rdrop_loss(logits, logits, targets, 0.1, 5.0), logits)
    plain = label_smoothed_cross_entropy(logits, targets, 0.1, ignore_index=-1)
    (plain_grad,) = torch.autograd.grad(plain, logits)
    torch.testing.assert_close(rdrop_loss(logits, logits, targets, 0.1, 5.0), plain)
    # The same tensor twice: each copy's share of the plain gradient, summed.
    torch.testing.assert_close(fused_grad, plain_grad)


def test_bf16_logits_get_bf16_gradients_close_to_float32() -> None:
    generator = torch.Generator().manual_seed(2)
    first, second = (torch.randn(8, 32, generator=generator) for _ in range(2))
    targets = torch.randint(0, 32, (8,), generator=generator)
    low = [tensor.bfloat16().requires_grad_() for tensor in (first, second)]
    high = [tensor.bfloat16().float().requires_grad_() for tensor in (first, second)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low_loss = rdrop_loss(*low, targets, 0.1, 5.0)
    high_loss = rdrop_loss(*high, targets, 0.1, 5.0)
    assert low_loss.dtype == torch.float32
    torch.testing.assert_close(low_loss, high_loss)
    low_loss.backward()
    high_loss.backward()
    for low_tensor, high_tensor in zip(low, high, strict=True):
        assert low_tensor.grad is not None and low_tensor.grad.dtype == torch.bfloat16
        torch.testing.assert_close(low_tensor.grad.float(), high_tensor.grad, rtol=2e-2, atol=1e-3)


def test_bad_arguments_are_named() -> None:
    logits = torch.zeros(3, 5)
    with pytest.raises(
        ValueError, match=r"first, second: expected two \[N, V\] logits of one shape, got \(3, 5\) and \(3, 4\)"
    ):
        rdrop_loss(logits, torch.zeros(3, 4), torch.zeros(3, dtype=torch.long), 0.1, 1.0)
    with pytest.raises(ValueError, match=r"target_ids: expected shape \(3,\), got \(4,\)"):
        rdrop_loss(logits, logits, torch.zeros(4, dtype=torch.long), 0.1, 1.0)
    with pytest.raises(ValueError, match=r"alpha: expected a float in \[0, 1e\+06\] \(0 = off\), got -1.0"):
        rdrop_loss(logits, logits, torch.zeros(3, dtype=torch.long), 0.1, -1.0)
    # 4e38 was taken, then the float32 loss overflowed to NaN at every batch, which read as divergence.
    for alpha in (-0.5, float("inf"), float("nan"), 4e38, 1e308):
        with pytest.raises(ValueError, match=r"rdrop_alpha: expected a float in \[0, 1e\+06\]"):
            TrainConfig(rdrop_alpha=alpha)
    assert torch.isfinite(
        rdrop_loss(logits, logits + 1e4 * torch.eye(3, 5), torch.zeros(3, dtype=torch.long), 0.1, 1e6)
    )


def test_no_targets_give_zero_that_backpropagates() -> None:
    first = torch.zeros(0, 5, requires_grad=True)
    loss = rdrop_loss(first, torch.zeros(0, 5), torch.zeros(0, dtype=torch.long), 0.1, 5.0)
    loss.backward()
    assert float(loss.detach()) == 0.0 and first.grad is not None


def seq2seq_model(dropout: float) -> Seq2SeqTransformer:
    torch.manual_seed(0)
    return Seq2SeqTransformer.from_config(dataclasses.replace(tiny_config(), dropout=dropout)).train()


def copy_batch() -> Seq2SeqBatch:
    pairs = make_synthetic_pairs("copy", 6, VOCAB, min_length=1, max_length=7, seed=3)
    return collate_pairs(pairs, PAD_ID, BOS_ID, EOS_ID)


def test_without_dropout_the_seq2seq_loss_is_the_plain_one() -> None:
    # Both copies are then one computation: the divergence is 0 and the loss is the mean over padded targets.
    model, batch = seq2seq_model(dropout=0.0), copy_batch()
    plain = seq2seq_loss_fn(0.1, PAD_ID)(model, batch)
    (plain_grad,) = torch.autograd.grad(plain, model.generator.weight)
    with_rdrop = seq2seq_loss_fn(0.1, PAD_ID, rdrop_alpha=5.0)(model, batch)
    (rdrop_grad,) = torch.autograd.grad(with_rdrop, model.generator.weight)
    torch.testing.assert_close(with_rdrop, plain, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(rdrop_grad, plain_grad, rtol=1e-4, atol=1e-6)


def test_with_dropout_the_divergence_term_is_positive_and_linear_in_alpha() -> None:
    model, batch = seq2seq_model(dropout=0.3), copy_batch()
    losses = {}
    for alpha in (5.0, 10.0):
        torch.manual_seed(7)  # the same dropout masks for each alpha
        losses[alpha] = float(seq2seq_loss_fn(0.1, PAD_ID, rdrop_alpha=alpha)(model, batch).detach())
    torch.manual_seed(7)
    # alpha 0 through the R-Drop path by hand: the task's loss function takes the plain path at 0.
    hidden = model(batch.src_ids.repeat(2, 1), batch.tgt_in_ids.repeat(2, 1), apply_generator=False)  # [2B, T, D]
    real = batch.tgt_out_ids != PAD_ID  # [B, T]
    first, second = hidden.chunk(2)
    targets = batch.tgt_out_ids[real]
    logits = model.generator(first[real]), model.generator(second[real])  # [N, V] each
    no_divergence = float(rdrop_loss(*logits, targets, 0.1, 0.0).detach())
    assert losses[5.0] > no_divergence + 1e-4
    assert losses[10.0] - no_divergence == pytest.approx(2 * (losses[5.0] - no_divergence), rel=1e-4)


def test_without_dropout_the_classification_loss_is_the_plain_one() -> None:
    torch.manual_seed(0)
    config = ClassifierConfig(
        vocab_size=VOCAB, num_classes=3, d_model=32, nhead=2, num_layers=1, dim_feedforward=64, dropout=0.0, max_len=16
    )
    model = TransformerClassifier.from_config(config).train()
    batch = ClassificationBatch(
        token_ids=torch.tensor([[5, 6, 7, 0], [8, 9, 10, 11], [4, 0, 0, 0]]), labels=torch.tensor([0, 2, 1])
    )
    plain = classification_loss_fn(0.1)(model, batch)
    (plain_grad,) = torch.autograd.grad(plain, model.head.weight)
    with_rdrop = classification_loss_fn(0.1, rdrop_alpha=5.0)(model, batch)
    (rdrop_grad,) = torch.autograd.grad(with_rdrop, model.head.weight)
    torch.testing.assert_close(with_rdrop, plain, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(rdrop_grad, plain_grad, rtol=1e-4, atol=1e-6)


def test_rdrop_without_dropout_is_refused_before_the_run_by_the_command_and_the_api(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The copy presets have no dropout: both passes were one, the divergence 0, each step twice the cost.
    from tests.reliability.tiny_runs import tiny_copy_options
    from transformer_lab.tasks.synthetic import train as synthetic_train

    out = tmp_path / "run"
    assert main(["train", "copy", "--out", str(out), *tiny_copy_options(2, train__rdrop_alpha=5)]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            "train.rdrop_alpha: expected it only with model.dropout > 0 (R-Drop compares two dropout draws of each "
            "batch; without dropout they are the same), got 5.0 with model.dropout 0.0"
        )
    )
    assert not (out / "last").exists()
    config = synthetic_train.default_config("copy")
    config = dataclasses.replace(config, train=dataclasses.replace(config.train, rdrop_alpha=5.0, max_steps=2))
    with pytest.raises(ValueError, match=r"train.rdrop_alpha: expected it only with model.dropout > 0"):
        synthetic_train.train(config, tmp_path / "api")
    assert (
        main(["train", "copy", "--out", str(out), *tiny_copy_options(2, train__rdrop_alpha=5, model__dropout=0.1)]) == 0
    )


def test_a_resume_of_a_run_saved_before_rdrop_existed_says_the_change() -> None:
    # A trainer state written before the field existed has no rdrop_alpha: the run ran at the default, 0.
    from transformer_lab.training.rng_state import RandomState
    from transformer_lab.training.trainer_state import TrainerState

    saved = {key: value for key, value in dataclasses.asdict(TrainConfig()).items() if key != "rdrop_alpha"}
    state = TrainerState(
        global_step=1,
        epoch=0,
        batch_index=1,
        best_metric="val_loss",
        best_value=None,
        last_metrics={},
        consecutive_nonfinite=0,
        window_loss_sum=0.0,
        window_loss_count=0,
        last_train_loss=None,
        optimizer={},
        scheduler={},
        rng=RandomState.capture(torch.device("cpu")),
        train_config=saved,
    )
    assert state.trajectory_changes(TrainConfig(rdrop_alpha=5.0)) == ["rdrop_alpha: 0.0 -> 5.0"]
    assert state.trajectory_changes(TrainConfig()) == []
