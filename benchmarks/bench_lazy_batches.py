"""Training speed with batches collated when read (the store's lazy epoch) against an epoch collated up front.

Multi30k with the translation preset's data, model and loss. ``eager`` collates every
batch of the epoch into tensors before the first step (what the trainer was handed before
the token store); ``lazy`` is `PairBatches`, collating each batch when the loop reads it,
its collation counted in the step time. Both train copies of one model on the same batches
(asserted equal first), in alternating rounds, one optimizer step a batch (forward,
label-smoothed loss, backward, clipping, Adam). Reported: target tokens/s of each and their
ratio, and the time to the first step of each (the eager one pays the whole epoch first).

    .venv/bin/python benchmarks/bench_lazy_batches.py --data-dir ~/data [--steps 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import statistics
import time
from pathlib import Path

import torch

from transformer_lab.data import BOS_ID, EOS_ID, PAD_ID, collate_pairs, collated_lengths, token_budget_batches
from transformer_lab.hardware import machine_summary
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.tasks import seq2seq
from transformer_lab.tasks.translation import data as translation_data
from transformer_lab.tasks.translation import train as translation_train
from transformer_lab.training import build_optimizer
from transformer_lab.training.batch_losses import seq2seq_loss_fn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=8, help="steps a round, from the middle of the epoch")
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    print("\n".join(machine_summary()))

    config = translation_train.default_config()
    data_config = dataclasses.replace(config.data, data_dir=str(arguments.data_dir))
    data = translation_data.build_data(data_config)
    config = seq2seq.with_vocabulary(config, data.vocabulary.source.vocab_size)
    encoded = data.vocabulary.encode_pairs(data.train_pairs or [])

    start = time.perf_counter()
    plan = token_budget_batches(collated_lengths(encoded), data_config.max_tokens, True, data_config.seed, 0)
    eager = [collate_pairs([encoded[index] for index in batch], PAD_ID, BOS_ID, EOS_ID) for batch in plan]
    eager_first = time.perf_counter() - start
    start = time.perf_counter()
    lazy = translation_data.epoch_batches(data, data_config, epoch=0)
    lazy[0]
    lazy_first = time.perf_counter() - start
    assert len(lazy) == len(eager)
    for ours, theirs in zip(lazy, eager):
        assert torch.equal(ours.src_ids, theirs.src_ids) and torch.equal(ours.tgt_out_ids, theirs.tgt_out_ids)
    print(f"{len(eager)} batches, identical; before the first step: eager {eager_first:.2f} s, lazy {lazy_first:.3f} s")

    torch.manual_seed(0)
    model = Seq2SeqTransformer.from_config(config.model)
    runners = {}
    for name in ("eager", "lazy"):
        copied = copy.deepcopy(model).train()
        runners[name] = (copied, build_optimizer(copied.parameters(), lr=1e-4))
    loss_fn = seq2seq_loss_fn(config.train.label_smoothing, PAD_ID)
    middle = len(eager) // 2
    positions = range(middle, middle + arguments.steps)
    rates: dict[str, list[float]] = {"eager": [], "lazy": []}
    for _ in range(arguments.rounds):
        for name in ("eager", "lazy"):
            copied, optimizer = runners[name]
            tokens = 0
            start = time.perf_counter()
            for position in positions:
                batch = eager[position] if name == "eager" else lazy[position]
                loss = loss_fn(copied, batch)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(copied.parameters(), config.train.clip_grad_norm)
                optimizer.step()
                tokens += batch.num_target_tokens
            rates[name].append(tokens / (time.perf_counter() - start))
    eager_rate, lazy_rate = statistics.median(rates["eager"]), statistics.median(rates["lazy"])
    print("| batches | target tokens/s (median of rounds) | ratio to eager |")
    print("|---|---:|---:|")
    print(f"| eager (collated up front) | {eager_rate:,.0f} | 1.00 |")
    print(f"| lazy (collated when read) | {lazy_rate:,.0f} | {lazy_rate / eager_rate:.3f} |")


if __name__ == "__main__":
    main()
