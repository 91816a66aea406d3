"""Preparing a couplet or a labelled corpus ten times larger barely grows the peak memory: the files are streamed."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

GROWTH_SCRIPT = """
import sys
from transformer_lab.data import line_stream, pair_stream, prepared_labelled
# Blocks and chunks far smaller than the files, as they are beside a real corpus.
line_stream.BLOCK_BYTES = 1 << 15
pair_stream.CHUNK_PAIRS = prepared_labelled.CHUNK_ROWS = 500
task, out, *files = sys.argv[1:]
if task == "couplet":
    from transformer_lab.tasks.couplet import data as couplet_data
    config = couplet_data.CoupletDataConfig(
        train_files=tuple(files), num_validation=200, add_reversed_pairs=True, cache_dir=out + "-cache"
    )
    couplet_data.corpus_kind(config).prepare(out)
else:
    from transformer_lab.tasks.classification import data as classification_data
    config = classification_data.ClassificationDataConfig(
        train_files=tuple(files), vocab_size=300, min_frequency=1, cache_dir=out + "-cache"
    )
    classification_data.corpus_kind(config).prepare(out)
# VmHWM: this process's own peak (ru_maxrss would keep the forking parent's across exec).
print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""

HAN = [chr(0x4E00 + index) for index in range(3000)]
WORDS = (
    "river stone market engine harvest orbit council striker budget vaccine turbine senate goal "
    "profit galaxy treaty league merger satellite election tournament shares rocket border"
).split()


def peak_bytes(task: str, out: Path, files: list[Path]) -> int:
    """The peak resident memory of a fresh process that prepares ``files`` for ``task`` into ``out``."""
    result = subprocess.run(
        [sys.executable, "-c", GROWTH_SCRIPT, task, str(out), *map(str, files)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")},
    )
    return int(result.stdout.split()[-1]) * 1024


def write_couplets(folder: Path, count: int, seed: int) -> list[Path]:
    """``count`` made-up couplets of 5 to 9 characters (a third with a '，'), and 5 of unequal length, skipped."""
    generator = random.Random(seed)
    uppers, lowers = [], []
    for index in range(count):
        upper = "".join(generator.choice(HAN[:1500]) for _ in range(generator.randint(5, 9)))
        if index % 3 == 0:
            upper = upper[:3] + "，" + upper[3:]
        uppers.append(upper)
        lowers.append("".join(HAN[HAN.index(character) + 1500] if character != "，" else "，" for character in upper))
    for index in range(5):
        lowers[index * (count // 5)] += "长"
    paths = [folder / f"upper-{count}.txt", folder / f"lower-{count}.txt"]
    for path, lines in zip(paths, (uppers, lowers)):
        path.write_text("".join(" ".join(line) + " \n" for line in lines), encoding="utf-8")
    return paths


def test_preparing_ten_times_more_couplets_barely_grows_the_peak_memory(tmp_path: Path) -> None:
    peaks = {
        count: peak_bytes("couplet", tmp_path / f"prepared-{count}", write_couplets(tmp_path, count, seed=3))
        for count in (10_000, 100_000)
    }
    # Read whole, each couplet costs more than a kilobyte (its texts, tuples and lists of ids):
    # 90,000 more were 123 MB more. Streamed, a pass holds a block and a chunk: under 100 bytes a pair.
    assert peaks[100_000] - peaks[10_000] < 90_000 * 100, peaks


def write_labelled_csv(folder: Path, count: int, seed: int) -> Path:
    """``count`` rows of 6 to 14 words of a small vocabulary under one of four labels, as CSV (text,label)."""
    generator = random.Random(seed)
    path = folder / f"labelled-{count}.csv"
    rows = (
        f"{' '.join(generator.choices(WORDS, k=generator.randint(6, 14)))},{generator.choice('abcd')}\n"
        for index in range(count)
    )
    path.write_text("text,label\n" + "".join(rows), encoding="utf-8")
    return path


def test_preparing_ten_times_more_labelled_rows_barely_grows_the_peak_memory(tmp_path: Path) -> None:
    peaks = {
        count: peak_bytes("classification", tmp_path / f"prepared-{count}", [write_labelled_csv(tmp_path, count, 4)])
        for count in (10_000, 100_000)
    }
    # Read whole, each row costs kilobytes (its text, its records, its list of ids): 90,000 more
    # were 471 MB more. Streamed, the first pass keeps a label a row (8 bytes) and the draw of
    # the held-out rows a few more: under 100 bytes a row.
    assert peaks[100_000] - peaks[10_000] < 90_000 * 100, peaks
