"""The real job side by side: a trained checkpoint translating test_2016_flickr, ours against CTranslate2.

Both engines get the same weights (the checkpoint exported with
``transformer_lab.export.export_checkpoint``), the same subword ids and the same job:
every sentence of the split, sorted by length, in batches of ``--batch-size``, beam
``--beam-size``, the checkpoint's length penalty, each row at most the checkpoint's own
``max_len_a * src_len + max_len_b`` new tokens (CTranslate2 takes one limit per batch, so it
gets its longest row's). The engines are timed in alternation (the order rotates every
repeat) on ``--threads`` intra-op threads each; the median of ``--repeats`` runs is
reported, the ratio to CTranslate2, the lines given identically and the BLEU of each.

Ours runs in float32 twice: with the checkpoint's stopping rule (``beam_stop="exact"``: a
sentence stops when its best hypothesis can no longer change) and with
``beam_stop="finished"`` (once beam-size hypotheses have ended), which is CTranslate2's rule
whenever a length penalty is set; both engines use GNMT's length penalty
``((5 + l) / 6) ** alpha``. Then ours int8 (``--precision int8``'s copy) and, where the CPU
multiplies bf16 fast, ours bf16 (``--precision bf16``'s copy), both with the exact stop;
CTranslate2 runs float32 and int8 (quantized on load). Each line's time is divided by both
of CTranslate2's.

    OMP_NUM_THREADS=1 taskset -c 1 .venv/bin/python benchmarks/bench_ctranslate2_real_job.py \\
        --checkpoint runs/mt-short-fp32 [--split test_2016_flickr] [--repeats 3] [--data-dir ~/data]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

from transformer_lab.allocator import configure_allocator
from transformer_lab.data.multi30k import load_multi30k
from transformer_lab.decoding.sentences import translate_sentences
from transformer_lab.evaluation.bleu import corpus_bleu
from transformer_lab.export import export_checkpoint
from transformer_lab.hardware import bf16_support, machine_summary
from transformer_lab.models.bfloat16 import bf16_for_inference
from transformer_lab.models.quantization import int8_for_inference
from transformer_lab.tasks.translation.train import load_translator

Engine = Callable[[list[str]], list[str]]


def ctranslate2_engine(translator, tokenizers, decode_config, batch_size: int, beam_size: int) -> Engine:  # type: ignore[no-untyped-def]
    """Translate like ``translate_sentences``: batches sorted by length, subword tokens in and out."""

    def translate(sentences: list[str]) -> list[str]:
        encoded = [tokenizers.source.encode(sentence) for sentence in sentences]
        order = sorted(range(len(encoded)), key=lambda index: len(encoded[index]))
        outputs = [""] * len(sentences)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            tokens = [[tokenizers.source.id_to_token(token_id) for token_id in encoded[row]] for row in rows]
            limit = max(decode_config.max_new_tokens(len(encoded[row])) for row in rows)
            results = translator.translate_batch(
                tokens,
                beam_size=beam_size,
                length_penalty=decode_config.length_penalty,
                max_decoding_length=limit,
                min_decoding_length=0,
            )
            for row, result in zip(rows, results):
                ids = [tokenizers.target.token_to_id(token) for token in result.hypotheses[0]]
                outputs[row] = tokenizers.target.decode(ids)
        return outputs

    return translate


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="a translation checkpoint folder (or run folder)")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per engine (after one warm-up)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads of torch and of CTranslate2")
    parser.add_argument("--data-dir", default=None, help="folder holding multi30k/ (default: $TRANSFORMER_LAB_DATA)")
    parser.add_argument(
        "--default-allocator",
        action="store_true",
        help="leave glibc's malloc as it is (by default freed memory is kept, as the console script does)",
    )
    arguments = parser.parse_args()
    for name in ("batch_size", "beam_size", "repeats", "threads"):
        if getattr(arguments, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(arguments, name)}")
    return arguments


def main() -> None:
    import ctranslate2

    arguments = parse_arguments()
    torch.set_num_threads(arguments.threads)
    model, tokenizers, config = load_translator(arguments.checkpoint)
    pairs = load_multi30k(arguments.split, arguments.data_dir)
    sources = [source for source, _ in pairs]
    references = [reference for _, reference in pairs]
    decode_config = dataclasses.replace(config.decode, strategy="beam", beam_size=arguments.beam_size)
    print("\n".join(machine_summary()))
    print(configure_allocator(keep=not arguments.default_allocator))
    print(
        f"torch {torch.__version__}, ctranslate2 {ctranslate2.__version__}, {arguments.threads} thread(s) each; "
        f"{len(sources)} sentences of {arguments.split}, beam {arguments.beam_size}, length penalty "
        f"{decode_config.length_penalty}, batches of {arguments.batch_size} sorted by length, "
        f"median of {arguments.repeats}; checkpoint {arguments.checkpoint}\n"
    )
    with tempfile.TemporaryDirectory() as folder:
        exported = export_checkpoint(arguments.checkpoint, Path(folder) / "ct2")
        engines: dict[str, Engine] = {}
        # Ours at each precision by name: the checkpoint's "auto" would be bf16 on some CPUs.
        fp32_config = dataclasses.replace(decode_config, precision="fp32")
        ours = {
            "ours fp32, exact stop": (model, fp32_config),
            "ours fp32, finished stop": (model, dataclasses.replace(fp32_config, beam_stop="finished")),
            "ours int8, exact stop": (int8_for_inference(model), fp32_config),
        }
        if bf16_support(torch.device("cpu")).fast:  # elsewhere bf16 runs ~100x slower
            ours["ours bf16, exact stop"] = (
                bf16_for_inference(model),
                dataclasses.replace(decode_config, precision="bf16"),
            )
        for name, (engine_model, engine_config) in ours.items():
            engines[name] = functools.partial(
                translate_sentences,
                engine_model,
                tokenizers,
                decode_config=engine_config,
                batch_size=arguments.batch_size,
            )
        for compute_type in ("float32", "int8"):
            translator = ctranslate2.Translator(
                str(exported), device="cpu", compute_type=compute_type, inter_threads=1, intra_threads=arguments.threads
            )
            engines[f"ct2 {compute_type}"] = ctranslate2_engine(
                translator, tokenizers, decode_config, arguments.batch_size, arguments.beam_size
            )
        outputs = {name: engine(sources) for name, engine in engines.items()}  # warm-up, and the outputs
        seconds: dict[str, list[float]] = {name: [] for name in engines}
        names = list(engines)
        for repeat in range(arguments.repeats):
            for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
                start = time.perf_counter()
                engines[name](sources)
                seconds[name].append(time.perf_counter() - start)
    median = {name: statistics.median(values) for name, values in seconds.items()}
    print(
        "| engine | seconds (median) | runs | / CTranslate2 fp32 | / CTranslate2 int8 "
        "| lines identical to CTranslate2 fp32's | BLEU |"
    )
    print("|---|---:|---|---:|---:|---:|---:|")
    for name in engines:
        runs = ", ".join(f"{value:.1f}" for value in seconds[name])
        identical = sum(ours == theirs for ours, theirs in zip(outputs[name], outputs["ct2 float32"]))
        print(
            f"| {name} | {median[name]:.2f} | {runs} | {median[name] / median['ct2 float32']:.2f}x "
            f"| {median[name] / median['ct2 int8']:.2f}x "
            f"| {identical} of {len(sources)} | {corpus_bleu(outputs[name], references).score:.2f} |"
        )


if __name__ == "__main__":
    main()
