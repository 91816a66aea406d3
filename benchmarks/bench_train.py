"""Training speed on real Multi30k batches: ours against ``torch.nn.Transformer``, side by side.

Both models are the same ``Seq2SeqTransformer`` (same embeddings, positional encoding,
generator, loss and weights); the baseline has its ``transformer`` submodule replaced by
``torch.nn.Transformer`` loaded with our state dict (the keys are the same). Four runners
train on the same batches in alternation: torch fp32, torch under bf16 autocast, ours fp32,
ours under bf16 autocast. A step is what the Trainer does: forward, label-smoothed loss,
backward, gradient clipping, Adam.

Batches are the translation task's own: joint BPE trained on the training split, length-
bucketed token-budget batches (``--max-tokens`` padded tokens). Reported per runner: target
tokens/s (padding excluded, as the Trainer counts) and model FLOP utilisation (MFU): the
matrix-multiply FLOPs the model needs for the real (non-padding) tokens of the timed steps,
forward and backward (3x forward), divided by time and by the *measured* peak of a
2048x2048 matrix multiply on this machine in the precision ``auto`` picks here (bf16 where
the CPU has bf16 matrix instructions, else fp32; both peaks are printed where bf16 is fast).

bf16 runners are left out where bf16 is slow (an AVX2-only CPU runs bf16 matrix products in
a reference kernel, ~100x slower than fp32); ``--precisions fp32 bf16`` times them anyway.

    .venv/bin/python benchmarks/bench_train.py [--configs translation-default base]
        [--steps 4] [--repeats 3] [--threads N] [--data-dir ~/data] [--compile]
        [--precisions auto | fp32 bf16]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import statistics
import time

import torch

# The training step of the precision benchmark (forward, loss, backward, clip, Adam), reused.
from bench_train_precision import Runner
from torch import nn

from transformer_lab.data import PAD_ID, Seq2SeqBatch
from transformer_lab.hardware import bf16_support, machine_summary
from transformer_lab.models import ModelConfig, Seq2SeqTransformer
from transformer_lab.tasks.translation import data as translation_data
from transformer_lab.tasks.translation import train as translation_train

COMPILED = "ours bf16 compiled"


def matmul_peak(dtype: torch.dtype, size: int = 2048, repeats: int = 10) -> float:
    """Measured FLOP/s of a ``size`` x ``size`` matrix multiply in ``dtype`` (median of ``repeats``)."""
    left = torch.randn(size, size).to(dtype)
    right = torch.randn(size, size).to(dtype)
    for _ in range(2):
        torch.mm(left, right)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(left, right)
        times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times)


def model_configs(src_vocab_size: int, tgt_vocab_size: int) -> dict[str, ModelConfig]:
    """The translation default (d_model 256, 3+3) and the paper's base size (d_model 512, 6+6)."""
    default = dataclasses.replace(
        translation_train.default_config().model,
        src_vocab_size=src_vocab_size,
        tgt_vocab_size=tgt_vocab_size,
    )
    base = dataclasses.replace(
        default, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048, dropout=0.1
    )
    return {"translation-default": default, "base": base}


def step_flops(config: ModelConfig, batch: Seq2SeqBatch) -> float:
    """Forward+backward matmul FLOPs for the real tokens of ``batch`` (3 x forward, 2 FLOPs per MAC).

    Projections count per real token; attention scores and mixtures count per real
    (query, key) pair. Embedding lookups, norms and element-wise work are not counted.
    """
    d_model, feedforward = config.d_model, config.dim_feedforward
    src_lengths = (batch.src_ids != PAD_ID).sum(dim=1).double()  # [B]
    tgt_lengths = (batch.tgt_out_ids != PAD_ID).sum(dim=1).double()  # [B], eos included
    source_tokens, target_tokens = float(src_lengths.sum()), float(tgt_lengths.sum())
    projection = 4 * d_model * d_model + 2 * d_model * feedforward  # q, k, v, out + FFN, per token
    encoder = config.num_encoder_layers * (
        source_tokens * projection + 2 * 2 * d_model * float((src_lengths * src_lengths).sum())
    )
    decoder = config.num_decoder_layers * (
        target_tokens * (projection + 2 * d_model * d_model)  # + cross-attention q and out
        + source_tokens * 2 * d_model * d_model  # cross-attention k and v over the memory
        + 2 * 2 * d_model * float((tgt_lengths * (tgt_lengths + 1) / 2).sum())  # causal self-attention
        + 2 * 2 * d_model * float((tgt_lengths * src_lengths).sum())  # cross-attention
    )
    generator = target_tokens * d_model * config.tgt_vocab_size
    return 3 * 2 * (encoder + decoder + generator)


