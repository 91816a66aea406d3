"""Greedy decoding with the key/value cache against the no-cache loop: same model, same run.

One random Seq2SeqTransformer (default d_model 256, 8 heads, 3+3 layers, feed-forward
1024, vocabulary 1000: a mid-size model), in eval mode. Two measurements:

1. End to end: `greedy_search` of exactly `--new-tokens` tokens (a logits processor
   forbids eos, so no row stops early) for each batch size, `use_cache=True` against
   `use_cache=False` (the tutorials' loop, which re-runs the decoder on the whole prefix
   at every step). The two are timed in alternation, repeated, and the median is
   reported with the speed-up = no-cache time / cache time. Both must produce the same
   tokens; the script checks it.
2. Time per new token as the prefix grows: one `decode_step` at prefix length t (bos
   included), cached (one position through the decoder, keys/values appended) against
   uncached (all t positions), at batch size `--profile-batch-size`; the median over
   repeats for every t, printed at a few lengths and drawn into a PNG.

CPU timings on a shared machine are noisy: compare the two columns of one run, never
figures of different runs. On cores shared with other jobs pass `--threads 1`: with
torch's default of one thread per core, a busy core stalls every operation (measured
4-55x slower on the team's 2-core machine while another training job ran).

    .venv/bin/python benchmarks/bench_decode.py [--repeats 5] [--new-tokens 64]
        [--batch-sizes 1 32] [--profile-repeats 15] [--d-model 256] [--layers 3]
        [--threads N] [--figure PATH | --no-figure]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

import torch
from torch import Tensor

from transformer_lab.allocator import configure_allocator
from transformer_lab.decoding import greedy_search
from transformer_lab.hardware import machine_summary
from transformer_lab.models import Seq2SeqTransformer

PAD_ID, BOS_ID, EOS_ID = 0, 2, 3
FIRST_TOKEN = 4  # the ids below are the specials
DEFAULT_FIGURE = Path(__file__).resolve().parent.parent / "docs" / "figures" / "decode_time_per_token.png"
TABLE_LENGTHS = (8, 16, 32, 64)


def thread_count() -> str:
    """torch's intra-op thread count, as words ("1 thread", "2 threads")."""
    threads = torch.get_num_threads()
    return f"{threads} thread" + ("" if threads == 1 else "s")


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work, so that the clock measures it (no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def forbid_eos(step: int, prefix_ids: Tensor, log_probs: Tensor) -> Tensor:
    """A logits processor that makes eos impossible, so every run takes max_len steps.

    Shape:
        prefix_ids [N, t], log_probs [N, V] -> [N, V].
    """
    return log_probs.index_fill(1, torch.tensor([EOS_ID], device=log_probs.device), -math.inf)


def build_model(arguments: argparse.Namespace, device: torch.device) -> Seq2SeqTransformer:
    """The random mid-size model both paths decode with."""
    model = Seq2SeqTransformer(
        src_vocab_size=arguments.vocab_size,
        tgt_vocab_size=arguments.vocab_size,
        d_model=arguments.d_model,
        nhead=arguments.nhead,
        num_encoder_layers=arguments.layers,
        num_decoder_layers=arguments.layers,
        dim_feedforward=arguments.dim_feedforward,
        dropout=0.0,
        max_len=max(arguments.source_length, arguments.new_tokens + 1),
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
    )
    return model.to(device).eval()


def random_ids(rows: int, length: int, vocab_size: int, seed: int, device: torch.device) -> Tensor:
    """Ordinary (non-special) token ids, without padding.

    Shape:
        returns LongTensor[rows, length].
    """
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(FIRST_TOKEN, vocab_size, (rows, length), generator=generator).to(device)


def time_greedy(model: Seq2SeqTransformer, src_ids: Tensor, new_tokens: int, use_cache: bool) -> tuple[float, Tensor]:
    """Seconds for one greedy decoding of exactly `new_tokens` tokens, and its ids.

    Shape:
        src_ids [B, S] -> (seconds, ids [B, new_tokens]).
    """
    synchronize(src_ids.device)
    start = time.perf_counter()
    output = greedy_search(model, src_ids, new_tokens, use_cache=use_cache, logits_processor=forbid_eos)
    synchronize(src_ids.device)
    return time.perf_counter() - start, output.best_ids


def measure_end_to_end(
    model: Seq2SeqTransformer, src_ids: Tensor, new_tokens: int, repeats: int
) -> tuple[float, float]:
    """Median seconds (no cache, cache) of a whole greedy decoding, timed in alternation."""
    times: dict[bool, list[float]] = {True: [], False: []}
    _, cached_ids = time_greedy(model, src_ids, new_tokens, use_cache=True)  # warm-up
    _, uncached_ids = time_greedy(model, src_ids, new_tokens, use_cache=False)
    if cached_ids.shape != (src_ids.size(0), new_tokens) or not torch.equal(cached_ids, uncached_ids):
        raise RuntimeError("the cached and uncached greedy searches disagree: fix that before timing them")
    for repeat in range(repeats):
        # Alternate which path goes first, so that a slow patch of the machine hits both.
        order = (True, False) if repeat % 2 == 0 else (False, True)
        for use_cache in order:
            seconds, _ = time_greedy(model, src_ids, new_tokens, use_cache)
            times[use_cache].append(seconds)
    return statistics.median(times[False]), statistics.median(times[True])


def measure_per_token(
    model: Seq2SeqTransformer, src_ids: Tensor, tgt_ids: Tensor, repeats: int
) -> tuple[list[float], list[float]]:
    """Median seconds of one decode_step at each prefix length 1..T: (no cache, cache).

    Shape:
        src_ids [B, S], tgt_ids [B, T] (bos first) -> two lists of T floats.
    """
    length = tgt_ids.size(1)
    uncached: list[list[float]] = [[] for _ in range(length)]
    cached: list[list[float]] = [[] for _ in range(length)]
    device = src_ids.device
    with torch.no_grad():
        memory = model.encode(src_ids)  # [B, S, D]
        for repeat in range(repeats + 1):  # the first pass is a warm-up
            cache = model.new_cache()
            for prefix_length in range(1, length + 1):
                prefix_ids = tgt_ids[:, :prefix_length]  # [B, t]
                for use_cache in (True, False) if prefix_length % 2 else (False, True):
                    synchronize(device)
                    start = time.perf_counter()
                    model.decode_step(prefix_ids, memory, src_ids, cache=cache if use_cache else None)
                    synchronize(device)
                    if repeat > 0:
                        (cached if use_cache else uncached)[prefix_length - 1].append(time.perf_counter() - start)
    return [statistics.median(row) for row in uncached], [statistics.median(row) for row in cached]


def save_figure(path: Path, uncached: list[float], cached: list[float], title: str) -> None:
    """Draw milliseconds per new token against the prefix length, both paths, into a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = list(range(1, len(uncached) + 1))
    figure, axes = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    axes.plot(lengths, [seconds * 1e3 for seconds in uncached], label="no cache (whole prefix)")
    axes.plot(lengths, [seconds * 1e3 for seconds in cached], label="key/value cache (one position)")
    axes.set_xlabel("prefix length t (bos included)")
    axes.set_ylabel("ms per new token (median)")
    axes.set_title(title, fontsize=9)
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--nhead", type=int, default=8)
    parser.add_argument("--layers", type=int, default=3, help="encoder layers = decoder layers")
    parser.add_argument("--dim-feedforward", type=int, default=1024)
    parser.add_argument("--vocab-size", type=int, default=1000)
    parser.add_argument("--source-length", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--profile-batch-size", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5, help="end-to-end decodings per path and batch size")
    parser.add_argument("--profile-repeats", type=int, default=15, help="passes over the prefix lengths")
    parser.add_argument("--threads", type=int, default=0, help="torch threads; 0 keeps torch's default")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--figure", type=Path, default=DEFAULT_FIGURE)
    parser.add_argument("--no-figure", action="store_true")
    parser.add_argument(
        "--default-allocator",
        action="store_true",
        help="leave glibc's malloc as it is (by default freed memory is kept, as the console script does)",
    )
    return parser.parse_args()


def main() -> None:
    arguments = parse_arguments()
    if arguments.threads:
        torch.set_num_threads(arguments.threads)
    torch.manual_seed(0)
    device = torch.device(arguments.device)
    model = build_model(arguments, device)
    parameters = sum(parameter.numel() for parameter in model.parameters())
    layers = f"{arguments.layers}+{arguments.layers}"
    print("\n".join(machine_summary(device)))
    print(configure_allocator(keep=not arguments.default_allocator))
    print(f"device {device}, {thread_count()}")
    print(
        f"model: d_model {arguments.d_model}, {arguments.nhead} heads, {layers} layers, "
        f"feed-forward {arguments.dim_feedforward}, vocabulary {arguments.vocab_size}, "
        f"{parameters / 1e6:.1f} M parameters, eval mode"
    )
    print(
        f"source length {arguments.source_length}, greedy search of exactly {arguments.new_tokens} "
        f"new tokens (eos forbidden), median of {arguments.repeats}, cache and no cache alternated\n"
    )

    print("| batch | new tokens | no cache ms | cache ms | speed-up (no cache / cache) |")
    print("|---:|---:|---:|---:|---:|")
    for batch_size in arguments.batch_sizes:
        src_ids = random_ids(batch_size, arguments.source_length, arguments.vocab_size, seed=batch_size, device=device)
        uncached_seconds, cached_seconds = measure_end_to_end(model, src_ids, arguments.new_tokens, arguments.repeats)
        print(
            f"| {batch_size} | {arguments.new_tokens} | {uncached_seconds * 1e3:.1f} | "
            f"{cached_seconds * 1e3:.1f} | {uncached_seconds / cached_seconds:.2f}x |",
            flush=True,
        )

    batch_size = arguments.profile_batch_size
    src_ids = random_ids(batch_size, arguments.source_length, arguments.vocab_size, seed=1, device=device)
    tgt_ids = random_ids(batch_size, arguments.new_tokens, arguments.vocab_size, seed=2, device=device)
    tgt_ids[:, 0] = BOS_ID
    uncached, cached = measure_per_token(model, src_ids, tgt_ids, arguments.profile_repeats)
    print(
        f"\ntime of one decoding step (one new token per sentence), batch {batch_size}, "
        f"by prefix length, median of {arguments.profile_repeats}\n"
    )
    print("| prefix length | no cache ms/token | cache ms/token | ratio (no cache / cache) |")
    print("|---:|---:|---:|---:|")
    for length in TABLE_LENGTHS:
        if length <= len(cached):
            print(
                f"| {length} | {uncached[length - 1] * 1e3:.2f} | {cached[length - 1] * 1e3:.2f} | "
                f"{uncached[length - 1] / cached[length - 1]:.2f}x |"
            )
    if not arguments.no_figure:
        title = (
            f"greedy decoding step, batch {batch_size}, d_model {arguments.d_model}, {layers} layers, "
            f"{device.type}, {thread_count()}"
        )
        save_figure(arguments.figure, uncached, cached, title)
        print(f"\nfigure: {arguments.figure}")


if __name__ == "__main__":
    main()
