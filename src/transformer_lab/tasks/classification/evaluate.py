"""``evaluate classification``: accuracy, per-class precision/recall/F1 and the confusion matrix of a checkpoint.

On AG News's test set, the validation rows or any labelled file (``--test``, see ``OPTIONS``);
the JSON report and the confusion PNG go beside the checkpoint unless ``--output`` /
``--confusion-png`` say where.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from transformer_lab.data import LABELLED_TEXT_FORMATS, SubwordTokenizer, ag_news_path, read_ag_news_csv
from transformer_lab.data.labelled_text import check_field_names, check_label_apart, format_of_suffix
from transformer_lab.data.prepared_cache import prepared_files
from transformer_lab.data.prepared_labelled import LabelledRow, carve_validation, open_prepared_labelled
from transformer_lab.evaluation import ClassificationReport, classification_report
from transformer_lab.hardware import resolve_inference_precision
from transformer_lab.models import TransformerClassifier
from transformer_lab.tasks.classification.data import read_labelled_file
from transformer_lab.tasks.classification.predict import Prediction, predict_each
from transformer_lab.tasks.classification.train import ClassificationConfig, load_classifier
from transformer_lab.tasks.evaluation import (
    TRAINED_ON,
    ConfusionFigure,
    EvaluationOptions,
    EvaluationReport,
    TaskOption,
    check_held_out_unchanged,
    trained_files,
    warn_if_seen,
)
from transformer_lab.training.checkpoint import resolve_checkpoint
from transformer_lab.training.model_card import file_test_name

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
        "with --test: the file's format (default: from its suffix, else the checkpoint's)",
        choices=LABELLED_TEXT_FORMATS,
    ),
)


def evaluate_classifier(
    model: TransformerClassifier,
    tokenizer: SubwordTokenizer,
    articles: Sequence[LabelledRow],
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
    where = "article of line" if source is None else f"{source}: line"
    for article, result in zip(articles, results):
        if isinstance(result, str):
            raise ValueError(f"{where} {article.line_number}: {result}")
    predictions: list[Prediction] = results  # type: ignore[assignment]
    report = classification_report(
        [prediction.label for prediction in predictions], [article.label for article in articles], class_names
    )
    return report, predictions


SPLITS = ("test", "validation")  # AG News's test split, or the rows held out at training


def load_split(
    config: ClassificationConfig, split: str, data_dir: str | None = None, skip_malformed: bool = False
) -> list[LabelledRow]:
    """The articles of ``split``: "test" (AG News's), or "validation" (the rows held out at training).

    A checkpoint trained on ``data.train_files`` has no named test split: score a file
    with ``--test`` instead. Its validation rows are its valid file's, or carved again.
    """
    data = config.data
    if data.prepared_dir and split == "validation":
        return list(open_prepared_labelled(data.prepared_dir).validation_rows)
    if data.train_files and split == "test":
        raise ValueError(
            f"split 'test': expected a checkpoint trained on AG News, got one trained on {data.train_files[0]}, "
            "which has no named test split; score a labelled file instead (evaluate --test FILE)"
        )
    if data.valid_files:
        return list(read_labelled_file(data, data.valid_files[0]).examples(config.class_names))
    data_dir = data_dir if data_dir is not None else data.data_dir
    if split == "test":
        return list(read_ag_news_csv(ag_news_path("test", data_dir), skip_malformed=skip_malformed).articles)
    rows: Sequence[LabelledRow]
    if data.train_files:
        rows = read_labelled_file(data, data.train_files[0], max_records=data.num_train).examples(config.class_names)
    else:
        path = ag_news_path("train", data_dir, data.train_file)
        rows = read_ag_news_csv(path, skip_malformed=data.skip_malformed).articles[: data.num_train or None]
    return carve_validation(rows, data.validation_fraction, data.split_seed, config.class_names)[1]


def split_files(config: ClassificationConfig, split: str, data_dir: str | None = None) -> list[Path]:
    """The files :func:`load_split` reads for ``split``: an evaluation's output must be none of them."""
    data = config.data
    if data.prepared_dir and split == "validation":
        return prepared_files(data.prepared_dir)
    if data.valid_files and split == "validation":
        return [Path(data.valid_files[0])]
    data_dir = data_dir if data_dir is not None else data.data_dir
    if split == "test":
        return [ag_news_path("test", data_dir)]
    # Validation is carved from the training file: writing over it would change the next run's data too.
    return [Path(data.train_files[0]) if data.train_files else ag_news_path("train", data_dir, data.train_file)]


DEFAULT_SPLIT = "test"  # the split `evaluate classification` scores when none is named
_TEST_FILE_OPTIONS = ("--text-field", "--label-field", "--file-format")


def evaluate(checkpoint: Path, split: str | None, options: EvaluationOptions) -> EvaluationReport:
    """Classify a split's (or ``--test``'s) texts and score the labels against the true ones."""
    confusion_path = options.option("--confusion-png")
    if confusion_path is not None and (Path(confusion_path).suffix.lower() != ".png" or Path(confusion_path).is_dir()):
        # Before any work: drawn after the scores, a bad name would cost the whole evaluation.
        raise ValueError(f"--confusion-png: expected a file name ending in .png, got {str(confusion_path)!r}")
    checkpoint = resolve_checkpoint(checkpoint)
    model, tokenizer, config = load_classifier(checkpoint)
    model = options.placed(model)
    test = options.option("--test")
    if test is not None:
        test = Path(test)
        for option, value in (("--split", split), ("--skip-malformed", options.option("--skip-malformed"))):
            if value is not None:
                raise ValueError(f"{option}: expected either it or --test FILE, got both")
        # Read with the checkpoint's fields and format unless the options override them, named as given.
        given_fields, given_label = options.option("--text-field"), options.option("--label-field")
        fields = config.data.text_fields if given_fields is None else tuple(given_fields)
        label = config.data.label_field if given_label is None else given_label
        check_field_names(fields, label, "--text-field", "--label-field")
        check_label_apart(fields, label, "--label-field", "--text-field" if given_label is None else "")
        file_format = options.option("--file-format")
        if file_format is None:
            # The file's own suffix first: the checkpoint's format was its training file's (csv for a .txt, say).
            file_format = format_of_suffix(test)
        read = read_labelled_file(
            config.data,
            test,
            text_fields=fields,
            label_field=label,
            file_format=file_format,
            format_name="--file-format",
            field_names=(
                "data.text_fields" if given_fields is None else "--text-field",
                "data.label_field" if given_label is None else "--label-field",
            ),
        )
        articles: Sequence[LabelledRow] = read.examples(config.class_names)
        # The file's name and a digest of its path: a/c.csv, b/c.csv, c.jsonl and a file named
        # like a split each get their own report, figure and card row.
        name, rows = file_test_name(test), "rows"
    else:
        name = split or DEFAULT_SPLIT
        for option in _TEST_FILE_OPTIONS:
            if options.option(option) is not None:
                raise ValueError(f"{option}: expected only with --test FILE, got it with --split {name}")
        skip_malformed = bool(options.option("--skip-malformed"))
        if name == "validation":
            check_held_out_unchanged(checkpoint, split_files(config, name, options.data_dir), "--test FILE")
        articles = load_split(config, name, options.data_dir, skip_malformed=skip_malformed)
        rows = "articles"
    # The split's files (the options' files, --test's among them, are checked by the registry).
    inputs: dict[str, object] = {}
    source = test
    if test is None:
        files = split_files(config, name, options.data_dir)
        inputs[f"the file the {name} split is read from"] = files
        # The file whose lines the articles' numbers are (a prepared folder's validation keeps the training file's).
        source = files[0] if len(files) == 1 and not (config.data.prepared_dir and name == "validation") else None
    data = config.data
    seen = inputs[TRAINED_ON] = trained_files(data, lambda: [ag_news_path("train", data.data_dir, data.train_file)])
    if test is not None:
        warn_if_seen("--test", [test], seen)
    output = options.output_file(checkpoint / f"report.{name}.json", inputs)
    figure_path = Path(options.option("--confusion-png") or checkpoint / f"confusion.{name}.png")
    if output.resolve() == figure_path.resolve():
        # The figure is drawn after the report is written: it would replace the report.
        raise ValueError(
            f"--output: expected a file other than the confusion matrix's picture {figure_path}, which is drawn "
            f"after the report, got {output}; give another --output or --confusion-png"
        )
    # The classify command's default, auto; int8 has no classifier copy.
    device = next(model.parameters()).device
    precision = resolve_inference_precision(options.precision, "auto", device, name="--precision", int8=False)
    report, _ = evaluate_classifier(model, tokenizer, articles, config.class_names, precision=precision, source=source)
    lines = [f"{checkpoint}, {test if test is not None else name}: {len(articles)} {rows}"]
    lines += report.lines()
    scored = {"split": name} if test is None else {"file": str(test.resolve())}
    written = options.write_output(
        output,
        json.dumps({**scored, "num_articles": len(articles), **report.to_dict()}, indent=2, ensure_ascii=False) + "\n",
    )
    lines += [f"report: {written}"]
    confusion = ConfusionFigure(
        path=figure_path,
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
        search="argmax",  # --precision int8 is refused above: a classifier has no int8 copy
        scores={"accuracy": report.accuracy, "macro_f1": report.macro_f1},
        dataset=None if test is None else Path(test).name,
    )
