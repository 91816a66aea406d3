"""Forward+backward of transformer_lab.nn.Transformer against torch.nn.Transformer, same run.

Same config, same weights, same inputs and padding masks; the two are timed in alternation
so that machine noise hits both alike. Reports the median time per step and the ratio
torch_time / our_time (>= 1.0 means ours is not slower).

    .venv/bin/python benchmarks/bench_nn.py [--repeats 15] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from transformer_lab import nn as lab_nn
from transformer_lab.hardware import machine_summary

BATCH, LENGTH = 64, 24


def make_inputs(d_model: int) -> dict:
    generator = torch.Generator().manual_seed(0)
    src = torch.randn(BATCH, LENGTH, d_model, generator=generator)
    tgt = torch.randn(BATCH, LENGTH, d_model, generator=generator)
    lengths = torch.randint(LENGTH // 2, LENGTH + 1, (BATCH,), generator=generator)
    padding = lab_nn.lengths_to_padding_mask(lengths, LENGTH)  # [B, S] True = padding
    return dict(
        src=src,
        tgt=tgt,
        tgt_mask=lab_nn.causal_mask(LENGTH),
        src_key_padding_mask=padding,
        memory_key_padding_mask=padding,
    )


def step(model: torch.nn.Module, inputs: dict, precision: str) -> None:
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        output = model(
            inputs["src"],
            inputs["tgt"],
            tgt_mask=inputs["tgt_mask"],
            src_key_padding_mask=inputs["src_key_padding_mask"],
            memory_key_padding_mask=inputs["memory_key_padding_mask"],
        )
        loss = output.float().square().mean()
    loss.backward()
    model.zero_grad(set_to_none=True)


def measure(d_model: int, layers: int, precision: str, repeats: int) -> tuple[float, float]:
    arguments = dict(
        d_model=d_model,
        nhead=8,
        num_encoder_layers=layers,
        num_decoder_layers=layers,
        dim_feedforward=4 * d_model,
        dropout=0.1,
        batch_first=True,
    )
    reference = torch.nn.Transformer(**arguments)
    ours = lab_nn.Transformer(**arguments)
    ours.load_state_dict(reference.state_dict())
    inputs = make_inputs(d_model)
    for _ in range(2):  # warm-up
        step(reference, inputs, precision)
        step(ours, inputs, precision)
    times = {"torch": [], "ours": []}
    for _ in range(repeats):
        for name, model in (("torch", reference), ("ours", ours)):
            start = time.perf_counter()
            step(model, inputs, precision)
            times[name].append(time.perf_counter() - start)
    return statistics.median(times["torch"]), statistics.median(times["ours"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="only d_model 256, 3 layers")
    parser.add_argument(
        "--configs", default="256x3,256x6,512x3,512x6", help="comma-separated d_modelxlayers list (default: all four)"
    )
    arguments = parser.parse_args()
    configs = (
        [(256, 3)] if arguments.quick else [tuple(map(int, item.split("x"))) for item in arguments.configs.split(",")]
    )
    print("\n".join(machine_summary()))
    print(f"batch {BATCH}, length {LENGTH}, padding masks, forward+backward, median of {arguments.repeats}\n")
    print("| d_model | layers | precision | torch ms | ours ms | ratio torch/ours |")
    print("|---:|---:|---|---:|---:|---:|")
    for d_model, layers in configs:
        for precision in ("fp32", "bf16"):
            torch_time, our_time = measure(d_model, layers, precision, arguments.repeats)
            print(
                f"| {d_model} | {layers}+{layers} | {precision} "
                f"| {torch_time * 1e3:.1f} | {our_time * 1e3:.1f} | {torch_time / our_time:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
