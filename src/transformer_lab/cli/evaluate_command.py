"""``transformer-lab evaluate TASK --checkpoint DIR``: score a checkpoint on a held-out split.

- translation: sacreBLEU (BLEU with the target language's tokenizer) and chrF++ on a
  Multi30k split (default test_2016_flickr) or on any ``--source`` / ``--reference`` pair of files.
- couplet: character BLEU-4 and the couplet's form (length, punctuation, tone, repetition).
- classification: accuracy, per-class precision/recall/F1, the confusion matrix (printed
  and drawn as a PNG) on the AG News test set (default), the validation rows, or any
  labelled CSV / TSV / JSON Lines file (``--test FILE``, read with the checkpoint's text
  and label fields and format unless ``--text-field`` / ``--label-field`` / ``--file-format``
  say otherwise).
"""

from __future__ import annotations

import argparse
import json
import unicodedata
from collections.abc import Sequence
from pathlib import Path

from transformer_lab.cli.couplet_options import add_constraint_arguments, constraint_overrides, given_constraint_options
from transformer_lab.cli.decode_options import (
    add_decode_arguments,
    command_precision,
    search_name,
    with_decode_arguments,
)
from transformer_lab.data import LABELLED_TEXT_FORMATS, load_multi30k
from transformer_lab.data.couplet import load_couplets
from transformer_lab.data.parallel_text import read_parallel_text
from transformer_lab.decoding import decoding_model
from transformer_lab.evaluation import bleu_tokenizer_for
from transformer_lab.evaluation.couplet_antithesis import RULES as ANTITHESIS_RULES
from transformer_lab.evaluation.couplet_antithesis import pair_scores
from transformer_lab.evaluation.couplet_metrics import CoupletReport
from transformer_lab.tasks import classification, couplet, translation
from transformer_lab.tasks.registry import TASKS, task_named
from transformer_lab.training.checkpoint import resolve_checkpoint
from transformer_lab.training.model_card import add_test_scores

