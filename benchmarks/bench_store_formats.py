"""The prepared corpus's numpy memmap arrays against the same ids in an Arrow file (the format of HF `datasets`).

Takes a prepared folder (`transformer-lab prepare translation ... --out DIR`), writes its ids
once more as an Arrow IPC file of two ``list<uint16>`` columns (record batches of 100,000
rows) beside it, and then, each in a fresh process, opens one of them memory-mapped and
reads random batches of pairs into Python lists (what collation takes): numpy slices of
the store; Arrow's ``Table.take`` of the batch; Arrow row slices (``Table.slice``, what
`datasets` does for a row). Reported: file size, time to open, time to read, and the growth
of anonymous memory (RssAnon, not the mapped file).

    .venv/bin/python benchmarks/bench_store_formats.py PREPARED_DIR [--batches 200] [--batch-size 64]

Needs pyarrow (`pip install 'transformer-lab[bench]'`).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from transformer_lab.data.token_store import TokenStore
from transformer_lab.hardware import machine_summary

MODES = ("numpy memmap", "arrow take", "arrow row slices")


def rss_anon() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")


def write_arrow(folder: Path, path: Path) -> None:
    import pyarrow as pa

    store = TokenStore.open(folder)
    schema = pa.schema([("source", pa.list_(pa.uint16())), ("target", pa.list_(pa.uint16()))])
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for start in range(0, len(store), 100_000):
            stop = min(len(store), start + 100_000)
            columns = []
            for column in ("source", "target"):
                lengths = store.lengths(column)[start:stop]
                offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
                values = np.concatenate([store.ids(column, index) for index in range(start, stop)])
                columns.append(pa.ListArray.from_arrays(pa.array(offsets), pa.array(values.astype(np.uint16))))
            writer.write_batch(pa.record_batch(columns, schema=schema))


def measure(mode: str, folder: Path, arrow_path: Path, batches: int, batch_size: int) -> dict[str, float]:
    base = rss_anon()
    start = time.perf_counter()
    if mode == "numpy memmap":
        store = TokenStore.open(folder)
        count = len(store)
    else:
        import pyarrow as pa

        table = pa.ipc.open_file(pa.memory_map(str(arrow_path), "r")).read_all()
        count = table.num_rows
    opened = time.perf_counter() - start
    generator = random.Random(0)
    plan = [[generator.randrange(count) for _ in range(batch_size)] for _ in range(batches)]
    start = time.perf_counter()
    for indices in plan:
        if mode == "numpy memmap":
            rows = (store.rows("source", indices), store.rows("target", indices))
        elif mode == "arrow take":
            taken = table.take(indices)
            rows = (taken.column("source").to_pylist(), taken.column("target").to_pylist())
        else:
            slices = [table.slice(index, 1) for index in indices]
            rows = (
                [part.column("source")[0].as_py() for part in slices],
                [part.column("target")[0].as_py() for part in slices],
            )
        assert len(rows[0]) == batch_size
    return {"open_s": opened, "read_s": time.perf_counter() - start, "rss_anon_growth": rss_anon() - base}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _, _, mode, folder, arrow_path, batches, batch_size = sys.argv
        print(json.dumps(measure(mode, Path(folder), Path(arrow_path), int(batches), int(batch_size))))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a folder written by transformer-lab prepare")
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=64)
    arguments = parser.parse_args()
    print("\n".join(machine_summary()))
    arrow_path = arguments.folder.parent / f"{arguments.folder.name}.arrow"
    if not arrow_path.exists():
        write_arrow(arguments.folder, arrow_path)
    ours = sum(path.stat().st_size for path in arguments.folder.glob("*.ids")) + sum(
        path.stat().st_size for path in arguments.folder.glob("*.offsets")
    )
    sizes = {"numpy memmap": ours, "arrow take": arrow_path.stat().st_size}
    sizes["arrow row slices"] = sizes["arrow take"]
    print(f"\n{len(TokenStore.open(arguments.folder)):,} pairs; {arguments.batches} batches of {arguments.batch_size}")
    print("| store | file | open | read the batches | RssAnon growth |")
    print("|---|---:|---:|---:|---:|")
    for mode in MODES:
        command = [sys.executable, __file__, "--child", mode, str(arguments.folder), str(arrow_path)]
        output = subprocess.run(
            [*command, str(arguments.batches), str(arguments.batch_size)], capture_output=True, text=True, check=True
        )
        result = json.loads(output.stdout.strip().splitlines()[-1])
        print(
            f"| {mode} | {sizes[mode] / 1e6:.1f} MB | {result['open_s'] * 1000:.1f} ms | "
            f"{result['read_s'] * 1000:.0f} ms | {result['rss_anon_growth'] / 2**20:.1f} MiB |"
        )


if __name__ == "__main__":
    main()
