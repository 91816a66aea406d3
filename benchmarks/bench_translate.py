"""Translating test_2016_flickr: batched cached search against the tutorials' loop, one run.

Four ways to translate the same sentences with the same trained model:

- ``ours``: ``translate_sentences`` as the CLI runs it, batches of ``--batch-size``
  sentences sorted by length, key/value cache (only the new position runs each step);
- ``batched, no cache``: the same batches, but every step re-runs the decoder over the
  whole prefix (isolates what the cache buys);
- ``loop``: the tutorials' method, one sentence at a time, re-running the decoder over the
  whole prefix at every step;
- ``ours, bf16 autocast``: ours with ``DecodeConfig(precision="bf16")`` (``--precision bf16``
  on the CLI); its outputs may differ from the float32 ones where candidates nearly tie.

Each is run with greedy search and with beam 5 (length penalty 0.6). Reported: sentences/s,
target tokens/s (subword tokens of the outputs, eos included) and the speed-up of ours
over the loop; the script checks that all three produce the same translations and prints
how many differ (none expected for the float32 methods: the cache changes only the amount
of work).

    .venv/bin/python benchmarks/bench_translate.py --checkpoint runs/NAME/best
        [--sentences 1000] [--threads N] [--data-dir ~/data]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch

from transformer_lab.data.multi30k import load_multi30k
from transformer_lab.decoding.sentences import translate_sentences
from transformer_lab.hardware import machine_summary
from transformer_lab.tasks.translation.train import load_translator

METHODS = {
    # name: (batched by --batch-size rather than one sentence at a time, key/value cache, precision)
    "ours": (True, True, "fp32"),
    "ours, bf16 autocast": (True, True, "bf16"),
    "batched, no cache": (True, False, "fp32"),
    "loop": (False, False, "fp32"),
}


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="a translation checkpoint folder")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--sentences", type=int, default=1000, help="the first N sentences of the split")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=0, help="torch threads; 0 keeps torch's default")
    parser.add_argument("--data-dir", default=None, help="folder holding multi30k/ (default: $TRANSFORMER_LAB_DATA)")
    return parser.parse_args()


def main() -> None:
    arguments = parse_arguments()
    if arguments.threads:
        torch.set_num_threads(arguments.threads)
    model, tokenizers, config = load_translator(arguments.checkpoint)
    pairs = load_multi30k(arguments.split, arguments.data_dir)[: arguments.sentences]
    sources = [source for source, _ in pairs]
    print("\n".join(machine_summary()))
    print(f"{len(sources)} sentences of {arguments.split}, checkpoint {arguments.checkpoint}\n")
    print("| search | method | seconds | sentences/s | tokens/s | ours / this | outputs differing from ours |")
    print("|---|---|---:|---:|---:|---:|---:|")
    searches = {
        "greedy": dataclasses.replace(config.decode, strategy="greedy"),
        "beam 5": dataclasses.replace(config.decode, strategy="beam", beam_size=5, length_penalty=0.6),
    }
    for search, decode_config in searches.items():
        outputs: dict[str, list[str]] = {}
        seconds: dict[str, float] = {}
        for method, (batched, use_cache, precision) in METHODS.items():
            method_config = dataclasses.replace(decode_config, use_cache=use_cache, precision=precision)
            batch_size = arguments.batch_size if batched else 1
            start = time.perf_counter()
            outputs[method] = translate_sentences(model, tokenizers, sources, method_config, batch_size=batch_size)
            seconds[method] = time.perf_counter() - start
        for method in METHODS:
            tokens = sum(len(tokenizers.target.encode(text)) + 1 for text in outputs[method])
            differing = sum(mine != theirs for mine, theirs in zip(outputs["ours"], outputs[method]))
            print(
                f"| {search} | {method} | {seconds[method]:.1f} | {len(sources) / seconds[method]:.1f} "
                f"| {tokens / seconds[method]:,.0f} | {seconds[method] / seconds['ours']:.1f}x | {differing} |"
            )


if __name__ == "__main__":
    main()
