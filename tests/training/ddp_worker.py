"""The tiny runs of test_distributed.py, and the worker it starts under ``torchrun``.

``python -m torch.distributed.run --nproc-per-node 2 ... -m tests.training.ddp_worker ROOT``
runs ``transformer-lab train copy`` (its output to ``ROOT/cli-rank<r>.txt``), then trains
the scenarios below with the Trainer's own DistributedDataParallel path: each rank trains
on its shard of the token-budget batches, and writes its final weights and summary to
``ROOT/<scenario>-rank<r>.pt``; rank 0 writes the run folder ``ROOT/<scenario>/``.
The test trains the same scenarios in one process on the merged global batches
(:func:`merged_batches`) and compares.
"""

from __future__ import annotations

import contextlib
import io
import math
import sys
from pathlib import Path
from typing import Any

import torch

from transformer_lab import cli
from transformer_lab.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    Seq2SeqBatch,
    balance_batches_for_shards,
    collate_pairs,
    collated_lengths,
    make_synthetic_pairs,
    token_budget_batches,
)
from transformer_lab.models import ModelConfig, Seq2SeqTransformer
from transformer_lab.training import DataParallel, TrainConfig, Trainer, data_shard
from transformer_lab.training.batch_losses import seq2seq_loss_fn

WORLD_SIZE = 2
VOCABULARY_SIZE = 12
# Lengths 1..8 under a 40-token budget: batches of 4 to 20 pairs, so the ranks' batches
# at one micro-step hold different token counts and the per-token weighting matters.
PAIRS = make_synthetic_pairs("copy", 60, VOCABULARY_SIZE, 1, 8, seed=7)
VALIDATION = make_synthetic_pairs("copy", 8, VOCABULARY_SIZE, 1, 8, seed=8)
MAX_TOKENS = 40
BATCH_SEED = 3

# name -> (grad_accum_steps, max_steps, resume from a run stopped at this step or None)
SCENARIOS: dict[str, tuple[int, int, int | None]] = {
    "accumulate-1": (1, 4, None),
    "accumulate-2": (2, 4, None),
    "resumed": (1, 4, 2),  # mid-epoch: resumed by one process from there
    "non-finite": (2, 3, None),
}
# In "non-finite" the loss of any batch holding this pair is NaN: at epoch 0 it is in rank
# 1's second batch, the one of an accumulation group that would all-reduce.
POISONED_PAIR = 17


def collate(pairs: list[tuple[list[int], list[int]]]) -> Seq2SeqBatch:
    return collate_pairs(pairs, PAD_ID, BOS_ID, EOS_ID)


def epoch_index_batches(epoch: int, num_shards: int = 1, shard_index: int = 0) -> list[list[int]]:
    return token_budget_batches(
        collated_lengths(PAIRS),
        MAX_TOKENS,
        seed=BATCH_SEED,
        epoch=epoch,
        num_shards=num_shards,
        shard_index=shard_index,
    )


def shard_batches(epoch: int) -> list[Seq2SeqBatch]:
    """This rank's batches of ``epoch``, as a task builds them under torchrun."""
    return [collate([PAIRS[index] for index in batch]) for batch in epoch_index_batches(epoch, *data_shard())]


def merged_batches(epoch: int) -> list[Seq2SeqBatch]:
    """The single process's batches: micro-step t's batches of all ranks merged into one."""
    balanced, _ = balance_batches_for_shards(epoch_index_batches(epoch), WORLD_SIZE)
    return [
        collate([PAIRS[index] for batch in balanced[start : start + WORLD_SIZE] for index in batch])
        for start in range(0, len(balanced), WORLD_SIZE)
    ]


def make_model() -> Seq2SeqTransformer:
    torch.manual_seed(0)
    config = ModelConfig(
        src_vocab_size=VOCABULARY_SIZE,
        tgt_vocab_size=VOCABULARY_SIZE,
        d_model=16,
        nhead=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dim_feedforward=32,
        dropout=0.0,
        max_len=16,
        tie_embeddings="all",
    )
    return Seq2SeqTransformer.from_config(config)


