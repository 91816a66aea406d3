"""Memory and start-up of `train translation` on the user's files as the corpus grows, side by side.

Synthetic corpora of realistic sentences: each line joins two random Multi30k training
sentences (German with the same pair's English), at the sizes asked (default 30 k, 250 k
and 1 M pairs). For each size, in a fresh process each:

- ``first``: `transformer-lab train translation --train X.de X.en` with one optimizer step,
  from nothing (the corpus prepared into an empty cache): wall time and peak RSS;
- ``reused``: the same command again, the prepared corpus reused;
- ``baseline`` (with ``--baseline REF``): the same command run by the code of git ``REF``
  (checked out into a temporary worktree) from an empty cache of its own; a ``REF`` from
  before the prepared store reads the corpus whole;
- ``growth``: in-process, the anonymous memory (RssAnon: not the mapped files) after the
  data and the first epoch's plan are built, for the per-pair slope between two sizes.

Each command trains the translation preset's model for one step (``train.max_steps=1``)
with validation cut to 8 pairs, so its wall time is the time to the first step plus a
few seconds of evaluation and checkpointing. Peak RSS is the process's own peak
(its VmHWM: mapped pages it touched included).

    .venv/bin/python benchmarks/bench_data_scale.py --data-dir ~/data \
        [--sizes 30000 250000 1000000] [--baseline REF] [--work /tmp/scale]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ONE_STEP = [
    "--set",
    "train.max_steps=1",
    "--set",
    "train.cooldown_steps=0",
    "--set",
    "train.warmup_steps=1",
    "--set",
    "train.progress_bar=false",
    "--set",
    "data.num_validation=8",
]


def make_corpus(multi30k: Path, pairs: int, stem: Path) -> None:
    """``stem``.de / ``stem``.en: ``pairs`` lines, each two random Multi30k pairs joined by a space."""
    german = (multi30k / "train.de").read_text(encoding="utf-8").splitlines()
    english = (multi30k / "train.en").read_text(encoding="utf-8").splitlines()
    generator = random.Random(pairs)
    with open(f"{stem}.de", "w", encoding="utf-8") as source, open(f"{stem}.en", "w", encoding="utf-8") as target:
        for start in range(0, pairs, 100_000):
            count = min(100_000, pairs - start)
            first = [generator.randrange(len(german)) for _ in range(count)]
            second = [generator.randrange(len(german)) for _ in range(count)]
            source.write("".join(f"{german[a]} {german[b]}\n" for a, b in zip(first, second)))
            target.write("".join(f"{english[a]} {english[b]}\n" for a, b in zip(first, second)))


def child_train(arguments: list[str]) -> None:
    """Run the CLI in this process and print its wall time and peak RSS as one JSON line."""
    from transformer_lab.cli import main

    start = time.perf_counter()
    code = main(arguments)
    seconds = time.perf_counter() - start
    # VmHWM: this process's own peak (ru_maxrss would keep the forking parent's across exec).
    peak = status_kib("VmHWM") * 1024
    print("RESULT " + json.dumps({"code": code, "seconds": seconds, "peak_rss": peak}), flush=True)


def status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def child_growth(stem: str, cache: str) -> None:
    """Build the data and the first epoch's plan as `train` does; print RssAnon (bytes) as one JSON line."""
    from transformer_lab.tasks.translation import data as translation_data
    from transformer_lab.tasks.translation import train as translation_train

    os.environ["TRANSFORMER_LAB_CACHE"] = cache
    # num_validation as in ONE_STEP: the same split settings find the same prepared corpus.
    config = dataclasses.replace(
        translation_train.default_config().data, train_files=(f"{stem}.de", f"{stem}.en"), num_validation=8
    )
    data = translation_data.build_data(config)
    batches = translation_data.epoch_batches(data, config, epoch=0)
    first = batches[0]
    result = {"rss_anon": status_kib("RssAnon") * 1024, "pairs": len(data.train_store), "batch": first.batch_size}
    print("RESULT " + json.dumps(result), flush=True)


def run_child(python_path: Path, cache: Path, arguments: list[str]) -> dict:
    environment = {**os.environ, "PYTHONPATH": str(python_path), "TRANSFORMER_LAB_CACHE": str(cache)}
    return child_result(Path(__file__), arguments, environment)


def child_result(script: Path, arguments: list[str], environment: dict[str, str]) -> dict:
    """Run ``script`` with ``arguments`` in a fresh Python process; the JSON of its ``RESULT`` line."""
    result = subprocess.run(
        [sys.executable, str(script.resolve()), *arguments],
        env=environment,
        capture_output=True,
        text=True,
    )
    for line in result.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise RuntimeError(f"child {arguments} failed ({result.returncode}):\n{result.stderr[-3000:]}")


