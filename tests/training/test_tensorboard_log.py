"""TensorBoard event files: the scalars of metrics.jsonl, read back, and kept once per step across a resume."""

import sys

import pytest
import torch

from transformer_lab.extras import MissingExtraError
from transformer_lab.training import Trainer

from .test_trainer import D_MODEL, TinyModel, config, epoch_batches, evaluate_with_randomness, loss_fn, read_rows


def train(out_dir, max_steps, resume=False):
    torch.manual_seed(0)
    trainer = Trainer(
        TinyModel(),
        config(max_steps=max_steps, tensorboard=True),
        out_dir,
        loss_fn,
        epoch_batches,
        d_model=D_MODEL,
        evaluate_fn=evaluate_with_randomness,
        count_tokens=lambda batch: int(batch["token_ids"].numel()),
        resume=resume,
    )
    return trainer.fit()


def read_events(out_dir) -> dict[str, list[tuple[int, float]]]:
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    accumulator = event_accumulator.EventAccumulator(str(out_dir / "tensorboard"))
    accumulator.Reload()
    return {
        tag: [(event.step, event.value) for event in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]
    }


def expected_scalars(out_dir) -> dict[str, list[tuple[int, float]]]:
    expected: dict[str, list[tuple[int, float]]] = {}
    for row in read_rows(out_dir):
        for name, value in row.items():
            if name not in ("event", "step", "epoch") and value is not None:
                expected.setdefault(f"{row['event']}/{name}", []).append((row["step"], value))
    return expected


def test_the_event_files_hold_the_scalars_of_the_metrics_log(tmp_path):
    pytest.importorskip("tensorboard")
    train(tmp_path, max_steps=6)
    events = read_events(tmp_path)
    expected = expected_scalars(tmp_path)
    assert {"train/train_loss", "train/lr", "train/grad_norm", "train/tokens_per_second", "eval/val_loss"} <= set(
        expected
    )
    assert events.keys() == expected.keys()
    for tag, points in expected.items():
        assert [step for step, _ in events[tag]] == [step for step, _ in points], tag
        # Event files store float32.
        assert [value for _, value in events[tag]] == pytest.approx([value for _, value in points], rel=1e-6), tag


def test_a_resumed_run_shows_each_step_once(tmp_path):
    pytest.importorskip("tensorboard")
    train(tmp_path, max_steps=8)
    reference = read_events(tmp_path)
    resumed = tmp_path / "resumed"
    train(resumed, max_steps=5)
    train(resumed, max_steps=8, resume=True)
    events = read_events(resumed)
    # The first run's points after step 5 were purged: the events are the resumed log's, step by step.
    expected = expected_scalars(resumed)
    assert events.keys() == expected.keys()
    for tag, points in expected.items():
        assert [step for step, _ in events[tag]] == [step for step, _ in points], tag
    # And the training curve is the uninterrupted run's.
    assert [step for step, _ in events["train/train_loss"]] == [step for step, _ in reference["train/train_loss"]]


def test_without_the_extra_it_is_one_line_naming_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    with pytest.raises(MissingExtraError, match=r'pip install -e "\.\[tensorboard\]"') as error:
        Trainer(TinyModel(), config(tensorboard=True), tmp_path, loss_fn, epoch_batches, d_model=D_MODEL)
    assert "\n" not in str(error.value)
    assert not (tmp_path / "tensorboard").exists()
