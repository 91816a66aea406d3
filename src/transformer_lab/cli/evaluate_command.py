"""``transformer-lab evaluate TASK --checkpoint DIR``: score a checkpoint on a held-out split.

- translation: sacreBLEU on a Multi30k split (default test_2016_flickr).
- classification: accuracy, per-class precision/recall/F1, the confusion matrix (printed
  and drawn as a PNG) on the AG News test set (default) or the validation rows.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from transformer_lab.data import load_multi30k
from transformer_lab.tasks import classification, translation

DEFAULT_SPLITS = {"translation": "test_2016_flickr", "classification": "test"}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("evaluate", help="score a checkpoint on a test split")
    parser.add_argument("task", choices=tuple(DEFAULT_SPLITS), help="which task")
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint folder (classification: or its run folder)")
    parser.add_argument(
        "--split", default=None,
        help="split to score (translation: default test_2016_flickr; classification: test or validation, default test)",
    )
    parser.add_argument("--data-dir", default=None, help="folder holding the dataset (default: the checkpoint's, or $TRANSFORMER_LAB_DATA)")
    parser.add_argument("--beam", type=int, default=None, help="translation: beam size (1 = greedy; default: the checkpoint's)")
    parser.add_argument(
        "--output", type=Path, default=None,
        help="translation: the hypotheses file; classification: the JSON report (default: beside the checkpoint)",
    )
    parser.add_argument(
        "--confusion-png", type=Path, default=None,
        help="classification: where to draw the confusion matrix (default: beside the checkpoint)",
    )
    parser.add_argument(
        "--skip-malformed", action="store_true", help="classification: skip malformed CSV lines (counted) instead of failing"
    )
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    split = arguments.split or DEFAULT_SPLITS[arguments.task]
    if arguments.task == "classification":
        return _evaluate_classification(arguments, split)
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
        split, data_dir, source_language=config.data.source_language, target_language=config.data.target_language
    )
    report = translation.evaluate_bleu(model, tokenizer, pairs, decode_config)
    search = "greedy" if decode_config.strategy == "greedy" else f"beam {decode_config.beam_size}"
    output = arguments.output or arguments.checkpoint / f"hypotheses.{split}.{search.replace(' ', '')}.txt"
    output.write_text("".join(line + "\n" for line in report.hypotheses), encoding="utf-8")
    print(f"{split}, {len(pairs)} sentences, {search}")
    print(f"BLEU (cased)      {report.cased.score:.2f}  {report.cased.signature}")
    print(f"BLEU (lowercased) {report.lowercased.score:.2f}  {report.lowercased.signature}")
    print(f"hypotheses: {output}")
    return 0


def _evaluate_classification(arguments: argparse.Namespace, split: str) -> int:
    from transformer_lab.lab.figures import plot_confusion_matrix

    if arguments.beam is not None:
        raise ValueError("--beam: expected only with the translation task, got it with classification")
    checkpoint = classification.resolve_checkpoint(arguments.checkpoint)
    model, tokenizer, config = classification.load_classifier(checkpoint)
    articles = classification.load_split(config, split, arguments.data_dir, skip_malformed=arguments.skip_malformed)
    report, _ = classification.evaluate_classifier(model, tokenizer, articles, config.class_names)
    width = max(len(name) for name in report.class_names)
    print(f"{checkpoint}, {split}: {len(articles)} articles")
    print(f"accuracy {report.accuracy:.4f}")
    print(f"{'class':<{width}}  precision  recall  f1      support")
    for name, precision, recall, f1, support in zip(
        report.class_names, report.precision, report.recall, report.f1, report.support
    ):
        print(f"{name:<{width}}  {precision:.4f}     {recall:.4f}  {f1:.4f}  {support}")
    print(f"{'macro':<{width}}  {report.macro_precision:.4f}     {report.macro_recall:.4f}  {report.macro_f1:.4f}  {len(articles)}")
    print("confusion matrix (rows: true class, columns: predicted class, in the order above):")
    for name, row in zip(report.class_names, report.confusion):
        print(f"{name:<{width}}  " + " ".join(f"{count:6d}" for count in row))
    output = arguments.output or checkpoint / f"report.{split}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps({"split": split, "num_articles": len(articles), **report.to_dict()}, indent=2) + "\n", encoding="utf-8")
    picture = plot_confusion_matrix(
        arguments.confusion_png or checkpoint / f"confusion.{split}.png",
        report.confusion,
        report.class_names,
        title=f"{split}: accuracy {report.accuracy:.2%}",
    )
    print(f"report: {output}")
    print(f"confusion matrix: {picture}")
    return 0
