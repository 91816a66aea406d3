"""``evaluate classification``: accuracy, per-class precision/recall/F1 and the confusion matrix of a checkpoint.

On the AG News test set (default), the validation rows, or any labelled CSV / TSV /
JSON Lines file (``--test FILE``, read with the checkpoint's text and label fields and
format unless ``--text-field`` / ``--label-field`` / ``--file-format`` say otherwise).
The report is written as JSON and the confusion matrix drawn as a PNG, beside the
checkpoint unless ``--output`` / ``--confusion-png`` say where.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from pathlib import Path

from transformer_lab.evaluation import ClassificationReport
from transformer_lab.hardware import resolve_inference_precision
from transformer_lab.tasks import classification
from transformer_lab.tasks.evaluation import ConfusionFigure, EvaluationOptions, EvaluationReport
from transformer_lab.training.checkpoint import resolve_checkpoint

_TEST_FILE_OPTIONS = ("--text-field", "--label-field", "--file-format")


def evaluate(checkpoint: Path, split: str | None, options: EvaluationOptions) -> EvaluationReport:
    """Classify a split's (or ``--test``'s) texts and score the labels against the true ones."""
    checkpoint = resolve_checkpoint(checkpoint)
    model, tokenizer, config = classification.load_classifier(checkpoint)
    model = options.placed(model)
    test = options.option("--test")
    if test is not None:
        test = Path(test)
        for option, value in (("--split", split), ("--skip-malformed", options.option("--skip-malformed"))):
            if value is not None:
                raise ValueError(f"{option}: expected either it or --test FILE, got both")
        articles: Sequence[classification.Example] = classification.load_labelled_test(
            config,
            test,
            text_fields=options.option("--text-field"),
            label_field=options.option("--label-field"),
            file_format=options.option("--file-format"),
        )
        name, rows = test.stem, "rows"
    else:
        name = split or str(classification.TASK.evaluation_split)
        for option in _TEST_FILE_OPTIONS:
            if options.option(option) is not None:
                raise ValueError(f"{option}: expected only with --test FILE, got it with --split {name}")
        skip_malformed = bool(options.option("--skip-malformed"))
        articles = classification.load_split(config, name, options.data_dir, skip_malformed=skip_malformed)
        rows = "articles"
    # The classify command's default, auto; int8 has no classifier copy.
    device = next(model.parameters()).device
    precision = resolve_inference_precision(options.precision, "auto", device, name="--precision", int8=False)
    report, _ = classification.evaluate_classifier(
        model, tokenizer, articles, config.class_names, precision=precision, source=test
    )
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
