"""Fine-tuning against training from scratch, side by side, on a few hundred in-domain pairs.

The "domain": the first ``--train-pairs`` pairs of Multi30k's validation split train, the
rest of it is the domain's validation set. Two runs of ``--steps`` optimizer steps each,
through the CLI:

- fine-tuned: ``train translation --init-from CHECKPOINT`` (its weights, tokenizer, model
  and the fine-tuning schedule of ``transformer_lab.training.finetune``);
- from scratch: the same model config (the preset's) and the same tokenizer
  (``data.tokenizer_file``, so that the losses compare token for token), random weights, the
  preset's rate with a warm-up of a third of the steps.

Reported: validation loss (cross-entropy per target token) and greedy BLEU / chrF++ on
the domain's validation pairs at every evaluation, and whether the fine-tuned run's
tokenizer is the checkpoint's. The CPU is printed first.

    .venv/bin/python benchmarks/bench_finetune.py --checkpoint runs/NAME/best --data-dir ~/data \
        [--train-pairs 500] [--steps 150] [--out runs/finetune-bench]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from transformer_lab.cli import main as cli
from transformer_lab.data import load_multi30k
from transformer_lab.hardware import machine_summary
from transformer_lab.tasks.translation import train as translation_train
from transformer_lab.training import config_to_dict, load_checkpoint_config, resolve_checkpoint
from transformer_lab.training.metrics_log import read_metrics

VOCABULARY_FIELDS = ("src_vocab_size", "tgt_vocab_size", "pad_id", "bos_id", "eos_id")


def write_tsv(path: Path, pairs: list[tuple[str, str]]) -> Path:
    path.write_text("".join(f"{source}\t{target}\n" for source, target in pairs), encoding="utf-8")
    return path


def evaluations(run: Path) -> list[dict]:
    rows = read_metrics(run / "metrics.jsonl")
    return [row for row in rows if row["event"] == "eval"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, required=True, help="a trained translation checkpoint or run folder")
    parser.add_argument("--data-dir", default=None, help="folder holding multi30k/")
    parser.add_argument("--train-pairs", type=int, default=500)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--out", type=Path, default=Path("runs/finetune-bench"))
    arguments = parser.parse_args()
    print("\n".join(machine_summary()))
    checkpoint = resolve_checkpoint(arguments.checkpoint)
    saved = load_checkpoint_config(checkpoint)
    languages = (saved["data"]["source_language"], saved["data"]["target_language"])
    pairs = load_multi30k("val", arguments.data_dir, *languages)
    if not 0 < arguments.train_pairs < len(pairs):
        raise SystemExit(f"--train-pairs: expected 1..{len(pairs) - 1}, got {arguments.train_pairs}")
    arguments.out.mkdir(parents=True, exist_ok=False)
    train = write_tsv(arguments.out / "domain-train.tsv", pairs[: arguments.train_pairs])
    valid = write_tsv(arguments.out / "domain-valid.tsv", pairs[arguments.train_pairs :])
    common = [
        "--train",
        str(train),
        "--valid",
        str(valid),
        "--source-language",
        languages[0],
        "--target-language",
        languages[1],
        "--set",
        f"train.max_steps={arguments.steps}",
        "--set",
        "train.epochs=0",
        "--set",
        f"train.eval_every_steps={arguments.eval_every}",
        "--set",
        "train.keep_last=0",
        "--set",
        "train.progress_bar=false",
        "--set",
        f"data.max_tokens={arguments.max_tokens}",
    ]
    preset = config_to_dict(translation_train.default_config().model)
    differing = [
        key for key, value in saved["model"].items() if key not in VOCABULARY_FIELDS and preset.get(key) != value
    ]
    if differing:
        raise SystemExit(
            f"--checkpoint: the from-scratch run uses the preset's model; the checkpoint differs in {differing}"
        )
    runs = {
        "fine-tuned": (arguments.out / "fine-tuned", ["--init-from", str(checkpoint)]),
        "from scratch": (
            arguments.out / "scratch",
            # The preset's rate, with a warm-up that fits the run (its 800 steps would not).
            [
                f"--set=data.tokenizer_file={checkpoint / 'tokenizer.json'}",
                "--set",
                "train.cooldown_steps=0",
                "--set",
                f"train.warmup_steps={max(1, arguments.steps // 3)}",
            ],
        ),
    }
    seconds = {}
    for name, (folder, extra) in runs.items():
        start = time.perf_counter()
        code = cli(["train", "translation", "--out", str(folder), *common, *extra])
        seconds[name] = time.perf_counter() - start
        if code != 0:
            raise SystemExit(f"{name}: the train command failed with exit code {code}")
    same_tokenizer = (runs["fine-tuned"][0] / "last" / "tokenizer.json").read_bytes() == (
        checkpoint / "tokenizer.json"
    ).read_bytes()
    print(
        f"\ncheckpoint {checkpoint}; {arguments.train_pairs} domain training pairs, "
        f"{len(pairs) - arguments.train_pairs} validation pairs; {arguments.steps} steps each; "
        f"fine-tuned tokenizer is the checkpoint's: {same_tokenizer}\n"
    )
    print("| run | step | val loss | val BLEU (greedy) | val chrF++ | wall s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, (folder, _) in runs.items():
        for row in evaluations(folder):
            print(
                f"| {name} | {row['step']} | {row['val_loss']:.3f} | {row['val_bleu']:.2f} | {row['val_chrf']:.2f} "
                f"| {seconds[name]:.0f} |"
            )


if __name__ == "__main__":
    main()