NUM_SAMPLES = 20
# sacreBLEU's tokenizers (ja-mecab and ko-mecab need sacrebleu's extras).
BLEU_TOKENIZERS = ("13a", "intl", "zh", "char", "ja-mecab", "ko-mecab", "flores101", "flores200", "none")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("evaluate", help="score a checkpoint on a test split")
    default_splits = {name: task.evaluation_split for name, task in TASKS.items() if task.evaluation_split}
    parser.add_argument("task", choices=tuple(default_splits), help="which task")
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint folder")
    parser.add_argument(
        "--split",
        default=None,
        help=f"split to score (default: {', '.join(f'{k} {v}' for k, v in default_splits.items())})",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="folder holding the dataset (default: $TRANSFORMER_LAB_DATA, else the folder `download` fills)",
    )
    add_decode_arguments(parser)
    add_constraint_arguments(parser, prefix="couplet: ")
    # translation: score any test set
    parser.add_argument(
        "--source",
        type=Path,
        default=None,
        metavar="FILE",
        help="translation: score the translations of this file's lines (with --reference) instead of a --split",
    )
    parser.add_argument(
        "--reference", type=Path, default=None, metavar="FILE", help="translation: the reference of each --source line"
    )
    parser.add_argument(
        "--bleu-tokenize",
        choices=BLEU_TOKENIZERS,
        default=None,
        help="translation: sacreBLEU's tokenizer (default: zh for a Chinese target, ja-mecab (else char) for "
        "Japanese, 13a otherwise)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="the hypotheses file (classification: the JSON report; couplet: its samples table goes beside it "
        "as NAME.samples.md); default: beside the checkpoint",
    )
    parser.add_argument(
        "--confusion-png",
        type=Path,
        default=None,
        help="classification: where to draw the confusion matrix (default: beside the checkpoint)",
    )
    parser.add_argument(
        "--skip-malformed",
        action="store_true",
        help="classification: skip malformed CSV lines (counted) instead of failing",
    )
    # classification: score any labelled file
    parser.add_argument(
        "--test",
        type=Path,
        default=None,
        metavar="FILE",
        help="classification: score this labelled CSV / TSV / JSON Lines file instead of a --split",
    )
    parser.add_argument(
        "--text-field",
        dest="text_fields",
        action="append",
        default=None,
        metavar="NAME",
        help="classification with --test: a text field (repeatable, joined by a line break; default: the checkpoint's)",
    )
    parser.add_argument(
        "--label-field",
        default=None,
        metavar="NAME",
        help="classification with --test: the label field (default: the checkpoint's)",
    )
    parser.add_argument(
        "--file-format",
        choices=LABELLED_TEXT_FORMATS,
        default=None,
        help="classification with --test: the file's format (default: the checkpoint's, else from the suffix)",
    )
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    split = str(arguments.split or task_named(arguments.task).evaluation_split)
    if arguments.task == "couplet":
        return _evaluate_couplet(arguments, split)
    given = given_constraint_options(arguments)
    if given:
        raise ValueError(f"{given[0]}: expected only with the couplet task, got it with {arguments.task}")
    if arguments.task == "classification":
        return _evaluate_classification(arguments, split)
    return _evaluate_translation(arguments, split)


def _evaluate_translation(arguments: argparse.Namespace, split: str) -> int:
    if (arguments.source is None) != (arguments.reference is None):
        raise ValueError("--source and --reference: expected both (the sentences and their references), got one")
    if arguments.source is not None and arguments.split is not None:
        raise ValueError("--split and --source: expected one test set, got both")
    checkpoint = resolve_checkpoint(arguments.checkpoint)
    model, tokenizer, config = translation.load_translator(checkpoint)
    precision = command_precision(arguments, config.decode.precision, model)
    decode_config = with_decode_arguments(config.decode, arguments, precision)
    model = decoding_model(model, precision)
    if arguments.source is not None:
        # Strict, as every reader: misaligned files, empty lines and bad UTF-8 name file and line.
        pairs = read_parallel_text(arguments.source, arguments.reference).pairs
        name = arguments.source.name
    else:
        data_dir = arguments.data_dir if arguments.data_dir is not None else config.data.data_dir
        pairs = load_multi30k(
            split, data_dir, source_language=config.data.source_language, target_language=config.data.target_language
        )
        name = split
    tokenize = arguments.bleu_tokenize or bleu_tokenizer_for(config.data.target_language)
    report = translation.evaluate_bleu(model, tokenizer, pairs, decode_config, tokenize)
    search = search_name(decode_config, precision)
    output = arguments.output or checkpoint / f"hypotheses.{name}.{search.replace(' ', '')}.txt"
    output.write_text("".join(line + "\n" for line in report.hypotheses), encoding="utf-8")
    print(f"{name}, {len(pairs)} sentences, {search}")
    print(f"BLEU (cased)      {report.cased.score:.2f}  {report.cased.signature}")
    print(f"BLEU (lowercased) {report.lowercased.score:.2f}  {report.lowercased.signature}")
    print(f"chrF++            {report.chrf.score:.2f}  {report.chrf.signature}")
    print(f"hypotheses: {output}")
    scores = {"bleu": report.cased.score, "bleu_lowercased": report.lowercased.score, "chrf": report.chrf.score}
    _record_in_card(checkpoint, name, search, scores)
    return 0


def _record_in_card(checkpoint: Path, split: str, search: str, scores: dict[str, float]) -> None:
    """Add the scores to the checkpoint's model card (README.md), if it has one."""
    try:
        card = add_test_scores(checkpoint, split, search, scores)
    except FileNotFoundError:
        print(f"model card: none in {checkpoint} (a checkpoint written before cards); scores not recorded")
        return
    print(f"model card: {card}")


def _evaluate_couplet(arguments: argparse.Namespace, split: str) -> int:
    model, vocabulary, config = couplet.load(arguments.checkpoint)
    precision = command_precision(arguments, config.decode.precision, model)
    decode_config = with_decode_arguments(config.decode, arguments, precision)
    model = decoding_model(model, precision)
    data_dir = arguments.data_dir if arguments.data_dir is not None else config.data.data_dir
    if split == "validation":
        # The pairs this run held out of its training split, carved again the same way.
        pairs = couplet.load_validation_pairs(config.data, data_dir)
    else:
        # The test files are clean; an error here means a damaged file, which should be seen.
        pairs = load_couplets(split, data_dir).pairs
    constraints = constraint_overrides(config.constraints, arguments)
    evaluation = couplet.evaluate_pairs(model, vocabulary, pairs, decode_config, constraints)
    search = search_name(decode_config, precision)
    stem = f"{split}.{search.replace(' ', '')}"
    output = arguments.output or arguments.checkpoint / f"hypotheses.{stem}.txt"
    output.write_text("".join(line + "\n" for line in evaluation.hypotheses), encoding="utf-8")
    # Named after a given --output, so that two evaluations writing into one folder with
    # different options (the same split and search) keep their own samples.
    samples = output.with_name(f"{output.stem}.samples.md" if arguments.output else f"samples.{stem}.md")
    samples.write_text(couplet_samples_table(evaluation, NUM_SAMPLES), encoding="utf-8")
    print(f"couplet {split}, {len(pairs)} pairs, {search}, constraints {constraints}")
    for line in couplet_report_lines(evaluation.report):
        print(line)
    print(f"\n{NUM_SAMPLES} samples (upper | ours | reference):")
    for upper, ours, reference in list(zip(evaluation.uppers, evaluation.hypotheses, evaluation.references))[
        :NUM_SAMPLES
    ]:
        print(f"  {upper} | {ours} | {reference}")
    print(f"hypotheses: {output}\nsamples: {samples}")
    _record_in_card(resolve_checkpoint(arguments.checkpoint), split, search, {"bleu": evaluation.report.bleu.score})
    return 0


def couplet_report_lines(report: CoupletReport) -> list[str]:
    """The report as aligned text lines: BLEU with its signature, then each rate for ours and the references."""
    ours, references = report.hypotheses, report.references
    lines = [
        f"character BLEU-4  {report.bleu.score:.2f}  {report.bleu.signature}",
        f"{'':28}{'ours':>24}{'references':>24}",
    ]
    for name in (
        "length_match",
        "punctuation_match",
        "identical_punctuation",
        "level_tone_ending",
        "repetition_mirrored",
        "no_repetition_where_none",
    ):
        lines.append(f"{name.replace('_', ' '):28}{str(getattr(ours, name)):>24}{str(getattr(references, name)):>24}")
    for name in ("distinct_1", "distinct_2"):
        lines.append(f"{name.replace('_', '-'):28}{getattr(ours, name):>24.4f}{getattr(references, name):>24.4f}")
    for name in ANTITHESIS_RULES:
        ours_score = getattr(report.hypothesis_antithesis, name)
        reference_score = getattr(report.reference_antithesis, name)
        lines.append(f"{name.replace('_', ' '):28}{str(ours_score):>24}{str(reference_score):>24}")
    return lines


def couplet_samples_table(evaluation: couplet.CoupletEvaluation, count: int) -> str:
    """A Markdown table of the first `count` upper lines with our lower line and the reference."""

    def scores(upper: str, lower: str) -> str:
        # Tone opposition / parts of speech / rhythm of one line, as in the report.
        values = pair_scores(upper, lower)
        shown = [values[name] for name in ("tone_opposition", "part_of_speech_agreement", "rhythm_agreement")]
        return " / ".join("-" if value is None else f"{value:.2f}" for value in shown)

    rows = [
        "| upper line (上联) | ours (下联) | tone / POS / rhythm | reference | tone / POS / rhythm |",
        "|---|---|---|---|---|",
    ]
    for upper, ours, reference in list(zip(evaluation.uppers, evaluation.hypotheses, evaluation.references))[:count]:
        rows.append(f"| {upper} | {ours} | {scores(upper, ours)} | {reference} | {scores(upper, reference)} |")
    return "\n".join(rows) + "\n"


def _evaluate_classification(arguments: argparse.Namespace, split: str) -> int:
    from transformer_lab.lab.result_plots import plot_confusion_matrix

    for option in ("beam", "length_penalty"):
        if getattr(arguments, option) is not None:
            flag = option.replace("_", "-")
            raise ValueError(
                f"--{flag}: expected only with the translation and couplet tasks, got it with classification"
            )
    for option in ("source", "reference", "bleu_tokenize"):
        if getattr(arguments, option, None) is not None:
            flag = option.replace("_", "-")
            raise ValueError(f"--{flag}: expected only with the translation task, got it with classification")
    checkpoint = resolve_checkpoint(arguments.checkpoint)
    model, tokenizer, config = classification.load_classifier(checkpoint)
    if arguments.test is not None:
        for option, value in (("--split", arguments.split), ("--skip-malformed", arguments.skip_malformed or None)):
            if value is not None:
                raise ValueError(f"{option}: expected either it or --test FILE, got both")
        articles: Sequence[classification.Example] = classification.load_labelled_test(
            config,
            arguments.test,
            text_fields=arguments.text_fields,
            label_field=arguments.label_field,
            file_format=arguments.file_format,
        )
        source, split, rows = arguments.test, arguments.test.stem, "rows"
    else:
        for option, value in (
            ("--text-field", arguments.text_fields),
            ("--label-field", arguments.label_field),
            ("--file-format", arguments.file_format),
        ):
            if value is not None:
                raise ValueError(f"{option}: expected only with --test FILE, got it with --split {split}")
        articles = classification.load_split(config, split, arguments.data_dir, skip_malformed=arguments.skip_malformed)
        source, rows = None, "articles"
    # The classify command's default, auto; int8 has no classifier copy.
    precision = command_precision(arguments, "auto", model, int8=False)
    report, _ = classification.evaluate_classifier(
        model, tokenizer, articles, config.class_names, precision=precision, source=source
    )

    def columns(name: str) -> int:
        # A Chinese or Japanese character takes two terminal columns; pad by columns, not characters.
        return sum(2 if unicodedata.east_asian_width(character) in "WF" else 1 for character in name)

    width = max(columns(name) for name in (*report.class_names, "class", "macro"))

    def padded(name: str) -> str:
        return name + " " * (width - columns(name))

    print(f"{checkpoint}, {source if source is not None else split}: {len(articles)} {rows}")
    print(f"accuracy {report.accuracy:.4f}")
    print(f"{padded('class')}  precision  recall  f1      support")
    for name, class_precision, recall, f1, support in zip(
        report.class_names, report.precision, report.recall, report.f1, report.support
    ):
        print(f"{padded(name)}  {class_precision:.4f}     {recall:.4f}  {f1:.4f}  {support}")
    print(
        f"{padded('macro')}  {report.macro_precision:.4f}     "
        f"{report.macro_recall:.4f}  {report.macro_f1:.4f}  {len(articles)}"
    )
    print("confusion matrix (rows: true class, columns: predicted class, in the order above):")
    for name, row in zip(report.class_names, report.confusion):
        print(f"{padded(name)}  " + " ".join(f"{count:6d}" for count in row))
    output = arguments.output or checkpoint / f"report.{split}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    scored = {"split": split} if source is None else {"file": str(source.resolve())}
    output.write_text(
        json.dumps({**scored, "num_articles": len(articles), **report.to_dict()}, indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    picture = plot_confusion_matrix(
        arguments.confusion_png or checkpoint / f"confusion.{split}.png",
        report.confusion,
        report.class_names,
        title=f"{split}: accuracy {report.accuracy:.2%}",
    )
    print(f"report: {output}")
    print(f"confusion matrix: {picture}")
    search = "int8" if arguments.precision == "int8" else "argmax"
    _record_in_card(checkpoint, split, search, {"accuracy": report.accuracy, "macro_f1": report.macro_f1})
    return 0
