"""Where reads wait for the device, a training step reads nothing: the checks stay there until a logged row.

There is no wait on the CPU to observe, so these tests switch ``host_reads_wait`` on for
it, train with torch's fused Adam (which skips a step on the device, as on a GPU), and
count the reads themselves: a ``TorchFunctionMode`` sees every torch function and tensor
method called and counts those that bring a value to the host, charged to the step in
progress. The oracle for the result is the same run with the checks on the host: with
finite losses the two end bitwise equal and log the same rows.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from typing import Any

import pytest
import torch
from torch.overrides import TorchFunctionMode

from tests.training.test_trainer import D_MODEL, TinyModel, config, epoch_batches, loss_fn, read_rows
from tests.training.test_trainer_nonfinite import poisoned_loss
from transformer_lab.data.collate import collate_pairs
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.models.config import ModelConfig
from transformer_lab.nn import host_reads
from transformer_lab.training import Trainer, TrainingDivergedError
from transformer_lab.training.batch_losses import seq2seq_loss_fn

READS = {"__bool__", "__int__", "__float__", "__index__", "item", "tolist", "numpy", "nonzero"}


class ReadCounter(TorchFunctionMode):
    """Counts host reads, each charged to the optimizer steps done when it happens (``step``)."""

    def __init__(self) -> None:
        super().__init__()
        self.step = 0
        self.reads: Counter[int] = Counter()

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = getattr(func, "__name__", "")
        if name in READS:
            self.reads[self.step] += 1
        return func(*args, **(kwargs or {}))


def fused_adam(parameters: list[torch.nn.Parameter]) -> torch.optim.Adam:
    # The paper's Adam as build_optimizer makes it on a GPU: fused, which can skip a step on the device.
    return torch.optim.Adam(parameters, lr=1.0, betas=(0.9, 0.98), eps=1e-9, fused=True)


def train(
    tmp_path,
    name: str,
    on_device: bool,
    monkeypatch,
    loss=loss_fn,
    counter: ReadCounter | None = None,
    resume: bool = False,
    **changes,
):
    monkeypatch.setattr(host_reads, "host_reads_wait", lambda device: on_device)
    torch.manual_seed(0)
    model = TinyModel()
    settings = dict(epochs=2, keep_last=0, eval_every_steps=0, log_every_steps=4)
    settings.update(changes)
    trainer = Trainer(
        model,
        config(**settings),
        tmp_path / name,
        loss,
        lambda epoch: epoch_batches(epoch, count=8),
        d_model=D_MODEL,
        optimizer_factory=fused_adam,
        resume=resume,
    )
    assert (trainer._device_checks is not None) == on_device
    summary = counted_fit(trainer, counter) if counter is not None else trainer.fit()
    return model, trainer, summary


def counted_fit(trainer: Trainer, counter: ReadCounter) -> dict[str, Any]:
    """``trainer.fit()`` with every read counted, charged to the optimizer steps done."""

    def next_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        counter.step += 1

    trainer.optimizer.register_step_post_hook(next_step)
    with counter:
        return trainer.fit()


def transformer_trainer(
    tmp_path, lengths_of_batch, optimizer_factory=None, rdrop_alpha: float = 0.0, **changes: Any
) -> Trainer:
    """A Trainer of a small real Transformer and its loss (R-Drop's if ``rdrop_alpha``) on 8 copy batches, a row
    every 4 steps."""
    torch.manual_seed(0)
    model = Seq2SeqTransformer.from_config(
        ModelConfig(
            src_vocab_size=20, tgt_vocab_size=20, d_model=16, nhead=2, num_encoder_layers=2,
            num_decoder_layers=2, dim_feedforward=32, dropout=0.1,
        )
    )  # fmt: skip
    generator = torch.Generator().manual_seed(0)
    batches = [
        collate_pairs(
            [
                (torch.randint(4, 20, (length,), generator=generator).tolist(),) * 2
                for length in lengths_of_batch(generator)
            ],
            pad_id=0,
            bos_id=2,
            eos_id=3,
        )
        for _ in range(8)
    ]
    return Trainer(
        model,
        config(epochs=1, keep_last=0, eval_every_steps=0, log_every_steps=4, **changes),
        tmp_path,
        seq2seq_loss_fn(0.1, 0, rdrop_alpha),
        lambda epoch: batches,
        d_model=16,
        count_tokens=lambda batch: batch.num_target_tokens,
        optimizer_factory=optimizer_factory,
    )


def test_steps_between_logged_rows_read_nothing_and_end_where_host_checks_end(tmp_path, monkeypatch):
    counter = ReadCounter()
    model, _, summary = train(tmp_path, "device", True, monkeypatch, counter=counter)
    assert summary["steps"] == 16
    # Reads after step k's update, with step k + 1's batches and update: a row every 4 steps
    # (the epoch's checkpoint, after steps 8 and 16, reads more), and nothing between rows.
    assert {step for step in range(0, 17) if counter.reads[step]} == {4, 8, 12, 16}
    assert counter.reads[4] == counter.reads[12] == 1
    host_counter = ReadCounter()
    reference, _, reference_summary = train(tmp_path, "host", False, monkeypatch, counter=host_counter)
    assert all(host_counter.reads[step] >= 2 for step in range(0, 16))  # a loss and a norm, every step
    for actual, expected in zip(model.parameters(), reference.parameters()):
        assert torch.equal(actual, expected)
    device_rows, host_rows = read_rows(tmp_path / "device"), read_rows(tmp_path / "host")
    for device_row, host_row in zip(device_rows, host_rows, strict=True):
        assert device_row.keys() == host_row.keys()
        for key in host_row.keys() - {"tokens_per_second"}:
            assert device_row[key] == pytest.approx(host_row[key]), key
    assert summary["final_train_loss"] == pytest.approx(reference_summary["final_train_loss"])


def test_a_poisoned_step_is_skipped_on_the_device_and_reported_at_the_next_row(tmp_path, monkeypatch, caplog):
    poisoned = {5}  # the sixth batch: step 6
    with caplog.at_level(logging.WARNING, logger="transformer_lab.training.trainer"):
        model, trainer, summary = train(tmp_path, "device", True, monkeypatch, loss=poisoned_loss(poisoned, "loss"))
    assert summary["steps"] == 16  # the skipped step counts, as the host learns of it later
    state = trainer.optimizer.state[next(iter(model.parameters()))]
    assert int(state["step"]) == 15  # but Adam took 15 steps
    assert all(torch.isfinite(parameter).all() for parameter in model.parameters())
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert warnings == [
        "non-finite loss or gradient norm: 1 step(s) up to step 8 skipped on the device (1 in a row at most)"
    ]


@pytest.mark.parametrize("kind", ["loss", "gradient"])
def test_a_run_of_non_finite_steps_stops_training_when_read(tmp_path, monkeypatch, kind):
    poisoned = set(range(2, 7))  # steps 3 to 7 in a row
    with pytest.raises(
        TrainingDivergedError, match="training diverged: 5 non-finite losses or gradient norms in a row"
    ):
        train(tmp_path, "device", True, monkeypatch, loss=poisoned_loss(poisoned, kind), max_nonfinite_steps=5)
    rows = read_rows(tmp_path / "device")
    assert [row["step"] for row in rows] == [4]  # stopped at the read after step 8, before its row


def test_a_resumed_run_on_the_device_ends_bitwise_where_an_uninterrupted_one_ends(tmp_path, monkeypatch):
    reference, _, _ = train(tmp_path, "reference", True, monkeypatch, max_steps=14)
    train(tmp_path, "stopped", True, monkeypatch, max_steps=6)  # mid-window: a row every 4 steps
    resumed, _, _ = train(tmp_path, "stopped", True, monkeypatch, resume=True, max_steps=14)
    for actual, expected in zip(resumed.parameters(), reference.parameters()):
        assert torch.equal(actual, expected)
    stopped_rows = [row for row in read_rows(tmp_path / "stopped") if row["event"] == "train"]
    reference_rows = [row for row in read_rows(tmp_path / "reference") if row["event"] == "train"]
    assert [(row["step"], row["train_loss"]) for row in stopped_rows] == [
        (row["step"], row["train_loss"]) for row in reference_rows
    ]


def test_a_run_saved_by_an_unfused_optimizer_resumes_with_a_fused_one(tmp_path, monkeypatch):
    # A run begun on the CPU (Adam unfused: fused=None saved) and resumed on a GPU (fused): was refused
    # ("optimizer.param_groups[0].fused: expected a bool, got NoneType None"), and, loaded anyway, the
    # saved None made the unfused update meet the device checks' found_inf.
    def trainer(on_device: bool, factory: Any, resume: bool) -> Trainer:
        monkeypatch.setattr(host_reads, "host_reads_wait", lambda device: on_device)
        torch.manual_seed(0)
        return Trainer(
            TinyModel(),
            config(epochs=2, keep_last=0, eval_every_steps=0, log_every_steps=4, max_steps=12 if resume else 6),
            tmp_path / "run",
            loss_fn,
            lambda epoch: epoch_batches(epoch, count=8),
            d_model=D_MODEL,
            optimizer_factory=factory,
            resume=resume,
        )

    unfused = trainer(False, None, resume=False)
    unfused.fit()
    assert unfused.optimizer.param_groups[0]["fused"] is None
    resumed = trainer(True, fused_adam, resume=True)
    assert resumed.optimizer.param_groups[0]["fused"] is True and resumed._device_checks is not None
    resumed.fit()
    assert resumed.global_step == 12
    # The other way round: a fused run resumed unfused keeps its checks on the host.
    back = trainer(False, None, resume=True)
    assert back.optimizer.param_groups[0]["fused"] is None and back._device_checks is None


def test_a_transformer_and_its_generator_loss_read_nothing_between_rows(tmp_path, monkeypatch):
    # The real model and loss: embeddings, masks, attention, the chunked generator loss.
    monkeypatch.setattr(host_reads, "host_reads_wait", lambda device: True)
    # Six rows of lengths 2-8 a batch.
    lengths = lambda generator: [int(length) for length in torch.randint(2, 9, (6,), generator=generator)]  # noqa: E731
    trainer = transformer_trainer(tmp_path, lengths, optimizer_factory=fused_adam)
    counter = ReadCounter()
    counted_fit(trainer, counter)
    assert {step for step in range(0, 9) if counter.reads[step]} == {4, 8}
    assert counter.reads[4] == 1


@pytest.mark.cuda
@pytest.mark.parametrize("rdrop_alpha", [0.0, 5.0])
def test_on_a_gpu_the_steps_between_rows_never_synchronise(tmp_path, rdrop_alpha):
    # torch's own detector: in "error" mode every synchronising call raises (reads, pageable copies,
    # R-Drop's real tokens picked by a boolean mask on the device).
    trainer = transformer_trainer(tmp_path, lambda generator: (3, 5, 8), rdrop_alpha=rdrop_alpha, device="cuda")
    assert trainer._device_checks is not None  # build_optimizer's fused Adam on CUDA
    read_device_checks, save_checkpoints = trainer._read_device_checks, trainer._save_checkpoints

    def allowed(function: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            torch.cuda.set_sync_debug_mode("default")
            try:
                return function(*args, **kwargs)
            finally:
                torch.cuda.set_sync_debug_mode("error")

        return call

    trainer._read_device_checks = allowed(read_device_checks)  # type: ignore[method-assign]
    trainer._save_checkpoints = allowed(save_checkpoints)  # type: ignore[method-assign]
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        summary = trainer.fit()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert summary["steps"] == 8 and math.isfinite(summary["final_train_loss"])
