"""The Trainer: learning, accumulation, exact resume, checkpoint folders, bf16, divergence."""

import io
import json
import logging
import random
import shutil
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from transformer_lab.training import (
    TrainConfig,
    Trainer,
    cooldown_multiplier,
    label_smoothed_cross_entropy,
    load_checkpoint_config,
    load_trainer_state,
    noam_lr,
    read_extra_file,
)
from transformer_lab.training.model_card import read_card

VOCABULARY_SIZE = 10
D_MODEL = 16


class TinyModel(nn.Module):
    """Embedding -> dropout -> linear: enough to learn "next id" and to need the RNG."""

    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        self.embedding = nn.Embedding(VOCABULARY_SIZE, D_MODEL)
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(D_MODEL, VOCABULARY_SIZE)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self.output(self.dropout(self.embedding(token_ids)))


def make_batch(generator: torch.Generator, rows: int = 4) -> dict[str, torch.Tensor]:
    token_ids = torch.randint(1, VOCABULARY_SIZE, (rows, 5), generator=generator)
    return {"token_ids": token_ids, "target_ids": token_ids % (VOCABULARY_SIZE - 1) + 1}


def epoch_batches(epoch: int, count: int = 5, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed + epoch)
    return [make_batch(generator) for _ in range(count)]


def smoothed_loss(logits: torch.Tensor, target_ids: torch.Tensor) -> torch.Tensor:
    return label_smoothed_cross_entropy(logits, target_ids, smoothing=0.1, ignore_index=0)