def run_ddp(processes: int, cache: Path, arguments: list[str]) -> list[dict]:
    """``arguments`` under torchrun with ``processes`` processes: each rank's RESULT."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TRANSFORMER_LAB_CACHE": str(cache)}
    torchrun = Path(sys.executable).with_name("torchrun")
    command = [str(torchrun), "--standalone", f"--nproc-per-node={processes}", str(Path(__file__).resolve())]
    result = subprocess.run([*command, *arguments], env=environment, capture_output=True, text=True)
    # The ranks print at once, so two RESULT lines may share a line of the joined output.
    found = [json.loads(match) for match in re.findall(r"RESULT (\{[^{}]*\})", result.stdout)]
    if len(found) != processes:
        raise RuntimeError(f"torchrun {arguments} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return found


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child-train":
        child_train(sys.argv[2:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--child-growth":
        child_growth(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True, help="folder holding multi30k/")
    parser.add_argument("--sizes", type=int, nargs="+", default=[30_000, 250_000, 1_000_000])
    parser.add_argument("--baseline", default=None, help="a git ref whose code to run side by side (reads whole)")
    parser.add_argument("--baseline-max", type=int, default=250_000, help="the largest size the baseline runs")
    parser.add_argument("--work", type=Path, default=None, help="folder for the corpora (default: a temporary one)")
    parser.add_argument(
        "--ddp", type=int, default=0, help="also run the largest size under torchrun with this many processes"
    )
    arguments = parser.parse_args()

    sys.path.insert(0, str(ROOT / "src"))
    from transformer_lab.hardware import machine_summary

    work = arguments.work or Path(tempfile.mkdtemp(prefix="data-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    baseline_source = None
    if arguments.baseline:
        worktree = work / "baseline"
        if not worktree.exists():
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(worktree), arguments.baseline])
        baseline_source = worktree / "src"
    print("\n".join(machine_summary()))
    rows = []
    growth = {}
    for size in arguments.sizes:
        stem = work / f"corpus-{size}"
        if not Path(f"{stem}.en").exists():
            make_corpus(arguments.data_dir / "multi30k", size, stem)
        text_bytes = Path(f"{stem}.de").stat().st_size + Path(f"{stem}.en").stat().st_size
        cache = work / f"cache-{size}"
        shutil.rmtree(cache, ignore_errors=True)
        command = ["train", "translation", "--train", f"{stem}.de", f"{stem}.en"]
        results = {}
        for name in ("first", "reused"):
            out = work / f"run-{size}-{name}"
            shutil.rmtree(out, ignore_errors=True)
            results[name] = run_child(ROOT / "src", cache, ["--child-train", *command, "--out", str(out), *ONE_STEP])
        if baseline_source is not None and size <= arguments.baseline_max:
            out = work / f"run-{size}-baseline"
            shutil.rmtree(out, ignore_errors=True)
            # A cache of its own, empty as first's was: a REF that prepares would reuse first's corpus.
            baseline_cache = work / f"cache-{size}-baseline"
            shutil.rmtree(baseline_cache, ignore_errors=True)
            results["baseline"] = run_child(
                baseline_source, baseline_cache, ["--child-train", *command, "--out", str(out), *ONE_STEP]
            )
        growth[size] = run_child(ROOT / "src", cache, ["--child-growth", str(stem), str(cache)])["rss_anon"]
        row = {"pairs": size, "text_mb": text_bytes / 1e6, **results, "rss_anon": growth[size]}
        rows.append(row)
        print(json.dumps(row), flush=True)

    print()
    print(
        "| pairs | text | first: to step 1 | first: peak RSS | reused: to step 1 | reused: peak RSS | "
        "baseline: to step 1 | baseline: peak RSS | RssAnon after the plan |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        base = row.get("baseline")
        base_cells = f"{base['seconds']:.0f} s | {base['peak_rss'] / 2**30:.2f} GiB" if base else "- | -"
        print(
            f"| {row['pairs']:,} | {row['text_mb']:.0f} MB | {row['first']['seconds']:.0f} s | "
            f"{row['first']['peak_rss'] / 2**30:.2f} GiB | {row['reused']['seconds']:.1f} s | "
            f"{row['reused']['peak_rss'] / 2**30:.2f} GiB | {base_cells} | {row['rss_anon'] / 2**20:.0f} MiB |"
        )
    if arguments.ddp:
        size = max(arguments.sizes)
        stem = work / f"corpus-{size}"
        cache = work / f"cache-{size}-ddp"
        shutil.rmtree(cache, ignore_errors=True)
        command = ["train", "translation", "--train", f"{stem}.de", f"{stem}.en"]
        for name in ("first", "reused"):
            out = work / f"run-{size}-ddp-{name}"
            shutil.rmtree(out, ignore_errors=True)
            ranks = run_ddp(arguments.ddp, cache, ["--child-train", *command, "--out", str(out), *ONE_STEP])
            prepared = sorted(path.name for path in (cache / "prepared").iterdir() if not path.name.startswith("."))
            print(
                f"\n{arguments.ddp} processes under torchrun, {size:,} pairs, {name}: "
                + ", ".join(f"{rank['seconds']:.0f} s and {rank['peak_rss'] / 2**30:.2f} GiB" for rank in ranks)
                + f" (wall time and peak RSS of each process); prepared folders: {len(prepared)}"
            )
    sizes = sorted(growth)
    if len(sizes) >= 2:
        small, large = sizes[0], sizes[-1]
        slope = (growth[large] - growth[small]) / (large - small)
        print(f"\nanonymous memory that grows with the corpus: {slope:.1f} bytes a pair ({small:,} -> {large:,} pairs)")


if __name__ == "__main__":
    main()