def torch_baseline(model: Seq2SeqTransformer, config: ModelConfig) -> Seq2SeqTransformer:
    """``model`` with its ``transformer`` replaced by ``torch.nn.Transformer`` holding the same weights."""
    baseline = copy.deepcopy(model)
    reference = nn.Transformer(
        d_model=config.d_model,
        nhead=config.nhead,
        num_encoder_layers=config.num_encoder_layers,
        num_decoder_layers=config.num_decoder_layers,
        dim_feedforward=config.dim_feedforward,
        dropout=config.dropout,
        activation=config.activation,
        batch_first=True,
        norm_first=config.norm_first,
    )
    reference.load_state_dict(model.transformer.state_dict(), strict=True)
    baseline.transformer = reference
    return baseline


def measure(
    config: ModelConfig,
    batches: list[Seq2SeqBatch],
    repeats: int,
    precisions: list[str],
    peak_dtype: torch.dtype,
    compile_model: bool = False,
) -> tuple[dict[str, tuple[float, float, float]], float]:
    """Per runner: median target tokens/s, MFU, last loss; and the matmul peak used.

    The peak is measured again in every repeat, between the runners, and its median is
    the MFU's denominator: a peak taken once could catch a moment when the machine was
    busier or quieter than during the runs.
    """
    torch.manual_seed(0)
    ours = Seq2SeqTransformer.from_config(config)
    baseline = torch_baseline(ours, config)
    runners = {}
    for implementation, model in (("torch", baseline), ("ours", ours)):
        for precision in precisions:
            runners[f"{implementation} {precision}"] = Runner(copy.deepcopy(model), precision, smoothing=0.1)
    if compile_model:
        # torch.compile (inductor, dynamic shapes: token-budget batches vary in shape);
        # the first steps compile and are not timed.
        compiled = Runner(copy.deepcopy(ours), "bf16", smoothing=0.1)
        compiled.model = torch.compile(compiled.model, dynamic=True)
        runners[COMPILED] = compiled
    names = list(runners)
    tokens = sum(batch.num_target_tokens for batch in batches)
    flops = sum(step_flops(config, batch) for batch in batches)
    for runner in runners.values():  # warm-up: allocator, oneDNN kernels, Adam's state (and compiling)
        runner.train(batches if runner is runners.get(COMPILED) else batches[:1])
    seconds: dict[str, list[float]] = {name: [] for name in names}
    losses: dict[str, float] = {}
    peaks: list[float] = []
    for repeat in range(repeats):
        peaks.append(matmul_peak(peak_dtype, repeats=5))
        order = names if repeat % 2 == 0 else names[::-1]
        for name in order:
            start = time.perf_counter()
            losses[name] = runners[name].train(batches)
            seconds[name].append(time.perf_counter() - start)
    peak = statistics.median(peaks)
    result = {}
    for name in names:
        median = statistics.median(seconds[name])
        result[name] = (tokens / median, flops / median / peak, losses[name])
    return result, peak


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--configs", nargs="+", choices=("translation-default", "base"), default=["translation-default", "base"]
    )
    parser.add_argument("--steps", type=int, default=4, help="training steps (batches) per timed block")
    parser.add_argument("--repeats", type=int, default=3, help="timed blocks per runner")
    parser.add_argument(
        "--max-tokens", type=int, default=4096, help="padded tokens per batch (the translation default)"
    )
    parser.add_argument("--threads", type=int, default=0, help="torch threads; 0 keeps torch's default")
    parser.add_argument("--data-dir", default=None, help="folder holding multi30k/ (default: $TRANSFORMER_LAB_DATA)")
    parser.add_argument(
        "--compile", action="store_true", help="also time ours bf16 under torch.compile (slow to compile)"
    )
    parser.add_argument(
        "--precisions",
        nargs="+",
        choices=("auto", "fp32", "bf16"),
        default=["auto"],
        help="runners' precisions; auto = fp32, and bf16 too where this CPU runs it fast (default)",
    )
    return parser.parse_args()