def loss_fn(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    # The batches are made on the CPU; the model is wherever the Trainer put it (a GPU's, for the cuda tests).
    device = next(model.parameters()).device
    return smoothed_loss(model(batch["token_ids"].to(device)), batch["target_ids"].to(device))


def loss_with_python_random(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    # Python's RNG enters the trajectory too, so that its restore on resume is tested.
    return loss_fn(model, batch) * (1.0 + 0.1 * random.random())


def evaluate_with_randomness(model: nn.Module) -> dict[str, float]:
    # Consumes both RNGs: the Trainer must shield training from them.
    torch.rand(3)
    random.random()
    batch = epoch_batches(epoch=100, count=1)[0]
    return {"val_loss": loss_fn(model, batch).item()}


def config(**changes) -> TrainConfig:
    defaults = dict(
        epochs=3,
        warmup_steps=4,
        lr_factor=1.0,
        eval_every_steps=2,
        keep_last=2,
        log_every_steps=1,
        progress_bar=False,
    )
    defaults.update(changes)
    return TrainConfig(**defaults)


def read_rows(path) -> list[dict]:
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.convergence
def test_overfits_one_batch(tmp_path):
    batch = make_batch(torch.Generator().manual_seed(1))
    model = TinyModel()

    def batch_loss(model, batch):
        return label_smoothed_cross_entropy(model(batch["token_ids"]), batch["target_ids"], 0.0, ignore_index=0)

    initial_loss = batch_loss(model, batch).item()
    # One evaluation at the end only: a checkpoint per epoch would be slow and beside the point.
    trainer = Trainer(
        model,
        config(epochs=80, eval_every_steps=1000, keep_last=0, warmup_steps=10, log_every_steps=10, progress_bar=True),
        tmp_path,
        batch_loss,
        lambda epoch: [batch],
        d_model=D_MODEL,
        count_tokens=lambda batch: batch["token_ids"].numel(),
    )
    summary = trainer.fit()
    final_loss = batch_loss(model, batch).item()
    assert summary["steps"] == 80 and summary["stopped_by"] == "epochs"
    assert final_loss < 0.1 * initial_loss
    rows = read_rows(tmp_path)
    assert [row["step"] for row in rows if row["event"] == "train"] == list(range(10, 81, 10))
    assert all(row["tokens_per_second"] > 0 for row in rows if row["event"] == "train")


def test_an_accumulation_longer_than_an_epoch_is_said_once(tmp_path, caplog):
    # Was silent: with 1 batch an epoch, grad_accum_steps=1000 made each step take that one batch.
    batch = make_batch(torch.Generator().manual_seed(3), rows=4)
    trainer = Trainer(
        TinyModel(),
        config(epochs=3, grad_accum_steps=1000),
        tmp_path / "run",
        loss_fn,
        lambda epoch: [batch, batch],
        d_model=D_MODEL,
    )
    with caplog.at_level("WARNING", logger="transformer_lab.training.trainer"):
        assert trainer.fit()["steps"] == 3
    assert [message for message in caplog.messages if "grad_accum_steps" in message] == [
        "train.grad_accum_steps: 1000, more than an epoch's 2 batches: each optimizer step sums the epoch's 2"
    ]


def test_accumulating_half_batches_equals_full_batches(tmp_path):
    # loss_fn gives a mean over tokens; the halves hold equally many tokens, so the mean of
    # the two half-batch means is the full-batch mean. The third batch closes the epoch
    # alone: its group of 1 is rescaled to a full mean too.
    generator = torch.Generator().manual_seed(3)
    full, last = make_batch(generator, rows=8), make_batch(generator, rows=4)
    halves = [{key: value[:4] for key, value in full.items()}, {key: value[4:] for key, value in full.items()}]
    results = []
    for name, accumulation, batches in (("whole", 1, [full, last]), ("halves", 2, halves + [last])):
        torch.manual_seed(0)
        model = TinyModel()
        trainer = Trainer(
            model,
            config(epochs=1, grad_accum_steps=accumulation, clip_grad_norm=0.0),
            tmp_path / name,
            loss_fn,
            lambda epoch, batches=batches: batches,
            d_model=D_MODEL,
        )
        assert trainer.fit()["steps"] == 2
        norms = [row["grad_norm"] for row in read_rows(tmp_path / name) if row["event"] == "train"]
        results.append((model, norms))
    (whole_model, whole_norms), (half_model, half_norms) = results
    # Adam hides gradient scale in its update, so the logged gradient norms are compared too.
    assert half_norms == pytest.approx(whole_norms, rel=1e-5)
    for whole, half in zip(whole_model.parameters(), half_model.parameters()):
        torch.testing.assert_close(half, whole, rtol=1e-5, atol=1e-6)


def _train(out_dir, max_steps, resume=False, seed=0, train_batches=epoch_batches, device="cpu", **changes):
    # A different initialisation for a resumed model, to show the weights come from disk.
    torch.manual_seed(1000 if resume else 0)
    model = TinyModel(dropout=0.3)
    trainer = Trainer(
        model,
        config(max_steps=max_steps, grad_accum_steps=2, seed=seed, device=str(device), **changes),
        out_dir,
        loss_with_python_random,
        train_batches,
        d_model=D_MODEL,
        evaluate_fn=evaluate_with_randomness,
        resume=resume,
    )
    return model, trainer.fit()


def test_a_resumed_fit_says_the_step_it_started_from_and_the_runs_time_in_all(tmp_path):
    """(Was: the summary's time was this sitting's alone, read as the whole run's.)"""
    _, first = _train(tmp_path / "run", max_steps=3)
    assert first["first_step"] == 0 and first["training_seconds"] >= first["wall_seconds"]
    earlier = read_card(tmp_path / "run" / "last")["training"]["seconds"]  # to 0.1 s: 0.0 on a fast machine
    _, resumed = _train(tmp_path / "run", max_steps=5, resume=True)
    assert resumed["first_step"] == 3 and resumed["steps"] == 5
    # The earlier sitting's seconds, as last/'s card recorded them, come on top of this one's.
    expected = earlier + resumed["wall_seconds"]
    assert expected - 1e-6 <= resumed["training_seconds"] <= expected + 1


def _train_rows(out_dir) -> list[tuple]:
    return [
        (row["step"], row["epoch"], row["train_loss"], row["lr"], row["grad_norm"])
        for row in read_rows(out_dir)
        if row["event"] == "train"
    ]


def test_interrupted_and_resumed_equals_uninterrupted(tmp_path, device):
    # Bit for bit on a GPU too: dropout draws from the device's generator, which a resume restores.
    # 5 batches an epoch with 2 per step: 3 steps an epoch, the third on one batch.
    reference, summary = _train(tmp_path / "reference", max_steps=8, device=device)
    assert summary["steps"] == 8 and summary["stopped_by"] == "max_steps"
    assert reference.output.weight.device.type == device.type
    other_seed, _ = _train(tmp_path / "other_seed", max_steps=8, seed=1, device=device)
    assert not torch.equal(other_seed.output.weight, reference.output.weight)

    # Stopped by max_steps mid-epoch, then resumed with a larger max_steps.
    _train(tmp_path / "stopped", max_steps=5, device=device)
    assert load_trainer_state(tmp_path / "stopped" / "last")["global_step"] == 5
    resumed, summary = _train(tmp_path / "stopped", max_steps=8, resume=True, device=device)
    assert summary["steps"] == 8
    for expected, actual in zip(reference.parameters(), resumed.parameters()):
        assert torch.equal(expected, actual)
    assert _train_rows(tmp_path / "stopped") == _train_rows(tmp_path / "reference")

    # Killed by an exception from the data in epoch 2, after the step-6 checkpoint.
    def crashing_batches(epoch):
        for index, batch in enumerate(epoch_batches(epoch)):
            if epoch == 2 and index == 3:
                raise KeyboardInterrupt("simulated crash")
            yield batch

    with pytest.raises(KeyboardInterrupt):
        _train(tmp_path / "crashed", max_steps=8, train_batches=crashing_batches, device=device)
    state = load_trainer_state(tmp_path / "crashed" / "last")
    assert (state["global_step"], state["epoch"], state["batch_index"]) == (6, 1, 5)
    resumed, _ = _train(tmp_path / "crashed", max_steps=8, resume=True, device=device)
    for expected, actual in zip(reference.parameters(), resumed.parameters()):
        assert torch.equal(expected, actual)
    assert _train_rows(tmp_path / "crashed") == _train_rows(tmp_path / "reference")


def test_a_max_steps_on_an_epochs_last_batch_completes_that_epoch_and_a_resume_validates_it_once(tmp_path):
    # 6 batches an epoch, 2 per step: the epoch's third step takes its last batch. Validated once an epoch.
    def six(epoch: int) -> list[dict[str, torch.Tensor]]:
        return epoch_batches(epoch, count=6)

    _, summary = _train(tmp_path / "stopped", max_steps=3, train_batches=six, eval_every_steps=0)
    assert (summary["steps"], summary["epochs_completed"]) == (3, 1)  # was: 0 epochs completed
    assert load_trainer_state(tmp_path / "stopped" / "last")["epoch"] == 1
    _train(tmp_path / "stopped", max_steps=6, resume=True, train_batches=six, eval_every_steps=0)
    _train(tmp_path / "reference", max_steps=6, train_batches=six, eval_every_steps=0)

    def evaluated(run: Path) -> list[tuple[int, int]]:
        return [(row["step"], row["epoch"]) for row in read_rows(run) if row["event"] == "eval"]

    # Was: (3, 0), then (3, 1) again when the resume closed the epoch, validating step 3 twice.
    assert evaluated(tmp_path / "stopped") == [(3, 1), (6, 2)] == evaluated(tmp_path / "reference")


def test_a_resume_whose_log_lost_rows_says_its_curves_will_have_a_gap(tmp_path, caplog):
    # Was: resumed without a word, the new log starting at the resumed step.
    for lost in ("deleted", "cut"):
        run = tmp_path / lost
        _train(run, max_steps=6)
        log = run / "metrics.jsonl"
        if lost == "deleted":
            log.unlink()
        else:
            log.write_text("".join(log.read_text().splitlines(keepends=True)[:2]))  # the first two rows, of step 2
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="transformer_lab.training.trainer"):
            _train(run, max_steps=8, resume=True)
        (warning,) = [
            record.getMessage() for record in caplog.records if "curves will have a gap" in record.getMessage()
        ]
        said = "holds no row (missing or emptied)" if lost == "deleted" else "its rows end at step 2"
        assert warning.startswith(f"{log}: {said}, before the resumed step 6")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="transformer_lab.training.trainer"):
        _train(tmp_path / "whole", max_steps=6)
        _train(tmp_path / "whole", max_steps=8, resume=True)
    assert "curves will have a gap" not in caplog.text


