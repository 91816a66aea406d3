"""``evaluate classification``: accuracy, per-class precision/recall/F1 and the confusion matrix of a checkpoint.

On the AG News test set (default), the validation rows, or any labelled CSV / TSV /
JSON Lines file (``--test FILE``, read with the checkpoint's text and label fields and
format unless ``--text-field`` / ``--label-field`` / ``--file-format`` say otherwise).
The report is written as JSON and the confusion matrix drawn as a PNG, beside the
checkpoint unless ``--output`` / ``--confusion-png`` say where.
"""

from __future__ import annotations

import json
import os
import unicodedata
from collections.abc import Sequence
from pathlib import Path

from transformer_lab.data import (
    LABELLED_TEXT_FORMATS,
    SubwordTokenizer,
    ag_news_path,
    read_ag_news_csv,
    stratified_split,
)
from transformer_lab.data.prepared_labelled import LabelledExample, open_prepared_labelled
from transformer_lab.evaluation import ClassificationReport, classification_report
from transformer_lab.hardware import resolve_inference_precision
from transformer_lab.models import TransformerClassifier
from transformer_lab.tasks.classification.data import Example, carve_validation, labelled_examples, read_labelled_file
from transformer_lab.tasks.classification.predict import Prediction, predict_each
from transformer_lab.tasks.classification.train import ClassificationConfig, load_classifier
from transformer_lab.tasks.evaluation import ConfusionFigure, EvaluationOptions, EvaluationReport, TaskOption
from transformer_lab.training.checkpoint import resolve_checkpoint

# What `evaluate classification` reads: where to draw, and any labelled file to score.
OPTIONS = (
    TaskOption("--confusion-png", "where to draw the confusion matrix (default: beside the checkpoint)", Path),
    TaskOption("--skip-malformed", "skip malformed CSV lines (counted) instead of failing", bool),
    TaskOption("--test", "score this labelled CSV / TSV / JSON Lines file instead of a --split", Path, metavar="FILE"),
    TaskOption(
        "--text-field",
        "with --test: a text field (repeatable, joined by a line break; default: the checkpoint's)",
        metavar="NAME",
        repeatable=True,
    ),
    TaskOption("--label-field", "with --test: the label field (default: the checkpoint's)", metavar="NAME"),
    TaskOption(
        "--file-format",
        "with --test: the file's format (default: the checkpoint's, else from the suffix)",
        choices=LABELLED_TEXT_FORMATS,
    ),
)


def evaluate_classifier(
    model: TransformerClassifier,
    tokenizer: SubwordTokenizer,
    articles: Sequence[Example],
    class_names: Sequence[str],
    precision: str = "fp32",
    source: str | os.PathLike[str] | None = None,
) -> tuple[ClassificationReport, list[Prediction]]:
    """Accuracy, per-class precision/recall/F1 and the confusion matrix on ``articles``.

    An article the model cannot read whole is a ValueError naming its line (and
    ``source``, the file it came from, when given). Returns the report and the prediction
    of every article.
    """
    results = predict_each(model, tokenizer, class_names, [article.text for article in articles], precision=precision)
    for article, result in zip(articles, results):
        if isinstance(result, str):
            where = (
                f"{source}: line {article.line_number}"
                if source is not None
                else f"article of line {article.line_number}"
            )
            raise ValueError(f"{where}: {result}")
    predictions: list[Prediction] = results  # type: ignore[assignment]
    report = classification_report(
        [prediction.label for prediction in predictions], [article.label for article in articles], class_names
    )
    return report, predictions


def load_labelled_split(config: ClassificationConfig, split: str) -> list[Example]:
    """The validation rows of a checkpoint trained on ``data.train_files``: its valid file, or carved again.

    There is no named test split of a user's data: score a file with :func:`load_labelled_test`.
    """
    data = config.data
    if split == "validation":
        if data.valid_files:
            return list(labelled_examples(read_labelled_file(data, data.valid_files[0]), config.class_names))
        read = read_labelled_file(data, data.train_files[0], max_records=data.num_train)
        return carve_validation(data, list(labelled_examples(read, config.class_names)))[1]
    if split == "test":
        raise ValueError(
            f"split 'test': expected a checkpoint trained on AG News, got one trained on {data.train_files[0]}, "
            "which has no named test split; score a labelled file instead (evaluate --test FILE)"
        )
    raise ValueError(f"split must be 'test' or 'validation', got {split!r}")


def load_labelled_test(
    config: ClassificationConfig,
    path: str | os.PathLike[str],
    *,
    text_fields: Sequence[str] | None = None,
    label_field: str | None = None,
    file_format: str | None = None,
) -> list[LabelledExample]:
    """The rows of any labelled file, read with the checkpoint's fields and format unless overridden.

    A label outside the checkpoint's ``class_names`` is a ValueError naming the file, the
    line and the label.
    """
    read = read_labelled_file(
        config.data, path, text_fields=text_fields, label_field=label_field, file_format=file_format
    )
    return labelled_examples(read, config.class_names)


