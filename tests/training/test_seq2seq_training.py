"""The Trainer on a real Seq2SeqTransformer: overfitting one batch, checkpoint round-trip,
and the copy task's training reaching 100 % exact match on held-out sequences.

tests/training/test_trainer.py checks the Trainer's mechanics on a toy model; here the
model, the collation, the loss glue, the checkpoint files and the decoding meet.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from transformer_lab.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    Seq2SeqBatch,
    collate_pairs,
    make_synthetic_pairs,
)
from transformer_lab.decoding import greedy_search
from transformer_lab.decoding.sources import strip_generated
from transformer_lab.models import ModelConfig, Seq2SeqTransformer
from transformer_lab.tasks.synthetic import train as synthetic_train
from transformer_lab.training import (
    TrainConfig,
    Trainer,
    config_from_dict,
    config_to_dict,
    load_checkpoint_config,
    load_model_weights,
    save_checkpoint,
)
from transformer_lab.training.batch_losses import seq2seq_loss_fn

VOCAB = 14  # the copy task's: 4 specials + 10 symbols
PAIRS_IN_BATCH = 8


def tiny_config() -> ModelConfig:
    """A 2+2-layer model, d_model 32, dropout 0, on the copy task's vocabulary."""
    return ModelConfig(
        src_vocab_size=VOCAB,
        tgt_vocab_size=VOCAB,
        d_model=32,
        nhead=2,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=64,
        dropout=0.0,
        max_len=16,
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
    )


@dataclass
class OverfitRun:
    """What one Trainer run on a single batch leaves behind (shared by two tests)."""

    model: Seq2SeqTransformer
    model_config: ModelConfig
    batch: Seq2SeqBatch
    targets: list[list[int]]
    initial_loss: float
    summary: dict[str, Any]
    out_dir: Path


@pytest.fixture(scope="module")
def overfit_run(tmp_path_factory: pytest.TempPathFactory) -> OverfitRun:
    """Train a tiny model on one padded batch of copy pairs (lengths 1..6) until it fits."""
    torch.manual_seed(0)
    pairs = make_synthetic_pairs("copy", PAIRS_IN_BATCH, VOCAB, min_length=1, max_length=6, seed=3)
    batch = collate_pairs(pairs, PAD_ID, BOS_ID, EOS_ID)
    model_config = tiny_config()
    model = Seq2SeqTransformer.from_config(model_config)
    loss_fn = seq2seq_loss_fn(smoothing=0.0, pad_id=PAD_ID)
    with torch.no_grad():
        initial_loss = float(loss_fn(model.eval(), batch))
    out_dir = tmp_path_factory.mktemp("overfit")
    train_config = TrainConfig(
        epochs=150,  # one batch per epoch: 150 optimizer steps
        warmup_steps=30,
        # 0.5: with 1.0 (peak rate 0.03) the loss still oscillated at step 150-200 for
        # some seeds; with 0.5 it reached ~1e-4 for each of the seeds tried.
        lr_factor=0.5,
        label_smoothing=0.0,
        eval_every_steps=1000,  # no evaluation until the final checkpoint
        keep_last=0,
        log_every_steps=50,
        progress_bar=False,
    )
    trainer = Trainer(
        model,
        train_config,
        out_dir,
        loss_fn=loss_fn,
        train_batches=lambda epoch: [batch],
        d_model=model_config.d_model,
        count_tokens=lambda batch: batch.num_target_tokens,
        checkpoint_config={"model": config_to_dict(model_config)},
    )
    summary = trainer.fit()
    targets = [target for _, target in pairs]
    return OverfitRun(model.eval(), model_config, batch, targets, initial_loss, summary, out_dir)


@pytest.mark.convergence
def test_a_tiny_seq2seq_transformer_overfits_one_batch(overfit_run: OverfitRun) -> None:
    run = overfit_run
    assert run.summary["steps"] == 150
    with torch.no_grad():
        final_loss = float(seq2seq_loss_fn(0.0, PAD_ID)(run.model, run.batch))
    assert final_loss < 0.01 * run.initial_loss, (run.initial_loss, final_loss)
    output = greedy_search(run.model, run.batch.src_ids, max_len=8)
    generated = [strip_generated(row, EOS_ID, PAD_ID) for row in output.best_ids]
    assert generated == run.targets
    # Every row ends with eos: the model also learnt where to stop.
    assert output.lengths.tolist() == [len(target) + 1 for target in run.targets]


def test_checkpoint_round_trip_gives_identical_logits(overfit_run: OverfitRun, tmp_path: Path) -> None:
    run = overfit_run
    with torch.no_grad():
        expected = run.model(run.batch.src_ids, run.batch.tgt_in_ids)  # [B, T, V]
    save_checkpoint(tmp_path / "checkpoint", run.model, {"model": config_to_dict(run.model_config)})
    # The Trainer's own final checkpoint too: it wrote last/ at the end of fit().
    for folder in (tmp_path / "checkpoint", run.out_dir / "last"):
        model_config = config_from_dict(ModelConfig, load_checkpoint_config(folder)["model"])
        assert model_config == run.model_config
        torch.manual_seed(123)  # a fresh model whose random weights differ from the trained ones
        fresh = Seq2SeqTransformer.from_config(model_config).eval()
        with torch.no_grad():
            assert not torch.allclose(fresh(run.batch.src_ids, run.batch.tgt_in_ids), expected)
            load_model_weights(folder, fresh)
            assert torch.equal(fresh(run.batch.src_ids, run.batch.tgt_in_ids), expected)