def test_checkpoint_folders(tmp_path):
    scores = iter([1.0, 3.0, 2.0, 2.5])
    model = TinyModel()
    trainer = Trainer(
        model,
        config(max_steps=8, best_metric="score", best_mode="max"),
        tmp_path,
        loss_fn,
        epoch_batches,
        d_model=D_MODEL,
        evaluate_fn=lambda model: {"score": next(scores)},
        checkpoint_config={"model": {"d_model": D_MODEL}},
        extra_files={"vocabulary.txt": "a\nb\n"},
    )
    summary = trainer.fit()
    names = sorted(path.name for path in tmp_path.iterdir())
    assert names == ["best", "last", "metrics.jsonl", "step-000006", "step-000008"]
    assert load_trainer_state(tmp_path / "best")["global_step"] == 4
    assert load_trainer_state(tmp_path / "last")["global_step"] == 8
    assert load_trainer_state(tmp_path / "step-000006")["global_step"] == 6
    assert summary["best_value"] == 3.0 and summary["final_metrics"] == {"score": 2.5}
    assert load_checkpoint_config(tmp_path / "last") == {"model": {"d_model": D_MODEL}}
    assert read_extra_file(tmp_path / "best", "vocabulary.txt") == b"a\nb\n"
    evaluations = [(row["step"], row["score"]) for row in read_rows(tmp_path) if row["event"] == "eval"]
    assert evaluations == [(2, 1.0), (4, 3.0), (6, 2.0), (8, 2.5)]