def main() -> None:
    arguments = parse_arguments()
    if arguments.threads:
        torch.set_num_threads(arguments.threads)
    data_config = dataclasses.replace(
        translation_train.default_config().data, data_dir=arguments.data_dir, max_tokens=arguments.max_tokens
    )
    data = translation_data.build_data(data_config)
    # The middle of an epoch: typical lengths, not only the shortest or longest bucket.
    epoch = translation_data.epoch_batches(data, data_config, epoch=0)
    middle = len(epoch) // 2
    batches = [epoch[position] for position in range(middle, min(len(epoch), middle + arguments.steps))]
    fast_bf16 = bf16_support("cpu").fast
    if arguments.precisions == ["auto"]:
        precisions = ["fp32", "bf16"] if fast_bf16 else ["fp32"]
    else:
        precisions = [precision for precision in ("fp32", "bf16") if precision in arguments.precisions]
    peak_dtype = torch.bfloat16 if fast_bf16 else torch.float32
    peak_name = "bf16" if fast_bf16 else "fp32"
    print("\n".join(machine_summary()))
    peak_fp32 = matmul_peak(torch.float32)
    if fast_bf16:
        peak_bf16 = matmul_peak(torch.bfloat16)
        print(
            f"2048x2048 matmul peak: bf16 {peak_bf16 / 1e9:.1f} GFLOP/s, fp32 {peak_fp32 / 1e9:.1f} GFLOP/s "
            f"(ratio {peak_bf16 / peak_fp32:.2f})"
        )
    else:
        print(f"2048x2048 matmul peak: fp32 {peak_fp32 / 1e9:.1f} GFLOP/s (bf16 not measured: slow on this CPU)")
    if "fp32" not in precisions:
        raise SystemExit("--precisions: expected fp32 among them (the baseline of every ratio)")
    if arguments.compile and "bf16" not in precisions:
        raise SystemExit("--compile: times ours under bf16, so --precisions must include bf16")
    print(
        f"{len(batches)} Multi30k batches of <= {arguments.max_tokens} padded tokens per timed block, "
        f"{sum(batch.num_target_tokens for batch in batches)} target tokens; median of {arguments.repeats} blocks\n"
    )
    print(
        f"| config | runner | tokens/s | vs torch fp32 | vs torch same precision | MFU ({peak_name} peak) | last loss |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for name in arguments.configs:
        tokenizers = data.vocabulary  # a TokenizerPair
        config = model_configs(tokenizers.source.vocab_size, tokenizers.target.vocab_size)[name]
        result, peak = measure(
            config, batches, arguments.repeats, precisions, peak_dtype, compile_model=arguments.compile
        )
        print(f"| {name} | {peak_name} matmul peak during the runs | {peak / 1e9:.1f} GFLOP/s | | | | |")
        torch_fp32 = result["torch fp32"][0]
        for runner in result:
            rate, mfu, loss = result[runner]
            same = result["torch " + runner.split()[1]][0]
            print(
                f"| {name} | {runner} | {rate:,.0f} | {rate / torch_fp32:.2f}x | {rate / same:.2f}x "
                f"| {mfu:.1%} | {loss:.3f} |"
            )


if __name__ == "__main__":
    main()