def test_a_bf16_training_step_stays_close_to_fp32(device: torch.device, tmp_path: Path) -> None:
    """One Trainer step under bf16 autocast against fp32, from the same weights on the same batch.

    bf16 keeps 8 bits of mantissa, so the loss and the gradients differ from fp32's by about
    a percent, but not in direction: a wrong autocast (a softmax or the loss in bf16, a
    missing cast) shows as a larger loss error or gradients that point elsewhere.
    """
    pairs = make_synthetic_pairs("copy", PAIRS_IN_BATCH, VOCAB, min_length=1, max_length=6, seed=3)
    batch = collate_pairs(pairs, PAD_ID, BOS_ID, EOS_ID)
    losses, norms, gradients = {}, {}, {}
    for precision in ("fp32", "bf16"):
        torch.manual_seed(0)
        model = Seq2SeqTransformer.from_config(tiny_config())
        train_config = TrainConfig(
            max_steps=1,
            epochs=0,
            warmup_steps=1,
            label_smoothing=0.1,
            clip_grad_norm=0.0,  # the gradients as computed, for the comparison
            eval_every_steps=1000,
            keep_last=0,
            log_every_steps=1,
            progress_bar=False,
            precision=precision,
            device=str(device),
        )
        trainer = Trainer(
            model,
            train_config,
            tmp_path / precision,
            loss_fn=seq2seq_loss_fn(smoothing=0.1, pad_id=PAD_ID),
            train_batches=lambda epoch: [batch],
            d_model=32,
            count_tokens=lambda batch: batch.num_target_tokens,
        )
        seen: list[torch.Tensor] = []
        trainer.optimizer.register_step_pre_hook(
            lambda optimizer, args, kwargs: seen.append(
                torch.cat([parameter.grad.flatten() for parameter in model.parameters() if parameter.grad is not None])
            )
        )
        assert trainer.fit()["steps"] == 1
        assert next(model.parameters()).device.type == device.type
        row = next(row for row in _metrics_rows(tmp_path / precision) if row["event"] == "train")
        losses[precision], norms[precision], (gradients[precision],) = row["train_loss"], row["grad_norm"], seen
    assert losses["bf16"] == pytest.approx(losses["fp32"], rel=2e-2)
    assert norms["bf16"] == pytest.approx(norms["fp32"], rel=5e-2)
    assert float(gradients["bf16"].norm()) == pytest.approx(norms["bf16"], rel=1e-3)  # the step saw what was logged
    cosine = torch.nn.functional.cosine_similarity(gradients["bf16"].float(), gradients["fp32"], dim=0)
    assert float(cosine) > 0.99, float(cosine)
    assert not torch.equal(gradients["bf16"], gradients["fp32"])  # bf16 did run


def _metrics_rows(run_folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_folder / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]


# The copy task on a reduced budget. The preset trains ~940 steps of a 2+2-layer model on
# sequences of 1-10 symbols; here sequences have 1-5 symbols (the 1,000 held-out ones
# have 3-5, 95 % of them 4-5: nearly every shorter one occurs in training) and a
# 1+1-layer pre-norm model takes 500 steps of 128 pairs. Measured on the team's 2-core
# machine, one torch thread: about 12 s of training, also while another job was using a
# core. 100 % exact match on 500 held-out sequences for each of 12 seeds (train.seed=s,
# data.seed=1234+s, s = 0..11), and on these 1,000 for seed 0, the one used here.
# Settings that missed on some seeds (93-99.8 %): batch 64 (lr_factor 0.5 or 1.0,
# 400-800 steps), batch 128 with lr_factor 1.0 (a late loss bump; 1 seed in 10), and
# 2+2 layers with lr_factor 1.0 at batch 64 or 128 (also 2x slower per step).
REDUCED_COPY_SETTINGS: dict[str, dict[str, Any]] = {
    "data": {"num_train": 10_000, "max_length": 5, "num_validation": 100, "num_test": 1_000, "batch_size": 128},
    "model": {"num_encoder_layers": 1, "num_decoder_layers": 1, "norm_first": True},
    "train": {
        "epochs": 0,
        "max_steps": 500,
        "warmup_steps": 100,
        "lr_factor": 0.5,
        "eval_every_steps": 500,  # one evaluation, at the end; it does not change training
        "keep_last": 0,
        "progress_bar": False,
    },
}


def reduced_copy_config() -> synthetic_train.SyntheticConfig:
    """The copy task's preset with REDUCED_COPY_SETTINGS applied (model otherwise as the
    preset: d_model 64, 4 heads, feed-forward 256, dropout 0, all embeddings tied)."""
    config = synthetic_train.default_config("copy")
    return synthetic_train.resolve(
        dataclasses.replace(
            config,
            data=dataclasses.replace(config.data, **REDUCED_COPY_SETTINGS["data"]),
            model=dataclasses.replace(config.model, **REDUCED_COPY_SETTINGS["model"]),
            train=dataclasses.replace(config.train, **REDUCED_COPY_SETTINGS["train"]),
        )
    )


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Run on one torch thread, then restore the count.

    A model this small gains nothing from a second thread, and on cores shared with other
    jobs two spinning threads per process made training 10x slower or worse.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.mark.convergence
def test_copy_task_training_reaches_full_exact_match_on_held_out_sequences(tmp_path: Path, one_thread: None) -> None:
    config = reduced_copy_config()
    result = synthetic_train.train(config, tmp_path)
    assert result.summary["steps"] == config.train.max_steps
    held_out = result.data.test
    assert len(held_out) == config.data.num_test
    training_sources = {tuple(source) for source, _ in result.data.train}
    assert not any(tuple(source) in training_sources for source, _ in held_out)
    greedy = dataclasses.replace(config.decode, strategy="greedy")
    assert synthetic_train.exact_match(result.model, held_out, greedy) == 1.0
