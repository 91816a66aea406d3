"""Encoding a corpus word by word through the cache against the tokenizer alone, side by side.

Both encode the same lines in chunks of 10,000 (as preparation does), in alternating rounds,
each round from a fresh encoder (so the cache starts empty); their ids are asserted equal.
The lines: the German side of the data-scale corpus (each line two random Multi30k training
sentences), or ``--text FILE``; ``--unique-words`` appends the line's number to each line, the
worst case for the cache (a new word in every line). The tokenizer: the project's byte-level
BPE of 8,000 entries learned from the first 100,000 lines.

    .venv/bin/python benchmarks/bench_word_cache.py --data-dir ~/data [--lines 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHUNK = 10_000


def corpus_lines(multi30k: Path, count: int) -> list[str]:
    german = (multi30k / "train.de").read_text(encoding="utf-8").splitlines()
    generator = random.Random(count)
    return [f"{generator.choice(german)} {generator.choice(german)}" for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, help="folder holding multi30k/ (without --text)")
    parser.add_argument("--text", type=Path, help="a text file to encode, one text a line")
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--unique-words", action="store_true", help="append each line's number to it")
    arguments = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from transformer_lab.data.subword import SubwordTokenizer
    from transformer_lab.data.word_cache import WordCachedEncoder
    from transformer_lab.hardware import machine_summary

    if arguments.text is not None:
        lines = arguments.text.read_text(encoding="utf-8").splitlines()[: arguments.lines]
    elif arguments.data_dir is not None:
        lines = corpus_lines(arguments.data_dir / "multi30k", arguments.lines)
    else:
        parser.error("give --data-dir or --text")
    if arguments.unique_words:
        lines = [f"{line} {number}" for number, line in enumerate(lines)]
    print("\n".join(machine_summary()))
    tokenizer = SubwordTokenizer.train(lines[:100_000], vocab_size=8000)
    chunks = [lines[start : start + CHUNK] for start in range(0, len(lines), CHUNK)]
    words = sum(line.count(" ") + 1 for line in lines)

    seconds: dict[str, list[float]] = {"tokenizer": [], "word cache": []}
    reference: list[list[int]] = []
    encoded_words = 0
    for _ in range(arguments.rounds):
        started = time.perf_counter()
        reference = [ids for chunk in chunks for ids in tokenizer.encode_batch(chunk)]
        seconds["tokenizer"].append(time.perf_counter() - started)
        encoder = WordCachedEncoder(tokenizer)
        started = time.perf_counter()
        cached = [ids for chunk in chunks for ids in encoder.encode_batch(chunk)]
        seconds["word cache"].append(time.perf_counter() - started)
        assert cached == reference, "the word cache's ids differ from the tokenizer's"
        encoded_words = encoder.words_encoded

    tokens = sum(map(len, reference))
    print(
        f"\n{len(lines):,} lines, {words:,} words, {tokens:,} tokens; the cache sent the tokenizer "
        f"{encoded_words:,} words ({encoded_words / words:.1%}); ids identical in every round\n"
    )
    print("| encoder | seconds (median of rounds) | lines/s | tokens/s | ratio |")
    print("|---|---:|---:|---:|---:|")
    base = statistics.median(seconds["tokenizer"])
    for name, times in seconds.items():
        median = statistics.median(times)
        print(f"| {name} | {median:.2f} | {len(lines) / median:,.0f} | {tokens / median:,.0f} | {base / median:.2f}x |")


if __name__ == "__main__":
    main()
