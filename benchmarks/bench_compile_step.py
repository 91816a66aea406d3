"""Does ``torch.compile`` pay for the decoder step on the CPU? Its best case, measured against eager.

The decoding-speed targets ask for ``torch.compile`` (or TorchScript) of the decoder step "where it pays
(measured, off where it does not)". Our single-position step (``nn/decoder_step.py``)
grows its cache and keeps Python bookkeeping, which would give a compiler graph breaks and
a recompilation whenever a shape changes. So this script measures the compiler's *best*
case instead: the same step written as one pure function with a static cache (buffers of
``--capacity`` positions written with ``index_copy_``, later positions hidden by an
additive mask, so every step has the same shapes), greedy at batch ``--batch-size`` on the
random model of ``bench_ctranslate2.py`` (the translation preset's shape, vocabulary
8,000), compiled with ``fullgraph=True, dynamic=False`` (inductor, one thread). The eager
and the compiled function are timed in alternation, median of ``--repeats`` runs of
``--new-tokens`` steps; the compile time is printed. If the best case does not pay, the
real step would not either.

    OMP_NUM_THREADS=1 taskset -c 1 .venv/bin/python benchmarks/bench_compile_step.py [--batch-size 1] [--repeats 5]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from typing import Callable

import torch
import torch.nn.functional as F
from bench_ctranslate2 import BOS_ID, build_model, random_sources
from torch import Tensor

from transformer_lab.hardware import machine_summary
from transformer_lab.nn import TransformerDecoder, TransformerDecoderLayer

Step = Callable[[Tensor, Tensor], Tensor]


def static_cache_step(model, src_ids: Tensor, capacity: int) -> Step:  # type: ignore[no-untyped-def]
    """One greedy step (token ids [B], position 0-d long) -> log-probs [B, V], over a static cache."""
    decoder = model.transformer.decoder
    assert isinstance(decoder, TransformerDecoder)
    layers = [layer for layer in decoder.layers if isinstance(layer, TransformerDecoderLayer)]
    batch, width = src_ids.shape[0], model.tgt_embedding.embedding.embedding_dim
    heads = layers[0].self_attn.num_heads
    head_dim = width // heads
    scale = 1.0 / math.sqrt(head_dim)
    with torch.no_grad():
        memory = model.encode(src_ids)  # [B, S, E]
        cache = model.new_cache()
        model.decode_step(torch.full((batch, 1), BOS_ID), memory, src_ids, cache)  # fills the cross caches
    cross = [layer_cache.cross_attention.folded_heads() for layer_cache in cache.layers]  # [B*H, Dh, S], [B*H, S, Dh]
    keys = [torch.zeros(batch * heads, capacity, head_dim) for _ in layers]  # [B*H, capacity, Dh]
    values = [torch.zeros(batch * heads, capacity, head_dim) for _ in layers]
    positions = torch.arange(capacity)
    embedding = model.tgt_embedding.embedding.weight.detach()
    table = model.positional_encoding.table
    generator_t = model.generator.weight.detach().t().contiguous()  # [E, V]
    generator_bias = model.generator.bias.detach()

    def weights(linear: torch.nn.Linear) -> tuple[Tensor, Tensor]:
        return linear.weight.detach().t(), linear.bias.detach()

    def step(token_ids: Tensor, position: Tensor) -> Tensor:
        x = embedding.index_select(0, token_ids) * math.sqrt(width) + table.index_select(0, position.view(1))  # [B, E]
        hidden = (positions > position).float().mul(-1e30).view(1, 1, capacity)  # later positions hidden
        for index, layer in enumerate(layers):
            self_attention, cross_attention = layer.self_attn, layer.multihead_attn
            qkv = torch.addmm(self_attention.in_proj_bias, x, self_attention.in_proj_weight.t())  # [B, 3E]
            query, key, value = qkv.view(batch, 3, heads, head_dim).unbind(1)  # three [B, H, Dh]
            keys[index].index_copy_(1, position.view(1), key.reshape(batch * heads, 1, head_dim))
            values[index].index_copy_(1, position.view(1), value.reshape(batch * heads, 1, head_dim))
            scores = torch.baddbmm(
                hidden, query.reshape(batch * heads, 1, head_dim), keys[index].transpose(1, 2), alpha=scale
            )
            context = torch.bmm(torch.softmax(scores, dim=-1), values[index]).view(batch, width)  # [B, E]
            x = layer.norm1(
                x + torch.addmm(weights(self_attention.out_proj)[1], context, weights(self_attention.out_proj)[0])
            )
            keys_t, cross_values = cross[index]
            cross_query = torch.addmm(
                cross_attention.in_proj_bias[:width], x, cross_attention.in_proj_weight[:width].t()
            ).view(batch * heads, 1, head_dim)
            context = torch.bmm(torch.softmax(torch.bmm(cross_query, keys_t) * scale, dim=-1), cross_values)
            out_weight, out_bias = weights(cross_attention.out_proj)
            x = layer.norm2(x + torch.addmm(out_bias, context.view(batch, width), out_weight))
            inner = F.relu(torch.addmm(layer.linear1.bias, x, layer.linear1.weight.t()))
            x = layer.norm3(x + torch.addmm(layer.linear2.bias, inner, layer.linear2.weight.t()))
        if decoder.norm is not None:
            x = decoder.norm(x)
        return torch.log_softmax(torch.addmm(generator_bias, x, generator_t), dim=-1)  # [B, V]

    return step


def decode(step: Step, batch: int, new_tokens: int) -> float:
    """Greedy decoding of ``new_tokens`` steps; ms per step."""
    token_ids = torch.full((batch,), BOS_ID)
    start = time.perf_counter()
    for position in range(new_tokens):
        token_ids = step(token_ids, torch.tensor(position)).argmax(dim=-1)
    return (time.perf_counter() - start) / new_tokens * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--capacity", type=int, default=72, help="static cache positions (>= --new-tokens)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    arguments = parser.parse_args()
    if arguments.capacity < arguments.new_tokens:
        parser.error(f"--capacity must be >= --new-tokens ({arguments.new_tokens}), got {arguments.capacity}")
    torch.set_num_threads(arguments.threads)
    print("\n".join(machine_summary()))
    model = build_model(8000)
    src_ids = random_sources(arguments.batch_size, 24, 8000, seed=arguments.batch_size)
    eager = static_cache_step(model, src_ids, arguments.capacity)
    with torch.no_grad():
        start = time.perf_counter()
        compiled = torch.compile(eager, fullgraph=True, dynamic=False)
        decode(compiled, arguments.batch_size, 2)
        compile_seconds = time.perf_counter() - start
        times: dict[str, list[float]] = {"eager": [], "compiled": []}
        for repeat in range(arguments.repeats):
            order = [("eager", eager), ("compiled", compiled)]
            for name, step in order if repeat % 2 == 0 else order[::-1]:
                times[name].append(decode(step, arguments.batch_size, arguments.new_tokens))
    eager_ms, compiled_ms = (statistics.median(times[name]) for name in ("eager", "compiled"))
    print(
        f"batch {arguments.batch_size}, {arguments.new_tokens} tokens, torch {torch.__version__}, "
        f"{arguments.threads} thread(s), median of {arguments.repeats}: eager {eager_ms:.2f} ms/step, "
        f"compiled {compiled_ms:.2f} ms/step ({eager_ms / compiled_ms:.2f}x), compile {compile_seconds:.1f} s"
    )


if __name__ == "__main__":
    main()
