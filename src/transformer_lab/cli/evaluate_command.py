"""``transformer-lab evaluate TASK --checkpoint DIR``: score a checkpoint on a held-out split.

- translation: sacreBLEU on a Multi30k split (default test_2016_flickr).
- couplet: character BLEU-4 and the couplet's form (length, punctuation, tone, repetition).
- classification: accuracy, per-class precision/recall/F1, the confusion matrix (printed
  and drawn as a PNG) on the AG News test set (default) or the validation rows.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from transformer_lab.cli.decode_options import add_decode_arguments, search_name, with_decode_arguments
from transformer_lab.data import load_multi30k
from transformer_lab.data.couplet import load_couplets
from transformer_lab.evaluation.couplet_metrics import CoupletReport
from transformer_lab.tasks import classification, couplet, translation

DEFAULT_SPLITS = {"translation": "test_2016_flickr", "couplet": "test", "classification": "test"}
NUM_SAMPLES = 20


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("evaluate", help="score a checkpoint on a test split")
    parser.add_argument("task", choices=tuple(DEFAULT_SPLITS), help="which task")
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint folder")
    parser.add_argument(
        "--split", default=None, help=f"split to score (default: {', '.join(f'{k} {v}' for k, v in DEFAULT_SPLITS.items())})"
    )
    parser.add_argument("--data-dir", default=None, help="folder holding the dataset (default: $TRANSFORMER_LAB_DATA)")
    add_decode_arguments(parser)
    parser.add_argument(
        "--output", type=Path, default=None,
        help="the hypotheses file (classification: the JSON report); default: beside the checkpoint",
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
    if arguments.task == "couplet":
        return _evaluate_couplet(arguments, split)
    if arguments.task == "classification":
        return _evaluate_classification(arguments, split)
    model, tokenizer, config = translation.load_translator(arguments.checkpoint)
    decode_config = with_decode_arguments(config.decode, arguments)
    data_dir = arguments.data_dir if arguments.data_dir is not None else config.data.data_dir
    pairs = load_multi30k(
        split, data_dir, source_language=config.data.source_language, target_language=config.data.target_language
    )
    report = translation.evaluate_bleu(model, tokenizer, pairs, decode_config)
    search = search_name(decode_config)
    output = arguments.output or arguments.checkpoint / f"hypotheses.{split}.{search.replace(' ', '')}.txt"
    output.write_text("".join(line + "\n" for line in report.hypotheses), encoding="utf-8")
    print(f"{split}, {len(pairs)} sentences, {search}")
    print(f"BLEU (cased)      {report.cased.score:.2f}  {report.cased.signature}")
    print(f"BLEU (lowercased) {report.lowercased.score:.2f}  {report.lowercased.signature}")
    print(f"hypotheses: {output}")
    return 0


def _evaluate_couplet(arguments: argparse.Namespace, split: str) -> int:
    model, vocabulary, config = couplet.load(arguments.checkpoint)
    decode_config = with_decode_arguments(config.decode, arguments)
    data_dir = arguments.data_dir if arguments.data_dir is not None else config.data.data_dir
    if split == "validation":
        # The pairs this run held out of its training split, carved again the same way.
        pairs = couplet.load_validation_pairs(config.data, data_dir)
    else:
        # The test files are clean; an error here means a damaged file, which should be seen.
        pairs = load_couplets(split, data_dir).pairs
    evaluation = couplet.evaluate_pairs(model, vocabulary, pairs, decode_config, config.constraints)
    search = search_name(decode_config)
    stem = f"{split}.{search.replace(' ', '')}"
    output = arguments.output or arguments.checkpoint / f"hypotheses.{stem}.txt"
    output.write_text("".join(line + "\n" for line in evaluation.hypotheses), encoding="utf-8")
    samples = output.with_name(f"samples.{stem}.md")
    samples.write_text(couplet_samples_table(evaluation, NUM_SAMPLES), encoding="utf-8")
    print(f"couplet {split}, {len(pairs)} pairs, {search}, constraints {config.constraints}")
    for line in couplet_report_lines(evaluation.report):
        print(line)
    print(f"\n{NUM_SAMPLES} samples (upper | ours | reference):")
    for upper, ours, reference in list(zip(evaluation.uppers, evaluation.hypotheses, evaluation.references))[:NUM_SAMPLES]:
        print(f"  {upper} | {ours} | {reference}")
    print(f"hypotheses: {output}\nsamples: {samples}")
    return 0


def couplet_report_lines(report: CoupletReport) -> list[str]:
    """The report as aligned text lines: BLEU with its signature, then each rate for ours and the references."""
    ours, references = report.hypotheses, report.references
    lines = [f"character BLEU-4  {report.bleu.score:.2f}  {report.bleu.signature}", f"{'':28}{'ours':>24}{'references':>24}"]
    for name in ("length_match", "punctuation_match", "identical_punctuation", "level_tone_ending",
                 "repetition_mirrored", "no_repetition_where_none"):
        lines.append(f"{name.replace('_', ' '):28}{str(getattr(ours, name)):>24}{str(getattr(references, name)):>24}")
    for name in ("distinct_1", "distinct_2"):
        lines.append(f"{name.replace('_', '-'):28}{getattr(ours, name):>24.4f}{getattr(references, name):>24.4f}")
    return lines


def couplet_samples_table(evaluation: couplet.CoupletEvaluation, count: int) -> str:
    """A Markdown table of the first `count` upper lines with our lower line and the reference."""
    rows = ["| upper line (上联) | ours (下联) | reference |", "|---|---|---|"]
    for upper, ours, reference in list(zip(evaluation.uppers, evaluation.hypotheses, evaluation.references))[:count]:
        rows.append(f"| {upper} | {ours} | {reference} |")
    return "\n".join(rows) + "\n"


def _evaluate_classification(arguments: argparse.Namespace, split: str) -> int:
    from transformer_lab.lab.figures import plot_confusion_matrix

    for option in ("beam", "length_penalty"):
        if getattr(arguments, option) is not None:
            flag = option.replace("_", "-")
            raise ValueError(f"--{flag}: expected only with the translation and couplet tasks, got it with classification")
    checkpoint = classification.resolve_checkpoint(arguments.checkpoint)
    model, tokenizer, config = classification.load_classifier(checkpoint)
    articles = classification.load_split(config, split, arguments.data_dir, skip_malformed=arguments.skip_malformed)
    report, _ = classification.evaluate_classifier(
        model, tokenizer, articles, config.class_names, precision=arguments.precision or "auto"
    )
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
