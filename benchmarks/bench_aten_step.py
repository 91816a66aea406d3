"""Would a compiled decoder step close the gap to CTranslate2? The step in C++ against ATen, measured.

The project's float32 decoding targets (ours <= 1.3x CTranslate2's time at batch 1, <= 1.0x at batch
32 and for beam 5) and its cached/uncached target (>= 5x at batch 1) were left unmet by
eager PyTorch. ``torch.compile``'s best case bought 1.06-1.25x (``bench_compile_step.py``).
The other candidate left was a compiled step: this script builds one.
``aten_decoder_step.cpp`` is ``nn/decoder_step.py``'s float32 path line for line, the same
ATen operators on the same tensors, compiled with ``torch.utils.cpp_extension`` (g++ and
ninja; the first build takes ~25 s, later runs reuse it), so no Python runs between the
operators of a step. What is left between it and CTranslate2 is then the operators
themselves, not the interpreter.

Engines, alternated in one process on the random preset-shaped model of
``bench_ctranslate2.py`` (eos forbidden, so every run decodes exactly the requested tokens),
median of ``--repeats`` runs, ms per step of the whole batch:

- ours: the searches as they are (``DecoderStep`` in Python);
- ours + C++ step: the same searches with the step replaced by the compiled one (its ids must
  equal ours: checked);
- CTranslate2 float32, the same weights (its ids equal ours: checked).

A last line times greedy at batch 1 with ``use_cache=False`` (the tutorials' loop), for the
cached/uncached ratio with either step.

    OMP_NUM_THREADS=1 taskset -c 1 .venv/bin/python benchmarks/bench_aten_step.py [--repeats 7]

Needs the ``[bench]`` extra's ctranslate2, a C++ compiler and ninja.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from unittest import mock

import torch
import torch.nn.functional as F
from bench_ctranslate2 import (
    CASES,
    FIRST_TOKEN,
    SPECIALS,
    Case,
    Decoder,
    build_model,
    ctranslate2_decoder,
    decode_ours,
    random_sources,
    time_case,
)
from torch import Tensor
from torch.utils.cpp_extension import load

from transformer_lab.allocator import configure_allocator
from transformer_lab.decoding import greedy_search
from transformer_lab.export import export_model
from transformer_lab.hardware import machine_summary
from transformer_lab.models import seq2seq
from transformer_lab.nn import DecoderCache, TransformerDecoder, TransformerDecoderLayer
from transformer_lab.nn.decoder_step import DecoderStep

SOURCE = Path(__file__).resolve().parent / "aten_decoder_step.cpp"


def build_extension():  # type: ignore[no-untyped-def]
    """Compile (or reuse) the C++ step; returns the loaded module."""
    start = time.perf_counter()
    extension = load(name="aten_decoder_step", sources=[str(SOURCE)], extra_cflags=["-O2"])
    print(f"C++ step: built or loaded in {time.perf_counter() - start:.1f} s")
    return extension


def aten_step_class(extension) -> type[DecoderStep]:  # type: ignore[no-untyped-def]
    """A DecoderStep whose float32 call is the compiled function (other dtypes keep the Python step)."""

    class AtenDecoderStep(DecoderStep):
        def __init__(self, decoder: TransformerDecoder) -> None:
            super().__init__(decoder)
            layers = [layer for layer in decoder.layers if isinstance(layer, TransformerDecoderLayer)]
            if any(layer.activation is not F.relu for layer in layers):
                raise ValueError("the C++ step is written for relu feed-forward layers")
            self.parameters: list[Tensor] = []
            for layer in layers:
                self_attention, cross_attention = layer.self_attn, layer.multihead_attn
                width = self_attention.embed_dim
                assert self_attention.in_proj_bias is not None and cross_attention.in_proj_bias is not None
                self.parameters += [
                    tensor.detach()
                    for tensor in (
                        self_attention.in_proj_weight.t(),  # [E, 3E]
                        self_attention.in_proj_bias,
                        self_attention.out_proj.weight.t(),
                        self_attention.out_proj.bias,
                        cross_attention.in_proj_weight[:width].t(),  # [E, E]: the query's rows
                        cross_attention.in_proj_bias[:width],
                        cross_attention.out_proj.weight.t(),
                        cross_attention.out_proj.bias,
                        layer.linear1.weight.t(),  # [E, F]
                        layer.linear1.bias,
                        layer.linear2.weight.t(),  # [F, E]
                        layer.linear2.bias,
                        layer.norm1.weight,
                        layer.norm1.bias,
                        layer.norm2.weight,
                        layer.norm2.bias,
                        layer.norm3.weight,
                        layer.norm3.bias,
                    )
                ]
            self.norm_first = layers[0].norm_first
            self.eps = layers[0].norm1.eps
            self.extension = extension

        def __call__(self, x: Tensor, cache: DecoderCache, memory_key_padding_mask: Tensor | None) -> Tensor:
            """Shape: x ``[B, E]`` -> ``[B, E]``."""
            if x.dtype != torch.float32:
                return super().__call__(x, cache, memory_key_padding_mask)
            cached = cache.length
            key_buffers, value_buffers, cross_keys_t, cross_values = [], [], [], []
            for layer_cache in cache.layers:
                # The cache's own bookkeeping, done here because the new key is written in C++:
                # room for one more position, then the buffers themselves (private to nn/cache.py).
                own = layer_cache.self_attention
                if cached + 1 > own.capacity:
                    own._grow(cached + 1)
                key_buffers.append(own._key_buffer)  # [B, H, C, Dh]
                value_buffers.append(own._value_buffer)
                keys_t, values = layer_cache.cross_attention.folded_heads()  # [B*H, Dh, S], [B*H, S, Dh]
                cross_keys_t.append(keys_t)
                cross_values.append(values)
            norm = self.norm
            out = self.extension.decoder_step(
                x,
                self.parameters,
                key_buffers,
                value_buffers,
                cached,
                cross_keys_t,
                cross_values,
                self._cross_mask(memory_key_padding_mask, x.dtype),  # [B*H, 1, S] or None
                None if norm is None else norm.weight.detach(),
                None if norm is None else norm.bias.detach(),
                self.num_heads,
                self.norm_first,
                self.eps,
            )  # [B, E]
            for layer_cache in cache.layers:
                layer_cache.self_attention._length = cached + 1
            return out

    return AtenDecoderStep


@contextmanager
def compiled_step(step_class: type[DecoderStep]) -> Iterator[None]:
    """Seq2SeqTransformer builds ``step_class`` instead of DecoderStep inside this block."""
    with mock.patch.object(seq2seq, "DecoderStep", step_class):
        yield


def main() -> None:
    import ctranslate2

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per engine and case (after one warm-up)")
    arguments = parser.parse_args()
    if arguments.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {arguments.repeats}")
    torch.set_num_threads(1)
    print("\n".join(machine_summary()))
    print(configure_allocator(keep=True))
    step_class = aten_step_class(build_extension())
    vocab_size, source_length = 8000, 24
    model = build_model(vocab_size)
    tokens = SPECIALS + [f"w{token_id}" for token_id in range(FIRST_TOKEN, vocab_size)]

    def with_compiled_step(src_ids: Tensor, case: Case) -> list[list[int]]:
        with compiled_step(step_class):
            return decode_ours(model, src_ids, case)

    with tempfile.TemporaryDirectory() as folder:
        out_dir = export_model(model, tokens, tokens, Path(folder) / "ct2")
        translator = ctranslate2.Translator(
            str(out_dir), device="cpu", compute_type="float32", inter_threads=1, intra_threads=1
        )
        engines: dict[str, Decoder] = {
            "ours": lambda src_ids, case: decode_ours(model, src_ids, case),
            "ours + C++ step": with_compiled_step,
            "ct2 float32": ctranslate2_decoder(translator, tokens),
        }
        print(
            f"torch {torch.__version__}, ctranslate2 {ctranslate2.__version__}, one thread each, "
            f"median of {arguments.repeats} runs"
        )
        print()
        columns = ["case", "ours", "ours + C++ step", "ct2 fp32", "ours / ct2", "ours + C++ step / ct2"]
        print("| " + " | ".join([*columns, "C++ speed-up", "ids = ours"]) + " |")
        print("|---|---:|---:|---:|---:|---:|---:|:---:|")
        for case in CASES:
            src_ids = random_sources(case.batch_size, source_length, vocab_size, seed=case.batch_size)
            timing = time_case(engines, src_ids, case, arguments.repeats)
            ms = timing.ms_per_step
            same = all(timing.outputs[name] == timing.outputs["ours"] for name in ("ours + C++ step", "ct2 float32"))
            ours, compiled, reference = ms["ours"], ms["ours + C++ step"], ms["ct2 float32"]
            print(
                f"| {case.name} | {ours:.2f} | {compiled:.2f} | {reference:.2f} | {ours / reference:.2f}x | "
                f"{compiled / reference:.2f}x | {ours / compiled:.2f}x | {'yes' if same else 'NO'} |"
            )
    src_ids = random_sources(1, source_length, vocab_size, seed=1)
    uncached: list[float] = []
    for _ in range(max(3, arguments.repeats // 2)):
        start = time.perf_counter()
        greedy_search(model, src_ids, 64, use_cache=False)
        uncached.append(time.perf_counter() - start)
    print()
    print(
        f"greedy, batch 1, 64 tokens, use_cache=False: {1e3 * statistics.median(uncached) / 64:.2f} ms/step "
        "(divide by the first row's cached figures for the cached/uncached ratio)"
    )


if __name__ == "__main__":
    main()