def load_split(
    config: ClassificationConfig, split: str, data_dir: str | None = None, skip_malformed: bool = False
) -> list[Example]:
    """The articles of ``split`` ("test", or "validation": the rows held out at training)."""
    if config.data.prepared_dir and split == "validation":
        return list(open_prepared_labelled(config.data.prepared_dir).validation_rows)
    if config.data.train_files:
        return load_labelled_split(config, split)
    data_dir = data_dir if data_dir is not None else config.data.data_dir
    if split == "test":
        return list(read_ag_news_csv(ag_news_path("test", data_dir), skip_malformed=skip_malformed).articles)
    if split == "validation":
        path = ag_news_path("train", data_dir, config.data.train_file)
        articles = read_ag_news_csv(path, skip_malformed=config.data.skip_malformed).articles
        if config.data.num_train:
            articles = articles[: config.data.num_train]
        _, validation_indices = stratified_split(
            [article.label for article in articles], config.data.validation_fraction, config.data.split_seed
        )
        return [articles[index] for index in validation_indices]
    raise ValueError(f"split must be 'test' or 'validation', got {split!r}")


DEFAULT_SPLIT = "test"  # the split `evaluate classification` scores when none is named
_TEST_FILE_OPTIONS = ("--text-field", "--label-field", "--file-format")


def evaluate(checkpoint: Path, split: str | None, options: EvaluationOptions) -> EvaluationReport:
    """Classify a split's (or ``--test``'s) texts and score the labels against the true ones."""
    checkpoint = resolve_checkpoint(checkpoint)
    model, tokenizer, config = load_classifier(checkpoint)
    model = options.placed(model)
    test = options.option("--test")
    if test is not None:
        test = Path(test)
        for option, value in (("--split", split), ("--skip-malformed", options.option("--skip-malformed"))):
            if value is not None:
                raise ValueError(f"{option}: expected either it or --test FILE, got both")
        articles: Sequence[Example] = load_labelled_test(
            config,
            test,
            text_fields=options.option("--text-field"),
            label_field=options.option("--label-field"),
            file_format=options.option("--file-format"),
        )
        name, rows = test.stem, "rows"
    else:
        name = split or DEFAULT_SPLIT
        for option in _TEST_FILE_OPTIONS:
            if options.option(option) is not None:
                raise ValueError(f"{option}: expected only with --test FILE, got it with --split {name}")
        skip_malformed = bool(options.option("--skip-malformed"))
        articles = load_split(config, name, options.data_dir, skip_malformed=skip_malformed)
        rows = "articles"
    # The classify command's default, auto; int8 has no classifier copy.
    device = next(model.parameters()).device
    precision = resolve_inference_precision(options.precision, "auto", device, name="--precision", int8=False)
    report, _ = evaluate_classifier(model, tokenizer, articles, config.class_names, precision=precision, source=test)
    lines = [f"{checkpoint}, {test if test is not None else name}: {len(articles)} {rows}"]
    lines += report_lines(report, len(articles))
    output = options.output or checkpoint / f"report.{name}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    scored = {"split": name} if test is None else {"file": str(test.resolve())}
    output.write_text(
        json.dumps({**scored, "num_articles": len(articles), **report.to_dict()}, indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    lines += [f"report: {output}"]
    confusion = ConfusionFigure(
        path=options.option("--confusion-png") or checkpoint / f"confusion.{name}.png",
        matrix=[list(row) for row in report.confusion],
        class_names=list(report.class_names),
        title=f"{name}: accuracy {report.accuracy:.2%}",
    )
    return EvaluationReport(
        lines=lines,
        files={"report": output},
        confusion=confusion,
        checkpoint=checkpoint,
        name=name,
        search="int8" if options.precision == "int8" else "argmax",
        scores={"accuracy": report.accuracy, "macro_f1": report.macro_f1},
    )


def report_lines(report: ClassificationReport, num_rows: int) -> list[str]:
    """Accuracy, the per-class table with its macro average over ``num_rows`` rows, and the confusion matrix."""

    def columns(name: str) -> int:
        # A Chinese or Japanese character takes two terminal columns; pad by columns, not characters.
        return sum(2 if unicodedata.east_asian_width(character) in "WF" else 1 for character in name)

    width = max(columns(name) for name in (*report.class_names, "class", "macro"))

    def padded(name: str) -> str:
        return name + " " * (width - columns(name))

    lines = [f"accuracy {report.accuracy:.4f}", f"{padded('class')}  precision  recall  f1      support"]
    for name, class_precision, recall, f1, support in zip(
        report.class_names, report.precision, report.recall, report.f1, report.support
    ):
        lines.append(f"{padded(name)}  {class_precision:.4f}     {recall:.4f}  {f1:.4f}  {support}")
    lines.append(
        f"{padded('macro')}  {report.macro_precision:.4f}     "
        f"{report.macro_recall:.4f}  {report.macro_f1:.4f}  {num_rows}"
    )
    lines.append("confusion matrix (rows: true class, columns: predicted class, in the order above):")
    for name, row in zip(report.class_names, report.confusion):
        lines.append(f"{padded(name)}  " + " ".join(f"{count:6d}" for count in row))
    return lines