def test_a_resume_with_a_smaller_keep_last_names_the_step_checkpoints_it_deletes(tmp_path, caplog):
    def train(keep_last: int, max_steps: int, resume: bool) -> None:
        trainer = Trainer(
            TinyModel(),
            config(max_steps=max_steps, keep_last=keep_last),
            tmp_path,
            loss_fn,
            epoch_batches,
            d_model=D_MODEL,
            evaluate_fn=lambda model: {"val_loss": 1.0},
            resume=resume,
        )
        trainer.fit()

    caplog.set_level(logging.INFO, logger="transformer_lab.training")
    train(keep_last=10, max_steps=8, resume=False)
    steps = ["step-000002", "step-000004", "step-000006", "step-000008"]
    assert sorted(path.name for path in tmp_path.glob("step-*")) == steps
    assert "deleted" not in caplog.text
    train(keep_last=1, max_steps=12, resume=True)
    assert sorted(path.name for path in tmp_path.glob("step-*")) == ["step-000012"]
    # One warning, when the earlier run's folders go; the rotation after it (step-10 for step-12) is silent.
    warnings = [
        record.getMessage() for record in caplog.records if "deleted the step checkpoints" in record.getMessage()
    ]
    assert warnings == [
        f"deleted the step checkpoints {', '.join(steps)} of {tmp_path}: train.keep_last=1 keeps the newest 1, "
        "and the folder held 5 (an earlier run there kept more)"
    ]
    caplog.clear()
    train(keep_last=0, max_steps=14, resume=True)
    assert not list(tmp_path.glob("step-*"))
    assert (
        "deleted the step checkpoints step-000012 of" in caplog.text and "train.keep_last=0 keeps none" in caplog.text
    )


