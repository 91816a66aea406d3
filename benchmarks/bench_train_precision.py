"""Training throughput of Seq2SeqTransformer in fp32 against bf16 autocast: same data, same run.

Two models: the copy task's preset (`transformer_lab.tasks.synthetic.train.default_config("copy")`:
d_model 64, 4 heads, 2+2 layers, vocabulary 14, batches of 64 sequences of 1-10
symbols) and a mid-size one (d_model 256, 8 heads, 3+3 layers, feed-forward 1024,
vocabulary 8000, batches of 32 sequences of 16-32 tokens, copy pairs over that vocabulary).

A training step is what the Trainer does with `precision="fp32"` or `"bf16"`: forward and
loss (label-smoothed cross-entropy, the tasks' loss function) under
`torch.autocast(bfloat16)` for bf16, backward, gradient clipping at 1.0, an Adam step;
the weights stay float32 in both. The two precisions start from the same weights and
train on the same batches; blocks of `--steps` steps are timed in alternation,
`--repeats` times, and the median tokens/s is reported (tokens = target tokens, eos
included, padding excluded: what the Trainer's progress bar counts), with the ratio
bf16 / fp32 (> 1 means bf16 is faster).

CPU timings on a shared machine are noisy: compare the two columns of one run, never
figures of different runs. On cores shared with other jobs pass `--threads 1`: with
torch's default of one thread per core, a busy core stalls every operation (measured
4-55x slower on the team's 2-core machine while another training job ran). bf16 pays
off only where the CPU has bf16 instructions (AVX512-BF16 or AMX); the script prints
what torch detected.

    .venv/bin/python benchmarks/bench_train_precision.py [--repeats 5] [--steps 5]
        [--models copy mid] [--threads N]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import statistics
import time
from dataclasses import dataclass

import torch

from transformer_lab.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    Seq2SeqBatch,
    collate_pairs,
    make_synthetic_pairs,
)
from transformer_lab.hardware import machine_summary
from transformer_lab.models import ModelConfig, Seq2SeqTransformer
from transformer_lab.tasks.synthetic import train as synthetic_train
from transformer_lab.training import build_optimizer
from transformer_lab.training.batch_losses import seq2seq_loss_fn

PRECISIONS = ("fp32", "bf16")


@dataclass(frozen=True)
class Workload:
    """A model configuration and the shape of its training batches."""

    name: str
    model: ModelConfig
    batch_size: int
    min_length: int
    max_length: int


def thread_count() -> str:
    """torch's intra-op thread count, as words ("1 thread", "2 threads")."""
    threads = torch.get_num_threads()
    return f"{threads} thread" + ("" if threads == 1 else "s")


def copy_workload() -> Workload:
    """The copy task's own preset: its model and its batches."""
    config = synthetic_train.default_config("copy")
    return Workload("copy task", config.model, config.data.batch_size, config.data.min_length, config.data.max_length)


def mid_workload() -> Workload:
    """A mid-size translation-like model: d_model 256, 3+3 layers, 8000-token vocabulary."""
    model = ModelConfig(
        src_vocab_size=8000,
        tgt_vocab_size=8000,
        d_model=256,
        nhead=8,
        num_encoder_layers=3,
        num_decoder_layers=3,
        dim_feedforward=1024,
        dropout=0.1,
        max_len=64,
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
    )
    return Workload("mid-size", model, batch_size=32, min_length=16, max_length=32)


WORKLOADS = {"copy": copy_workload, "mid": mid_workload}


def make_batches(workload: Workload, count: int, seed: int) -> list[Seq2SeqBatch]:
    """`count` padded batches of copy pairs over the workload's vocabulary."""
    pairs = make_synthetic_pairs(
        "copy",
        count * workload.batch_size,
        workload.model.src_vocab_size,
        workload.min_length,
        workload.max_length,
        seed,
    )
    return [
        collate_pairs(pairs[start : start + workload.batch_size], PAD_ID, BOS_ID, EOS_ID)
        for start in range(0, len(pairs), workload.batch_size)
    ]


