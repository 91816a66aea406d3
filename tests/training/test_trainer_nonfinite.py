"""Non-finite losses and gradients: the step is skipped, logged, and N in a row stop training.

The oracle for "skipped" is a run on the same batches with the poisoned ones left out:
a skipped batch takes no optimizer step and no schedule step, so the two runs end with
bitwise-equal weights and log the same learning rates.
"""

from __future__ import annotations

import logging

import pytest
import torch

from tests.training.test_trainer import D_MODEL, TinyModel, config, epoch_batches, loss_fn, read_rows
from transformer_lab.cli import main
from transformer_lab.tasks.synthetic import train as synthetic_train
from transformer_lab.training import Trainer, TrainingDivergedError


class NanGradient(torch.autograd.Function):
    """Identity forward; a NaN gradient backward (a finite loss whose gradient is not)."""

    @staticmethod
    def forward(context: object, value: torch.Tensor) -> torch.Tensor:
        return value.clone()

    @staticmethod
    def backward(context: object, gradient: torch.Tensor) -> torch.Tensor:
        return torch.full_like(gradient, float("nan"))


BATCHES = epoch_batches(0, count=8)


def poisoned_loss(poisoned: set[int], kind: str):
    """loss_fn that is NaN (kind "loss") or has a NaN gradient (kind "gradient") on chosen calls."""
    calls = []

    def loss(model, batch):
        calls.append(None)
        value = loss_fn(model, batch)
        if len(calls) - 1 in poisoned:
            return value * float("nan") if kind == "loss" else NanGradient.apply(value)
        return value

    loss.calls = calls
    return loss


def train(tmp_path, name, batches, loss, **changes):
    torch.manual_seed(0)
    model = TinyModel()
    trainer = Trainer(
        model,
        config(epochs=1, keep_last=0, eval_every_steps=0, **changes),
        tmp_path / name,
        loss,
        lambda epoch: batches,
        d_model=D_MODEL,
    )
    return model, trainer.fit()


@pytest.mark.parametrize("kind", ["loss", "gradient"])
def test_a_poisoned_step_is_skipped_exactly(tmp_path, caplog, kind):
    poisoned = {2, 5}
    with caplog.at_level(logging.WARNING, logger="transformer_lab.training.trainer"):
        model, summary = train(tmp_path, "poisoned", BATCHES, poisoned_loss(poisoned, kind))
    clean = [batch for index, batch in enumerate(BATCHES) if index not in poisoned]
    reference, reference_summary = train(tmp_path, "clean", clean, loss_fn)
    assert summary["steps"] == reference_summary["steps"] == 6
    for actual, expected in zip(model.parameters(), reference.parameters()):
        assert torch.equal(actual, expected)
    rates = [row["lr"] for row in read_rows(tmp_path / "poisoned") if row["event"] == "train"]
    assert rates == [row["lr"] for row in read_rows(tmp_path / "clean") if row["event"] == "train"]
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 2 and all("non-finite" in warning and "(1 in a row)" in warning for warning in warnings)
    assert ("gradient norm nan" if kind == "gradient" else "loss nan") in warnings[0]


@pytest.mark.parametrize("kind", ["loss", "gradient"])
def test_max_nonfinite_steps_in_a_row_stop_training(tmp_path, kind):
    loss = poisoned_loss(set(range(1, 8)), kind)  # the first batch is fine, then never again
    model = TinyModel()
    with pytest.raises(TrainingDivergedError, match="3 non-finite losses or gradient norms in a row"):
        Trainer(
            model, config(epochs=1, max_nonfinite_steps=3), tmp_path, loss, lambda epoch: BATCHES, d_model=D_MODEL
        ).fit()
    assert len(loss.calls) == 4  # one good step, then exactly three poisoned ones


def test_poison_that_is_not_consecutive_never_stops_training(tmp_path):
    _, summary = train(tmp_path, "alternating", BATCHES, poisoned_loss({1, 3, 5, 7}, "gradient"), max_nonfinite_steps=2)
    assert summary["steps"] == 4


def test_max_nonfinite_steps_must_be_positive():
    with pytest.raises(ValueError, match="max_nonfinite_steps: expected an int >= 1, got 0"):
        config(max_nonfinite_steps=0)


def test_cli_divergence_is_one_line_and_exit_1(tmp_path, monkeypatch, capsys):
    real_loss_fn = synthetic_train.seq2seq_loss_fn

    def nan_loss_fn(smoothing, pad_id, rdrop_alpha=0.0):
        return lambda model, batch: real_loss_fn(smoothing, pad_id, rdrop_alpha)(model, batch) * float("nan")

    monkeypatch.setattr(synthetic_train, "seq2seq_loss_fn", nan_loss_fn)
    tiny = [
        "data.num_train=64",
        "data.num_validation=4",
        "data.num_test=4",
        "model.d_model=16",
        "model.nhead=2",
        "train.max_nonfinite_steps=2",
        "train.progress_bar=false",
    ]
    code = main(["train", "copy", "--out", str(tmp_path / "run"), *[part for item in tiny for part in ("--set", item)]])
    assert code == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "training diverged: 2 non-finite losses" in error[0]
