"""Training speed and peak memory under three settings of glibc's allocator, side by side.

torch takes a CPU tensor's memory from the C library. How glibc serves the large blocks
of a training step decides both the peak RSS and how many pages are faulted in again:

- ``keep``: blocks up to 32 MiB from the heap and up to 256 MiB of free heap kept
  (``transformer_lab.allocator.keep_freed_memory``: what the console script sets for
  decoding);
- ``default``: glibc's own rule (a 128 KiB mmap threshold that grows to the largest block
  freed so far, up to 32 MiB);
- ``return``: every block from 128 KiB mapped for itself and returned when freed (the
  threshold fixed at 128 KiB).

Asked for by name only, transparent huge pages under two of those (fewer page faults for
the same bytes): ``keep-thp`` and ``return-thp`` (torch's ``THP_MEM_ALLOC_ENABLE=1``:
blocks from 2 MiB advised as huge pages), ``return-hugetlb`` (glibc's
``glibc.malloc.hugetlb=1`` tunable).

Each setting is a fresh process that runs `transformer-lab train translation` for
``--steps`` steps on Multi30k (the preset's model and batches; the prepared corpus is
reused from the cache after the first run), set by glibc's environment variables, so
the code under test is the command as a user runs it. Settings alternate in rounds.
Reported: the Trainer's tokens/s (median of its logged windows, the first left out) and
the process's peak RSS (VmHWM). With ``--baseline REF`` the code of git ``REF`` (checked
out into a temporary worktree) runs each setting too, in the same rounds.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_train_allocator.py --data-dir ~/data \
        [--steps 60] [--rounds 2] [--settings keep default return] [--baseline REF]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_data_scale import child_result, status_kib

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = {
    "keep": {"MALLOC_MMAP_THRESHOLD_": str(32 * 1024 * 1024), "MALLOC_TRIM_THRESHOLD_": str(256 * 1024 * 1024)},
    # glibc's default top pad: tuning it to its own value leaves glibc's rule in force.
    "default": {"MALLOC_TOP_PAD_": str(128 * 1024)},
    "return": {"MALLOC_MMAP_THRESHOLD_": str(128 * 1024)},
}
DEFAULT_SETTINGS = list(SETTINGS)
SETTINGS |= {
    "return-thp": {"MALLOC_MMAP_THRESHOLD_": str(128 * 1024), "THP_MEM_ALLOC_ENABLE": "1"},
    "keep-thp": {
        "MALLOC_MMAP_THRESHOLD_": str(32 * 1024 * 1024),
        "MALLOC_TRIM_THRESHOLD_": str(256 * 1024 * 1024),
        "THP_MEM_ALLOC_ENABLE": "1",
    },
    "return-hugetlb": {"MALLOC_MMAP_THRESHOLD_": str(128 * 1024), "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"},
}


def child(arguments: list[str]) -> None:
    """Run the CLI in this process and print its peak RSS and the Trainer's tokens/s windows as one JSON line."""
    from transformer_lab.cli import main

    out = Path(arguments[arguments.index("--out") + 1])
    start = time.perf_counter()
    code = main(arguments)
    seconds = time.perf_counter() - start
    if code != 0:
        raise SystemExit(code)
    peak = status_kib("VmHWM") * 1024
    windows = []
    for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if "tokens_per_second" in record:
            windows.append(record["tokens_per_second"])
    result = {"code": code, "seconds": seconds, "peak_rss": peak, "tokens_per_second": windows}
    print("RESULT " + json.dumps(result), flush=True)


def run_setting(setting: str, data_dir: Path, steps: int, work: Path, cache: Path, source: Path) -> dict:
    out = Path(tempfile.mkdtemp(dir=work)) / "run"
    environment = {
        **{key: value for key, value in os.environ.items() if not key.startswith("MALLOC_")},
        **SETTINGS[setting],
        "PYTHONPATH": str(source),
        "TRANSFORMER_LAB_CACHE": str(cache),
    }
    command = ["train", "translation", "--data-dir", str(data_dir), "--out", str(out)]
    for override in (
        f"train.max_steps={steps}",
        "train.cooldown_steps=0",
        "train.log_every_steps=5",
        "train.progress_bar=false",
        "data.num_validation=8",
    ):
        command += ["--set", override]
    try:
        return child_result(Path(__file__), ["--child", *command], environment)
    except RuntimeError as error:
        raise RuntimeError(f"{setting}: {error}") from None


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True, help="folder holding multi30k/")
    parser.add_argument("--steps", type=int, default=60, help="training steps of each run")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each setting, alternating")
    parser.add_argument("--settings", nargs="+", choices=tuple(SETTINGS), default=DEFAULT_SETTINGS)
    parser.add_argument("--baseline", default=None, help="a git ref whose code to run side by side")
    arguments = parser.parse_args()
    if arguments.steps < 15:
        # The Trainer logs every 5 steps and the first window is left out: fewer leave no rate to report.
        parser.error(f"--steps: expected at least 15 (three 5-step windows), got {arguments.steps}")
    from transformer_lab.hardware import machine_summary

    print("\n".join(machine_summary()), flush=True)
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        cache = work / "cache"
        sources = {"": ROOT / "src"}
        if arguments.baseline:
            worktree = work / "baseline"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(worktree), arguments.baseline])
            sources[f" ({arguments.baseline})"] = worktree / "src"
        try:
            # The first run prepares the corpus once (the store's format is the same for both codes).
            run_setting(arguments.settings[0], arguments.data_dir, 1, work, cache, ROOT / "src")
            found: dict[str, list[dict]] = {setting + label: [] for setting in arguments.settings for label in sources}
            for _ in range(arguments.rounds):
                for setting in arguments.settings:
                    for label, source in sources.items():
                        result = run_setting(setting, arguments.data_dir, arguments.steps, work, cache, source)
                        found[setting + label].append(result)
                        print(setting + label, json.dumps(result), file=sys.stderr, flush=True)
        finally:
            if arguments.baseline:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(work / "baseline")])
    reference = None
    print("| allocator (code) | tokens/s (median of windows) | ratio | peak RSS |")
    print("|---|---:|---:|---:|")
    for name, runs in found.items():
        speed = statistics.median(value for run in runs for value in run["tokens_per_second"][1:])
        reference = reference or speed
        peak = max(run["peak_rss"] for run in runs) / 2**30
        print(f"| {name} | {speed:,.0f} | {speed / reference:.3f} | {peak:.2f} GiB |")


if __name__ == "__main__":
    main()