class Runner:
    """One model, its optimizer and its precision; `train(batches)` runs one step per batch."""

    def __init__(self, model: Seq2SeqTransformer, precision: str, smoothing: float) -> None:
        self.model = model.train()
        self.precision = precision
        self.parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
        # A small constant rate: the schedule costs nothing and does not change the timing.
        self.optimizer = build_optimizer(self.parameters, lr=1e-4)
        self.loss_fn = seq2seq_loss_fn(smoothing, PAD_ID)
        self.device = next(model.parameters()).device

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.precision == "bf16":
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def train(self, batches: list[Seq2SeqBatch]) -> float:
        """Train one step per batch (as the Trainer does); return the last loss.

        The loss is read once, after the last step: the Trainer reads its losses only at a logged
        row, and a read each step would make a GPU's host wait for every step.
        """
        last_loss: torch.Tensor | None = None
        for batch in batches:
            with self.autocast():
                loss = self.loss_fn(self.model, batch)
            loss.float().backward()
            torch.nn.utils.clip_grad_norm_(self.parameters, 1.0)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            last_loss = loss.detach()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return float("nan") if last_loss is None else float(last_loss.float())


def measure(workload: Workload, steps: int, repeats: int, device: torch.device) -> dict[str, tuple[float, float]]:
    """Median target tokens/s and the last loss of each precision, timed in alternation."""
    torch.manual_seed(0)
    model = Seq2SeqTransformer.from_config(workload.model).to(device)
    runners = {precision: Runner(copy.deepcopy(model), precision, smoothing=0.1) for precision in PRECISIONS}
    batches = [batch.to(device) for batch in make_batches(workload, steps, seed=0)]
    tokens = sum(batch.num_target_tokens for batch in batches)
    for runner in runners.values():  # warm-up: allocator, autocast caches, Adam's state
        runner.train(batches[:2])
    rates: dict[str, list[float]] = {precision: [] for precision in PRECISIONS}
    losses: dict[str, float] = {}
    for repeat in range(repeats):
        order = PRECISIONS if repeat % 2 == 0 else PRECISIONS[::-1]
        for precision in order:
            start = time.perf_counter()
            losses[precision] = runners[precision].train(batches)
            rates[precision].append(tokens / (time.perf_counter() - start))
    return {precision: (statistics.median(rates[precision]), losses[precision]) for precision in PRECISIONS}


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", choices=sorted(WORKLOADS), default=["copy", "mid"])
    parser.add_argument("--steps", type=int, default=5, help="training steps per timed block")
    parser.add_argument("--repeats", type=int, default=5, help="timed blocks per precision")
    parser.add_argument("--threads", type=int, default=0, help="torch threads; 0 keeps torch's default")
    parser.add_argument("--device", default="cpu")
    return parser.parse_args()


def main() -> None:
    arguments = parse_arguments()
    if arguments.threads:
        torch.set_num_threads(arguments.threads)
    device = torch.device(arguments.device)
    print("\n".join(machine_summary(device)))
    print(f"device {device}, {thread_count()}")
    print(
        f"one timed block = {arguments.steps} training steps (forward, loss, backward, clip, Adam); "
        f"median of {arguments.repeats} blocks per precision, fp32 and bf16 alternated\n"
    )
    print(
        "| model | d_model | layers | batch | fp32 tokens/s | bf16 tokens/s | ratio bf16/fp32 "
        "| last loss fp32 / bf16 |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in arguments.models:
        workload = WORKLOADS[name]()
        results = measure(workload, arguments.steps, arguments.repeats, device)
        (fp32_rate, fp32_loss), (bf16_rate, bf16_loss) = results["fp32"], results["bf16"]
        config = workload.model
        print(
            f"| {workload.name} | {config.d_model} | {config.num_encoder_layers}+{config.num_decoder_layers} | "
            f"{workload.batch_size} x {workload.min_length}-{workload.max_length} | {fp32_rate:,.0f} | "
            f"{bf16_rate:,.0f} | {bf16_rate / fp32_rate:.2f} | {fp32_loss:.3f} / {bf16_loss:.3f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