def evaluate(model: torch.nn.Module) -> dict[str, float]:
    return {"val_loss": float(seq2seq_loss_fn(0.0, PAD_ID)(model, collate(VALIDATION)))}


def poisoned_loss_fn(model: torch.nn.Module, batch: Seq2SeqBatch) -> torch.Tensor:
    """The smoothed loss, NaN for a batch that holds ``PAIRS[POISONED_PAIR]``."""
    loss = seq2seq_loss_fn(0.1, PAD_ID)(model, batch)
    sources = [row[row != PAD_ID].tolist() for row in batch.src_ids]
    return loss * math.nan if PAIRS[POISONED_PAIR][0] in sources else loss


def train(
    out_dir: Path, grad_accum_steps: int, max_steps: int, train_batches: Any, resume: bool = False, loss_fn: Any = None
) -> tuple[torch.nn.Module, Trainer]:
    model = make_model()
    config = TrainConfig(
        seed=0,
        epochs=0,
        max_steps=max_steps,
        lr_factor=0.5,
        warmup_steps=3,
        grad_accum_steps=grad_accum_steps,
        eval_every_steps=2,
        keep_last=1,
        log_every_steps=1,
        progress_bar=False,
    )
    trainer = Trainer(
        model,
        config,
        out_dir,
        loss_fn=loss_fn or seq2seq_loss_fn(0.1, PAD_ID),
        train_batches=train_batches,
        d_model=16,
        evaluate_fn=evaluate,
        count_tokens=lambda batch: batch.num_target_tokens,
        resume=resume,
    )
    trainer.fit()
    return model, trainer


def run_scenario(root: Path, name: str, train_batches: Any) -> tuple[torch.nn.Module, Trainer]:
    """Train scenario ``name`` into ``root/name`` (stopping and resuming if it says so)."""
    grad_accum_steps, max_steps, stop_at = SCENARIOS[name]
    loss_fn = poisoned_loss_fn if name == "non-finite" else None
    if stop_at is not None:
        train(root / name, grad_accum_steps, stop_at, train_batches, loss_fn=loss_fn)
    return train(root / name, grad_accum_steps, max_steps, train_batches, resume=stop_at is not None, loss_fn=loss_fn)


# `transformer-lab train copy` on a tiny budget: 256 pairs in batches of 64 are 2 batches
# per rank and epoch.
CLI_ARGUMENTS = [
    "train",
    "copy",
    "--set",
    "data.num_train=256",
    "--set",
    "data.num_validation=20",
    "--set",
    "data.num_test=40",
    "--set",
    "data.max_length=5",
    "--set",
    "model.d_model=16",
    "--set",
    "model.nhead=2",
    "--set",
    "model.dim_feedforward=32",
    "--set",
    "train.max_steps=4",
    "--set",
    "train.epochs=0",
    "--set",
    "train.progress_bar=false",
    "--set",
    "train.log_every_steps=1",
]


def main(root: Path) -> None:
    rank = data_shard()[1]
    # The command line first, so that its Trainer creates the process group itself.
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exit_code = cli.main([*CLI_ARGUMENTS, "--out", str(root / "cli")])
    (root / f"cli-rank{rank}.txt").write_text(f"exit code {exit_code}\n{output.getvalue()}", encoding="utf-8")
    # Disagreements between ranks raise on every rank, instead of hanging one of them.
    parallel = DataParallel.from_environment(make_model(), torch.device("cpu"))
    messages = []
    for check in (
        lambda: parallel.check_same_count("train_batches", 5 + rank),
        lambda: parallel.check_identical("extra_files", b"vocabulary of rank %d" % rank),
    ):
        try:
            check()
            messages.append("no error")
        except ValueError as error:
            messages.append(str(error))
    (root / f"checks-rank{rank}.txt").write_text("\n".join(messages), encoding="utf-8")
    for name in SCENARIOS:
        model, trainer = run_scenario(root, name, shard_batches)
        torch.save(
            {
                "state": model.state_dict(),
                "last_metrics": trainer.last_metrics,
                "batches_per_epoch": len(shard_batches(0)),
            },
            root / f"{name}-rank{rank}.pt",
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
