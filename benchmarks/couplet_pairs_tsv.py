"""The couplet data as a zh -> zh translation corpus: upper<TAB>lower TSV, and the test set as two line files.

For the generic translation machinery (``train translation --train train.tsv``), which
knows nothing of couplets: the characters of the wb14123-format files are joined (their
separating spaces removed), the first line is the header ``zh<TAB>zh``. As in the couplet
preset, training pairs whose upper line exceeds 64 characters (58 of them, up to 533) and
the one pair of unequal lines are left out, counted in the output.

    .venv/bin/python benchmarks/couplet_pairs_tsv.py --data-dir ~/data --out runs/zh-data
"""

from __future__ import annotations

import argparse
from pathlib import Path

from transformer_lab.data.couplet import load_couplets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True, help="the data root holding couplet/")
    parser.add_argument("--out", type=Path, required=True)
    arguments = parser.parse_args()
    arguments.out.mkdir(parents=True, exist_ok=True)
    corpus = load_couplets("train_couplet_machine", arguments.data_dir, skip_invalid=True, max_length=64)
    train = corpus.pairs
    test = load_couplets("test", arguments.data_dir).pairs
    (arguments.out / "train.tsv").write_text("zh\tzh\n" + "".join(f"{u}\t{w}\n" for u, w in train), encoding="utf-8")
    (arguments.out / "test.upper").write_text("".join(u + "\n" for u, _ in test), encoding="utf-8")
    (arguments.out / "test.lower").write_text("".join(w + "\n" for _, w in test), encoding="utf-8")
    print(f"{len(train)} training pairs ({corpus.summary()}), {len(test)} test pairs in {arguments.out}")


if __name__ == "__main__":
    main()
