"""``transformer-lab evaluate translation --checkpoint DIR --split test_2016_flickr``: sacreBLEU."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from transformer_lab.data import load_multi30k
from transformer_lab.tasks import translation


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("evaluate", help="score a checkpoint on a test split")
    parser.add_argument("task", choices=("translation",), help="which task")
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint folder")
    parser.add_argument("--split", default="test_2016_flickr", help="split to score (default test_2016_flickr)")
    parser.add_argument("--data-dir", default=None, help="folder holding the dataset (default: $TRANSFORMER_LAB_DATA)")
    parser.add_argument("--beam", type=int, default=None, help="beam size (1 = greedy; default: the checkpoint's)")
    parser.add_argument("--output", type=Path, default=None, help="where to write the hypotheses (default: beside the checkpoint)")
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    model, tokenizer, config = translation.load_translator(arguments.checkpoint)
    decode_config = config.decode
    if arguments.beam is not None:
        if arguments.beam < 1:
            raise ValueError(f"--beam must be >= 1, got {arguments.beam}")
        decode_config = dataclasses.replace(
            decode_config, strategy="greedy" if arguments.beam == 1 else "beam", beam_size=arguments.beam, num_return=1
        )
    data_dir = arguments.data_dir if arguments.data_dir is not None else config.data.data_dir
    pairs = load_multi30k(
        arguments.split, data_dir, source_language=config.data.source_language, target_language=config.data.target_language
    )
    report = translation.evaluate_bleu(model, tokenizer, pairs, decode_config)
    search = "greedy" if decode_config.strategy == "greedy" else f"beam {decode_config.beam_size}"
    output = arguments.output or arguments.checkpoint / f"hypotheses.{arguments.split}.{search.replace(' ', '')}.txt"
    output.write_text("".join(line + "\n" for line in report.hypotheses), encoding="utf-8")
    print(f"{arguments.split}, {len(pairs)} sentences, {search}")
    print(f"BLEU (cased)      {report.cased.score:.2f}  {report.cased.signature}")
    print(f"BLEU (lowercased) {report.lowercased.score:.2f}  {report.lowercased.signature}")
    print(f"hypotheses: {output}")
    return 0