def _scored_trainer(out_dir, evaluations, max_steps, resume=False):
    scores = iter(evaluations)
    return Trainer(
        TinyModel(),
        config(max_steps=max_steps, best_metric="val_bleu", best_mode="max"),
        out_dir,
        loss_fn,
        epoch_batches,
        d_model=D_MODEL,
        evaluate_fn=lambda model: next(scores),
        checkpoint_config={"model": {"d_model": D_MODEL}},
        resume=resume,
    )


def test_a_tie_of_the_best_metric_goes_to_the_lower_validation_loss(tmp_path):
    # A short run's BLEU stays 0 while the loss falls: best/ is the lowest loss among the zeros.
    evaluations = [
        {"val_loss": 5.0, "val_bleu": 0.0},
        {"val_loss": 4.0, "val_bleu": 0.0},
        {"val_loss": 4.5, "val_bleu": 0.0},  # a tie with a higher loss: best/ stays
        {"val_loss": 6.0, "val_bleu": 1.5},  # a better BLEU wins whatever its loss
        {"val_loss": 5.0, "val_bleu": 1.5},
    ]
    summary = _scored_trainer(tmp_path / "run", evaluations, max_steps=10).fit()
    assert (summary["best_metric"], summary["best_value"], summary["best_step"]) == ("val_bleu", 1.5, 10)
    assert load_trainer_state(tmp_path / "run" / "best")["global_step"] == 10

    first = _scored_trainer(tmp_path / "short", evaluations[:3], max_steps=6).fit()
    assert (first["best_value"], first["best_step"]) == (0.0, 4)
    assert load_trainer_state(tmp_path / "short" / "best")["global_step"] == 4
    # A resumed run keeps best/'s step and loss: a later tie must still beat 4.0.
    resumed = _scored_trainer(tmp_path / "short", [{"val_loss": 4.2, "val_bleu": 0.0}], max_steps=8, resume=True)
    assert resumed.fit()["best_step"] == 4
    assert load_trainer_state(tmp_path / "short" / "best")["global_step"] == 4


