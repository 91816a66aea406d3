"""Training throughput with DistributedDataParallel: 1 process against 2 under torchrun.

Trains the copy task (its preset: d_model 64, 4 heads, 2+2 layers, batches of 64
sequences per process) with `transformer-lab train copy` for `--steps` optimizer steps in
each configuration, one after the other:

- `1x1`: one plain process, 1 thread;
- `1x2`: one plain process, 2 threads (the same cores as 2 processes);
- `2x1`: `torchrun --standalone --nproc-per-node 2`, 1 thread per process, gloo on the CPU.

The figure is the Trainer's own tokens/s (target tokens, padding excluded, of all ranks
together: under DDP each logged window counts the global batch), read from each run's
`metrics.jsonl`: the median over the logged windows after the first (warm-up). Under DDP
each process keeps its batch of 64, so a step trains on twice the data; the comparison is
tokens per second, not steps. Evaluation runs only once, after the last step, outside the
timed windows. The script prints one line per configuration and the ratios of `2x1` to
the others (> 1: the two processes are faster).

On a 2-core machine expect little gain: the point is that the overhead of DDP (the
all-reduce of every gradient, one small all-reduce per batch for the loss) is small.
CPU timings on a shared machine are noisy: compare configurations of one run only.

    .venv/bin/python benchmarks/bench_ddp.py [--steps 300] [--log-every 25]
        [--configs 1x1 1x2 2x1] [--out runs/bench-ddp] [--task copy]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from transformer_lab.hardware import machine_summary
from transformer_lab.training.metrics_log import read_metrics

CONFIGURATIONS = ("1x1", "1x2", "2x1")


def command_for(
    configuration: str, task: str, out: Path, steps: int, log_every: int
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one configuration ("PROCESSESxTHREADS")."""
    processes, threads = (int(part) for part in configuration.split("x"))
    overrides = [
        f"train.max_steps={steps}",
        "train.epochs=0",
        f"train.log_every_steps={log_every}",
        # Evaluate once, after the last step; keep the final test decode short.
        f"train.eval_every_steps={steps}",
        "train.progress_bar=false",
        "data.num_validation=20",
        "data.num_test=20",
    ]
    arguments = ["-m", "transformer_lab", "train", task, "--out", str(out)]
    for override in overrides:
        arguments += ["--set", override]
    if processes == 1:
        command = [sys.executable, *arguments]
    else:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={processes}",
            *arguments,
        ]
    environment = dict(os.environ, OMP_NUM_THREADS=str(threads))
    return command, environment


def tokens_per_second(out: Path) -> tuple[float, int]:
    """Median tokens/s of the logged training windows after the first, and their count."""
    rows = read_metrics(out / "metrics.jsonl")
    values = [row["tokens_per_second"] for row in rows if row.get("event") == "train"][1:]
    if not values:
        raise ValueError(
            f"{out / 'metrics.jsonl'}: expected at least 2 training rows, got {len(values) + 1}; raise --steps"
        )
    return statistics.median(values), len(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps per configuration")
    parser.add_argument("--log-every", type=int, default=25, help="steps per timed window (train.log_every_steps)")
    parser.add_argument("--configs", nargs="+", choices=CONFIGURATIONS, default=list(CONFIGURATIONS))
    parser.add_argument("--task", choices=("copy", "reverse", "sort"), default="copy")
    parser.add_argument(
        "--out", type=Path, default=None, help="keep the run folders here (default: a temporary folder)"
    )
    arguments = parser.parse_args()
    if arguments.steps < 2 * arguments.log_every:
        parser.error(f"--steps must be at least 2 x --log-every, got {arguments.steps} and {arguments.log_every}")

    root = arguments.out or Path(tempfile.mkdtemp(prefix="bench-ddp-"))
    print("\n".join(machine_summary()))
    print(f"task {arguments.task}, {arguments.steps} steps, windows of {arguments.log_every} steps")
    results: dict[str, float] = {}
    for configuration in arguments.configs:
        out = root / configuration
        if out.exists():
            shutil.rmtree(out)
        command, environment = command_for(configuration, arguments.task, out, arguments.steps, arguments.log_every)
        start = time.perf_counter()
        completed = subprocess.run(command, env=environment, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if completed.returncode != 0:
            print(completed.stdout, completed.stderr, sep="\n", file=sys.stderr)
            print(f"{configuration}: failed with exit code {completed.returncode}", file=sys.stderr)
            return 1
        value, windows = tokens_per_second(out)
        results[configuration] = value
        processes, threads = configuration.split("x")
        print(
            f"{processes} process(es) x {threads} thread(s): {value:9.0f} tokens/s "
            f"(median of {windows} windows; {wall:.0f} s with start-up and evaluation)"
        )
    if "2x1" in results:
        for other in ("1x1", "1x2"):
            if other in results:
                print(f"ratio 2x1 / {other}: {results['2x1'] / results[other]:.2f}")
    if arguments.out is None:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
