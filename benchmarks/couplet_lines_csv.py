"""Build a Chinese text-classification task from the couplet data: is a line an upper (上联) or a lower (下联) line?

The proof that the generic classification machinery works on Chinese text
with string labels: three CSV files with the columns `text,label`, one line of a couplet
a row, labelled "上联" (an upper line, `in.txt`) or "下联" (a lower line, `out.txt`).

- train.csv / valid.csv: from `couplet/train_couplet_machine` (90,889 pairs). The
  validation rows are carved out by pair, seeded (`--validation-fraction`, `--seed`):
  both lines of a validation pair are in valid.csv, so no validation line has its partner
  in training.
- test.csv: the 4,000 pairs of the wb14123 test set (`couplet/test`), which the
  Couplet-Machine data was cleaned against (no pair shares a line with it).

The files hold the characters separated by single spaces, with a trailing space; the
spaces are removed, so the text is Chinese as it is written. Rows are shuffled (seeded),
so a file is not all upper lines then all lower lines. Each file is balanced: a pair
gives one row of each class. A line that occurs both as an upper and as a lower line (in
different pairs) is kept as it is, in both classes; how many there are is printed, since
they bound the accuracy any classifier can reach.

Why the task is learnable: by convention an upper line ends on an oblique tone (仄) and
the lower line on a level tone (平), and parallel lines of Tang poems follow the same
rule; the last character tells much, the rest of the line a little more.

    .venv/bin/python benchmarks/couplet_lines_csv.py --data-dir ~/data --out runs/couplet-lines-data
"""

from __future__ import annotations

import argparse
import csv
import random
from collections import Counter
from pathlib import Path

from transformer_lab.data import read_parallel_text

UPPER, LOWER = "上联", "下联"
TRAIN_FOLDER = "couplet/train_couplet_machine"
TEST_FOLDER = "couplet/test"


def written_form(line: str) -> str:
    """A couplet line as Chinese is written: the separating (ASCII) spaces removed."""
    return line.replace(" ", "")


def read_pairs(folder: Path) -> list[tuple[str, str]]:
    """The (upper, lower) lines of a couplet folder, without spaces; an empty line is an error."""
    pairs = read_parallel_text(folder / "in.txt", folder / "out.txt").pairs
    return [(written_form(upper), written_form(lower)) for upper, lower in pairs]


def labelled_rows(pairs: list[tuple[str, str]], seed: int) -> list[tuple[str, str]]:
    """(text, label) rows, two per pair, in a seeded random order."""
    rows = [row for upper, lower in pairs for row in ((upper, UPPER), (lower, LOWER))]
    random.Random(seed).shuffle(rows)
    return rows


def write_csv(path: Path, rows: list[tuple[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(("text", "label"))
        writer.writerows(rows)


def both_classes(rows: list[tuple[str, str]]) -> int:
    """How many distinct texts occur with both labels."""
    labels: dict[str, set[str]] = {}
    for text, label in rows:
        labels.setdefault(text, set()).add(label)
    return sum(len(found) == 2 for found in labels.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="the data root holding couplet/")
    parser.add_argument("--out", type=Path, required=True, help="folder for train.csv, valid.csv, test.csv")
    parser.add_argument("--validation-fraction", type=float, default=0.05, help="share of training pairs held out")
    parser.add_argument("--seed", type=int, default=1234, help="which pairs are held out, and the row order")
    arguments = parser.parse_args()
    if not 0.0 < arguments.validation_fraction < 1.0:
        parser.error(f"--validation-fraction: expected a number in (0, 1), got {arguments.validation_fraction}")

    train_pairs = read_pairs(arguments.data_dir / TRAIN_FOLDER)
    order = list(range(len(train_pairs)))
    random.Random(arguments.seed).shuffle(order)
    held_out = set(order[: round(arguments.validation_fraction * len(train_pairs))])
    splits = {
        "train": [pair for index, pair in enumerate(train_pairs) if index not in held_out],
        "valid": [pair for index, pair in enumerate(train_pairs) if index in held_out],
        "test": read_pairs(arguments.data_dir / TEST_FOLDER),
    }
    train_texts = {text for pair in splits["train"] for text in pair}
    for name, pairs in splits.items():
        rows = labelled_rows(pairs, arguments.seed)
        write_csv(arguments.out / f"{name}.csv", rows)
        counts = Counter(label for _, label in rows)
        lengths = sorted(len(text) for text, _ in rows)
        seen = sum(text in train_texts for text, _ in rows)
        print(
            f"{name}.csv: {len(rows)} rows ({counts[UPPER]} {UPPER}, {counts[LOWER]} {LOWER}), "
            f"median {lengths[len(lengths) // 2]} characters, longest {lengths[-1]}; "
            f"{both_classes(rows)} texts with both labels; "
            + ("" if name == "train" else f"{seen} rows whose text is also a training text")
        )


if __name__ == "__main__":
    main()