class _Terminal(io.StringIO):
    """stderr as a terminal: what tqdm's disable=None shows the bar on."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "log file"])
def test_the_progress_bar_draws_on_a_terminal_only(tmp_path, monkeypatch, terminal):
    stderr = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    Trainer(
        TinyModel(), config(max_steps=2, progress_bar=True), tmp_path, loss_fn, epoch_batches, d_model=D_MODEL
    ).fit()
    # A log file would otherwise fill with one "\r"-joined update a batch.
    assert ("\r" in stderr.getvalue() and "batch" in stderr.getvalue()) is terminal


def test_missing_best_metric_and_missing_resume_folder(tmp_path):
    trainer = Trainer(
        TinyModel(),
        config(max_steps=2),
        tmp_path / "run",
        loss_fn,
        epoch_batches,
        d_model=D_MODEL,
        evaluate_fn=lambda model: {"bleu": 1.0},
    )
    with pytest.raises(ValueError, match=r"best_metric: expected one of evaluate_fn's metrics \['bleu'\]"):
        trainer.fit()
    with pytest.raises(FileNotFoundError, match="last"):
        Trainer(TinyModel(), config(), tmp_path / "empty", loss_fn, epoch_batches, d_model=D_MODEL, resume=True)


def test_bf16_runs_under_autocast_with_finite_loss(tmp_path):
    seen_dtypes = []

    def recording_loss(model, batch):
        logits = model(batch["token_ids"])
        seen_dtypes.append(logits.dtype)
        return smoothed_loss(logits, batch["target_ids"])

    model = TinyModel(dropout=0.1)
    summary = Trainer(
        model,
        config(max_steps=3, precision="bf16", keep_last=0),
        tmp_path,
        recording_loss,
        epoch_batches,
        d_model=D_MODEL,
    ).fit()
    assert summary["steps"] == 3
    assert seen_dtypes and all(dtype == torch.bfloat16 for dtype in seen_dtypes)
    assert all(torch.isfinite(parameter).all() and parameter.dtype == torch.float32 for parameter in model.parameters())
    assert torch.isfinite(torch.tensor(summary["final_train_loss"]))


def test_non_finite_losses_are_skipped_then_stop_training(tmp_path, caplog):
    calls = []

    def sometimes_nan(model, batch):
        calls.append(None)
        loss = loss_fn(model, batch)
        return loss * float("nan") if len(calls) == 2 else loss

    model = TinyModel()
    with caplog.at_level(logging.WARNING, logger="transformer_lab.training.trainer"):
        summary = Trainer(
            model, config(max_steps=3, keep_last=0), tmp_path / "one", sometimes_nan, epoch_batches, d_model=D_MODEL
        ).fit()
    assert summary["steps"] == 3 and len(calls) == 4  # the NaN batch took no step
    assert "non-finite loss nan" in caplog.text

    model = TinyModel()
    weights_before = [parameter.detach().clone() for parameter in model.parameters()]
    always_nan = lambda model, batch: loss_fn(model, batch) * float("nan")  # noqa: E731
    with pytest.raises(RuntimeError, match="5 non-finite losses or gradient norms in a row"):
        Trainer(model, config(max_steps=3), tmp_path / "always", always_nan, epoch_batches, d_model=D_MODEL).fit()
    assert all(torch.equal(before, after) for before, after in zip(weights_before, model.parameters()))


def test_cooldown_ends_the_run_with_small_steps(tmp_path):
    # 3 epochs of 5 batches, accumulated in pairs: 3 steps an epoch (the last on one batch), 9 in all.
    trainer = Trainer(
        TinyModel(),
        config(grad_accum_steps=2, cooldown_steps=4, eval_every_steps=0),
        tmp_path,
        loss_fn,
        epoch_batches,
        d_model=D_MODEL,
    )
    rates = []
    trainer.optimizer.register_step_pre_hook(
        lambda optimizer, args, kwargs: rates.append(optimizer.param_groups[0]["lr"])
    )
    trainer.fit()
    expected = [noam_lr(step, D_MODEL, 4) * cooldown_multiplier(step, 9, 4) for step in range(1, 10)]
    assert rates == pytest.approx(expected)
    assert rates[-1] == pytest.approx(noam_lr(9, D_MODEL, 4) / 5)


def test_cooldown_longer_than_the_run_and_bad_device_are_errors(tmp_path):
    with pytest.raises(ValueError, match="cooldown_steps.*15"):
        Trainer(TinyModel(), config(cooldown_steps=16), tmp_path, loss_fn, epoch_batches, d_model=D_MODEL)
    with pytest.raises(ValueError, match="train.cooldown_steps: expected at most the run's 3 optimizer steps, got 4"):
        Trainer(
            TinyModel(),
            config(epochs=0, max_steps=3, cooldown_steps=4),
            tmp_path,
            loss_fn,
            epoch_batches,
            d_model=D_MODEL,
        )
    with pytest.raises(ValueError, match="device.*'gpu0'"):
        config(device="gpu0")


def test_the_model_is_moved_to_the_configured_device(tmp_path):
    model = TinyModel().to(torch.float32)
    trainer = Trainer(model, config(device="cpu", epochs=1), tmp_path, loss_fn, epoch_batches, d_model=D_MODEL)
    assert trainer.device == torch.device("cpu")
    assert all(parameter.device.type == "cpu" for parameter in model.parameters())


def test_cooldown_needs_a_known_run_length(tmp_path):
    def batch_stream(epoch):  # a generator: no len()
        yield from epoch_batches(epoch)

    with pytest.raises(ValueError, match="cooldown_steps: needs the run's length"):
        Trainer(TinyModel(), config(cooldown_steps=2), tmp_path, loss_fn, batch_stream, d_model=D_MODEL)
    # With max_steps the length is known without len().
    trainer = Trainer(
        TinyModel(), config(cooldown_steps=2, max_steps=4), tmp_path, loss_fn, batch_stream, d_model=D_MODEL
    )
    assert trainer.fit()["steps"] == 4


def test_a_schedule_scaled_to_a_short_run_resumes_bitwise_after_a_crash(tmp_path):
    # 9 steps against a warm-up and a cool-down of 800 each: scaled to the run, and worked out
    # again on resume from the same batches, so the resumed run takes the same rate at every step.
    def run(out_dir, train_batches=epoch_batches, resume=False):
        schedule = dict(warmup_steps=800, cooldown_steps=800, fit_schedule_to_run=True)
        return _train(out_dir, max_steps=0, resume=resume, train_batches=train_batches, **schedule)

    class CrashingBatches(list):
        # A length, as the schedule's scaling needs; the crash comes while the batches are read.
        def __init__(self, epoch):
            super().__init__(epoch_batches(epoch))
            self.epoch = epoch

        def __getitem__(self, index):
            if self.epoch == 2 and index == 3:
                raise KeyboardInterrupt("simulated crash")
            return super().__getitem__(index)

        def __iter__(self):
            return (self[index] for index in range(len(self)))

    reference, summary = run(tmp_path / "reference")
    assert summary["steps"] == 9
    rates = [row[3] for row in _train_rows(tmp_path / "reference")]
    assert rates.index(max(rates)) == 1 and rates[-1] < rates[-2]  # scaled: warm-up 2, cool-down 2
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "crashed", CrashingBatches)
    resumed, _ = run(tmp_path / "crashed", resume=True)
    for expected, actual in zip(reference.parameters(), resumed.parameters()):
        assert torch.equal(expected, actual)
    assert _train_rows(tmp_path / "crashed") == _train_rows(tmp_path / "reference")


def validated_run(folder, resume: bool, **changes: int) -> Trainer:
    """A Trainer of 8 batches an epoch, two epochs, validated (a constant score) as ``changes`` say."""
    torch.manual_seed(0)
    return Trainer(
        TinyModel(),
        config(**{"epochs": 2, "keep_last": 0, "log_every_steps": 4, **changes}),
        folder,
        loss_fn,
        lambda epoch: epoch_batches(epoch, count=8),
        evaluate_fn=lambda model: {"val_loss": 1.0},
        d_model=D_MODEL,
        resume=resume,
    )


def test_a_step_validated_at_an_epochs_end_is_not_validated_again_when_resumed(tmp_path):
    # The save at step 8 (validated every 4 steps) ends epoch 1 on its last batch; resumed with validation at
    # epochs' ends, the epoch closed again and step 8 was validated and saved twice (two eval rows for one step).
    validated_run(tmp_path / "run", False, eval_every_steps=4, max_steps=8).fit()
    validated_run(tmp_path / "run", True, eval_every_steps=0, max_steps=16).fit()
    evaluated = [row["step"] for row in read_rows(tmp_path / "run") if row["event"] == "eval"]
    assert evaluated == [4, 8, 16]


def test_step_checkpoints_past_the_step_resumed_from_are_named(tmp_path, caplog):
    # last/ put back to an earlier step by hand: step-000008 stayed, pruned in place of this run's own and
    # averaged as its own, without a word.
    validated_run(tmp_path / "run", False, keep_last=3, eval_every_steps=4, max_steps=8).fit()
    shutil.rmtree(tmp_path / "run" / "last")
    shutil.copytree(tmp_path / "run" / "step-000004", tmp_path / "run" / "last")
    with caplog.at_level(logging.WARNING):
        validated_run(tmp_path / "run", True, keep_last=3, eval_every_steps=4, max_steps=6)
    assert "step-000008 past the step resumed from (4), from the run this one replaces" in caplog.text
