"""AG News: our Transformer classifier against fastText (word bigrams), same rows, one run.

Both models learn from the same rows: the training file (by default the 12,000-row
subset of the shared data) minus the seeded, stratified validation split that the
Transformer uses to choose its best epoch. fastText needs no validation (a fixed recipe),
so it never sees those rows either: the comparison is on exactly the same training data.
(`--fasttext-all-rows` adds a second fastText trained on the validation rows too, the
most a peer could use.) Both are scored on the complete AG News test set (7,600 rows),
which neither saw and which chooses nothing.

- Transformer: `transformer_lab.tasks.classification` with its default config (the one
  `transformer-lab train classification` uses), changed only by `--epochs`,
  `--max-train-rows` and `--set key=value`. Its training wall time is what the Trainer
  reports (training, the per-epoch validation and checkpoints) plus the tokenizer's BPE
  training and the data reading, on `--threads` torch threads.
- fastText: the `fasttext` PyPI package (install with `pip install -e ".[bench]"`),
  `train_supervised` with the recipe of fastText's own AG News result (Joulin et al.,
  2016: word bigrams, dim 10, lr 0.25, 5 epochs, minCount 1) on lowercased text with
  punctuation split off, one thread and a fixed seed so that it is reproducible, hash
  buckets 2M instead of 10M (fewer bigrams than that occur in 12k rows; 10M would take
  400 MB). Its accuracy comes from `model.test` (fastText's own count) and is checked
  against per-article predictions made through `model.f.predict`, since the package's
  `model.predict` fails under NumPy 2 ("Unable to avoid copy").

Prints both test accuracies, per-class F1 and the Transformer's training time, and writes
a JSON of everything (configs included) to `--json` (default `OUT/results.json`).

    .venv/bin/python benchmarks/bench_classification.py --data-dir ~/data \\
        --out runs/bench-classification [--threads 2] [--epochs N] [--max-train-rows N]
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import re
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import torch

from transformer_lab.data import NewsArticle, ag_news_path, read_ag_news_csv
from transformer_lab.evaluation import ClassificationReport, classification_report
from transformer_lab.hardware import machine_summary
from transformer_lab.tasks.classification import data as classification_data
from transformer_lab.tasks.classification import evaluate as classification_evaluate
from transformer_lab.tasks.classification import train as classification_train
from transformer_lab.training import apply_overrides, config_to_dict

# fastText's published AG News recipe (bigram model), with fewer hash buckets (see above).
FASTTEXT_RECIPE: dict[str, Any] = {
    "wordNgrams": 2,
    "dim": 10,
    "lr": 0.25,
    "epoch": 5,
    "minCount": 1,
    "bucket": 2_000_000,
    "thread": 1,
    "seed": 0,
    "verbose": 0,
}
_FASTTEXT_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)?|[^\w\s]|_", re.UNICODE)


def fasttext_text(text: str) -> str:
    """Lowercased, punctuation split off, on one line: what fastText reads."""
    return " ".join(_FASTTEXT_TOKEN.findall(text.lower()))


def write_fasttext_file(articles: Sequence[NewsArticle], path: Path) -> Path:
    with open(path, "w", encoding="utf-8") as file:
        for article in articles:
            file.write(f"__label__{article.label} {fasttext_text(article.text)}\n")
    return path


def run_fasttext(
    train_articles: Sequence[NewsArticle],
    test_articles: Sequence[NewsArticle],
    class_names: Sequence[str],
    folder: Path,
    name: str,
) -> dict[str, Any]:
    try:
        import fasttext
    except ImportError:
        raise SystemExit(
            "bench_classification: the fasttext package is not installed; pip install -e '.[bench]'"
        ) from None
    train_path = write_fasttext_file(train_articles, folder / f"{name}.train.txt")
    test_path = write_fasttext_file(test_articles, folder / f"{name}.test.txt")
    start = time.perf_counter()
    model = fasttext.train_supervised(input=str(train_path), **FASTTEXT_RECIPE)
    seconds = time.perf_counter() - start
    count, precision_at_1, _ = model.test(str(test_path))
    predictions = []
    for article in test_articles:
        # model.f.predict is what model.predict wraps, minus the NumPy call that fails.
        ((_, label),) = model.f.predict(fasttext_text(article.text) + "\n", 1, 0.0, "strict")
        predictions.append(int(label.removeprefix("__label__")))
    report = classification_report(predictions, [article.label for article in test_articles], class_names)
    if count != len(test_articles) or abs(precision_at_1 - report.accuracy) > 1e-9:
        raise SystemExit(
            f"bench_classification: fastText's own test ({count} rows, P@1 {precision_at_1:.6f}) disagrees with "
            f"its per-article predictions ({len(test_articles)} rows, accuracy {report.accuracy:.6f})"
        )
    return {
        "name": name,
        "train_rows": len(train_articles),
        "train_seconds": seconds,
        "recipe": FASTTEXT_RECIPE,
        "fasttext_test_precision_at_1": precision_at_1,
        "test": report.to_dict(),
    }


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=None, help="folder holding ag_news/ (default: $TRANSFORMER_LAB_DATA)")
    parser.add_argument("--out", type=Path, required=True, help="run folder for the Transformer (must be new or empty)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads for the Transformer (default 2)")
    parser.add_argument("--epochs", type=int, default=None, help="Transformer epochs (default: the task's)")
    parser.add_argument("--max-train-rows", type=int, default=0, help="use only the first N rows of the training file")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a field of the Transformer's config (repeatable)",
    )
    parser.add_argument(
        "--fasttext-all-rows",
        action="store_true",
        help="also train fastText on the training and validation rows together",
    )
    parser.add_argument("--json", type=Path, default=None, help="results file (default OUT/results.json)")
    return parser.parse_args()


def print_report(name: str, report: ClassificationReport) -> None:
    f1 = "  ".join(f"{label} {value:.3f}" for label, value in zip(report.class_names, report.f1))
    print(f"{name:<34} test accuracy {report.accuracy:.4f}   F1: {f1}")


def main() -> None:
    arguments = parse_arguments()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if arguments.threads < 1:
        raise SystemExit(f"--threads must be >= 1, got {arguments.threads}")
    if arguments.out.exists() and any(arguments.out.iterdir()):
        raise SystemExit(f"--out: {arguments.out} already holds files; choose a new folder")
    torch.set_num_threads(arguments.threads)
    overrides = []
    if arguments.data_dir is not None:
        overrides.append(f"data.data_dir={arguments.data_dir}")
    overrides.append(f"data.num_train={arguments.max_train_rows}")
    if arguments.epochs is not None:
        overrides.append(f"train.epochs={arguments.epochs}")
    config = apply_overrides(classification_train.default_config(), [*overrides, *arguments.overrides])

    start = time.perf_counter()
    result = classification_train.train(config, arguments.out)
    transformer_seconds = time.perf_counter() - start
    # The same rows the run trained on, as text (the run itself reads them from its store).
    spec = classification_data.corpus_spec(result.config.data)
    train_articles, validation_articles, class_names, _ = spec.read(result.config.class_names)
    test_articles = read_ag_news_csv(ag_news_path("test", config.data.data_dir)).articles
    model, tokenizer, trained_config = classification_train.load_classifier(arguments.out / "best")
    transformer_report, _ = classification_evaluate.evaluate_classifier(
        model, tokenizer, test_articles, trained_config.class_names
    )

    with tempfile.TemporaryDirectory(prefix="bench-fasttext-") as folder:
        peers = [run_fasttext(train_articles, test_articles, class_names, Path(folder), "fasttext-same-rows")]
        if arguments.fasttext_all_rows:
            rows = [*train_articles, *validation_articles]
            everything = sorted(rows, key=lambda article: article.line_number)
            peers.append(run_fasttext(everything, test_articles, class_names, Path(folder), "fasttext-all-rows"))

    results = {
        "machine": {
            "platform": platform.platform(),
            "summary": machine_summary(),
            "torch": torch.__version__,
            "threads": arguments.threads,
        },
        "train_file": str(spec.train_file),
        "train_rows": len(train_articles),
        "validation_rows": len(validation_articles),
        "test_rows": len(test_articles),
        "transformer": {
            "train_wall_seconds": transformer_seconds,
            "trainer_wall_seconds": result.summary["wall_seconds"],
            "steps": result.summary["steps"],
            "epochs": result.summary["epochs_completed"],
            "best_val_accuracy": result.summary["best_value"],
            "config": config_to_dict(result.config),
            "test": transformer_report.to_dict(),
        },
        "peers": peers,
    }
    json_path = arguments.json or arguments.out / "results.json"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")

    print()
    print(
        f"training rows {len(train_articles)} (validation {len(validation_articles)} held out of "
        f"{spec.train_file}), test rows {len(test_articles)}"
    )
    print_report(f"Transformer ({result.summary['epochs_completed']} epochs)", transformer_report)
    for peer in peers:
        f1 = "  ".join(f"{name} {values['f1']:.3f}" for name, values in peer["test"]["per_class"].items())
        print(f"{peer['name'] + ' (bigrams)':<34} test accuracy {peer['test']['accuracy']:.4f}   F1: {f1}")
    print(
        f"Transformer training wall time {transformer_seconds:.1f} s on {arguments.threads} thread(s) "
        f"(best validation accuracy {result.summary['best_value']:.4f}); fastText {peers[0]['train_seconds']:.1f} s"
    )
    print(f"results: {json_path}")


if __name__ == "__main__":
    main()
