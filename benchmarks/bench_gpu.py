"""Decoding and training on a GPU, in one run of under six minutes, printed as one table.

1. Matrix-multiply peak: an N x N product in bf16 and in fp32 (no TF32: torch's default)
   on the device, median of repeats: the denominators of the model FLOP utilisation (MFU).
2. The translation preset end to end, as a user runs it: ``python -m transformer_lab train
   translation`` (the default preset: Multi30k, 34 epochs, a greedy validation each,
   precision auto) on the device. Its wall time, or, past ``--preset-timeout``, a SIGTERM
   (the run saves ``last/``) and the epochs it had done.
3. Decoding ``test_2016_flickr`` (1,000 sentences) with that run's checkpoint (``best/``,
   else ``last/``): batch 64 and 256, beam 1 and 5, precision fp32, bf16 and auto (the
   checkpoint's other settings: length limits, length penalty); generated target tokens/s
   (eos included), sentences/s, seconds and cased BLEU. Sources are batched by length, as
   ``translate`` and ``evaluate`` do.
4. Training throughput of the translation and base presets' models on their own Multi30k
   batches (the base preset's 37k BPE, which Multi30k fills to about 26.7k): target
   tokens/s over a block of steps (forward, loss, backward, clipping, Adam, as
   ``bench_train.py`` times them) and MFU, the matmul FLOPs of the real tokens
   (``bench_train.step_flops``) over the measured peak of the precision auto picks; and the
   base recipe's estimated time to the paper's 100k steps (24,576-token batches: 4,096 x 6
   accumulated) at that speed.

``--small`` is a dry run on the CPU in about two minutes: a small model for the preset run
(two epochs on 1,500 pairs), 96 test sentences, a few training steps on 512-token batches.
Its figures only show that every path runs.

    PYTHONPATH=src python benchmarks/bench_gpu.py [--device cuda] [--data-dir DIR]
        [--preset-timeout 180] [--checkpoint DIR] [--out DIR]
    .venv/bin/python benchmarks/bench_gpu.py --small --threads 1
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from bench_decode import synchronize
from bench_train import step_flops
from bench_train_precision import Runner

from transformer_lab.data import Seq2SeqBatch, load_multi30k
from transformer_lab.decoding import decoding_model
from transformer_lab.decoding.search_settings import with_search
from transformer_lab.decoding.sources import candidates_of, decode_sources
from transformer_lab.evaluation import corpus_bleu
from transformer_lab.hardware import machine_summary, resolve_inference_precision, resolve_precision
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.tasks import seq2seq
from transformer_lab.tasks.translation import data as translation_data
from transformer_lab.tasks.translation import train as translation_train

ROOT = Path(__file__).resolve().parents[1]
TEST_SPLIT = "test_2016_flickr"
PRECISIONS = ("fp32", "bf16", "auto")
PAPER_STEPS = 100_000
# The small model and data of the dry run (--set overrides of the preset run).
SMALL_PRESET = (
    "data.num_train=1500",
    "data.num_validation=40",
    "data.vocab_size=800",
    "model.d_model=64",
    "model.nhead=2",
    "model.num_encoder_layers=2",
    "model.num_decoder_layers=2",
    "model.dim_feedforward=128",
    "train.epochs=2",
    "train.warmup_steps=20",
    "train.cooldown_steps=0",
)


@dataclass
class Row:
    """One line of the table; blank cells where a figure does not apply."""

    part: str
    setting: str
    tokens_per_second: float | None = None
    sentences_per_second: float | None = None
    seconds: float | None = None
    mfu: float | None = None
    notes: str = ""


@dataclass(frozen=True)
class Sizes:
    """What the run measures at: the GPU's sizes, or the dry run's."""

    peak_size: int
    test_sentences: int  # 0 = all
    train_steps: int  # batches per timed block
    train_repeats: int
    warmup_batches: int
    max_tokens: int  # padded tokens per training batch
    preset_overrides: tuple[str, ...]


GPU_SIZES = Sizes(8192, 0, 10, 3, 3, 4096, ())
SMALL_SIZES = Sizes(512, 96, 2, 1, 1, 512, SMALL_PRESET)


def matmul_peak(dtype: torch.dtype, device: torch.device, size: int, repeats: int = 7) -> float:
    """Measured FLOP/s of a ``size`` x ``size`` matrix product in ``dtype`` on ``device`` (median of ``repeats``)."""
    left = torch.randn(size, size, device=device).to(dtype)
    right = torch.randn(size, size, device=device).to(dtype)
    # Several products per timing on a GPU, where one is short next to the cost of the clock and the sync.
    products = 5 if device.type == "cuda" else 1
    for _ in range(3):
        torch.mm(left, right)
    synchronize(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(products):
            torch.mm(left, right)
        synchronize(device)
        times.append((time.perf_counter() - start) / products)
    return 2 * size**3 / statistics.median(times)


def train_preset(
    run_dir: Path, device: torch.device, data_dir: str | None, sizes: Sizes, timeout: float
) -> tuple[Row, Path]:
    """Run ``train translation`` (default preset) as a user would; its row and the checkpoint to decode with."""
    command = [sys.executable, "-m", "transformer_lab", "train", "translation", "--out", str(run_dir)]
    command += ["--preset", "default", "--precision", "auto", "--set", f"train.device={device}"]
    command += ["--set", "train.progress_bar=false"]
    for override in sizes.preset_overrides:
        command += ["--set", override]
    if data_dir is not None:
        command += ["--data-dir", data_dir]
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), environment.get("PYTHONPATH")]))
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    log_path = run_dir.parent / f"{run_dir.name}.log"
    start = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment)
        try:
            process.wait(timeout=timeout)
            stopped = False
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGTERM)  # finishes its step, saves last/, exits
            stopped = True
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    seconds = time.perf_counter() - start
    if process.returncode != 0 and not stopped:
        raise SystemExit(f"train translation failed (exit {process.returncode}); its output: {log_path}")
    evaluations = [row for row in _metrics(run_dir) if row.get("event") == "eval"]
    epochs = max((int(row.get("epoch", 0)) for row in evaluations), default=0)
    planned = _planned_epochs(sizes)
    best_bleu = max((float(row["val_bleu"]) for row in evaluations if "val_bleu" in row), default=float("nan"))
    if stopped:
        projected = seconds / epochs * planned if epochs else float("nan")
        notes = f"stopped at {timeout:.0f} s after {epochs} of {planned} epochs (about {projected:.0f} s for all)"
    else:
        notes = f"{epochs} epochs, each validated"
    row = Row("train translation preset", f"{planned} epochs, auto precision, end to end", seconds=seconds)
    row.notes = f"{notes}; best val BLEU (greedy) {best_bleu:.2f}"
    checkpoint = run_dir / "best" if (run_dir / "best").is_dir() else run_dir / "last"
    if not checkpoint.is_dir():
        raise SystemExit(f"train translation left no checkpoint in {run_dir}; its output: {log_path}")
    return row, checkpoint


def _planned_epochs(sizes: Sizes) -> int:
    epochs = translation_train.default_config().train.epochs
    for override in sizes.preset_overrides:
        key, _, value = override.partition("=")
        if key == "train.epochs":
            epochs = int(value)
    return epochs


def _metrics(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def decoding_rows(checkpoint: Path, device: torch.device, data_dir: str | None, sizes: Sizes) -> list[Row]:
    """Decode the test split at every (batch, beam, precision) with the checkpoint's other settings."""
    model, tokenizers, config = translation_train.load_translator(checkpoint)
    model = model.to(device).eval()
    pairs = load_multi30k(TEST_SPLIT, data_dir, config.data.source_language, config.data.target_language)
    if sizes.test_sentences:
        pairs = pairs[: sizes.test_sentences]
    encoded = [tokenizers.source.encode(source) for source, _ in pairs]
    references = [target for _, target in pairs]
    rows = []
    seconds_of: dict[tuple[int, int, str], float] = {}
    for precision in PRECISIONS:
        resolved = resolve_inference_precision(precision, "fp32", device)
        decoding = decoding_model(model, resolved)  # the bf16 copy made once, as the commands do
        # Warm-up: kernels, cuBLAS handles and the allocator, outside the timed runs.
        decode_sources(decoding, encoded[:16], with_search(config.decode, beam=5, precision=resolved))
        for batch_size in (64, 256):
            for beam in (1, 5):
                decode_config = with_search(config.decode, beam=beam, precision=resolved)
                synchronize(device)
                start = time.perf_counter()
                found = decode_sources(decoding, encoded, decode_config, batch_size=batch_size)
                synchronize(device)
                seconds = time.perf_counter() - start
                seconds_of[(batch_size, beam, precision)] = seconds
                tokens = sum(len(hypotheses[0].ids) for hypotheses in found if hypotheses)
                texts = [
                    candidates_of(hypotheses[:1], tokenizers.target.decode)[0].text if hypotheses else ""
                    for hypotheses in found
                ]
                bleu = corpus_bleu(texts, references).score
                name = precision if precision != "auto" else f"auto (= {resolved})"
                notes = f"BLEU {bleu:.2f}"
                if precision == "auto":
                    fp32_seconds = seconds_of[(batch_size, beam, "fp32")]
                    notes += f"; {fp32_seconds / seconds:.2f}x fp32's speed"
                rows.append(
                    Row(
                        f"decode {TEST_SPLIT} ({len(pairs)})",
                        f"batch {batch_size}, beam {beam}, {name}",
                        tokens / seconds,
                        len(pairs) / seconds,
                        seconds,
                        notes=notes,
                    )
                )
    return rows


def middle_batches(
    data: seq2seq.Seq2SeqData, config: translation_train.TranslationConfig, count: int, device: torch.device
) -> list[Seq2SeqBatch]:
    """``count`` batches from the middle of epoch 0 (typical lengths), on ``device``."""
    epoch = translation_data.epoch_batches(data, config.data, epoch=0)
    start = max(0, len(epoch) // 2 - count // 2)
    return [epoch[position].to(device) for position in range(start, min(len(epoch), start + count))]  # lazy: no slices


def training_rows(
    name: str,
    config: translation_train.TranslationConfig,
    data: seq2seq.Seq2SeqData,
    device: torch.device,
    sizes: Sizes,
    peaks: dict[str, float],
) -> list[Row]:
    """Target tokens/s and MFU of the preset's model on its own batches; the base recipe's time to 100k steps."""
    target_size = None if data.vocabulary.is_joint else data.vocabulary.target.vocab_size
    config = seq2seq.with_vocabulary(config, data.vocabulary.source.vocab_size, target_size)
    precision = resolve_precision(config.train.precision, device)
    torch.manual_seed(0)
    model = Seq2SeqTransformer.from_config(config.model).to(device)
    runner = Runner(model, precision, smoothing=config.train.label_smoothing)
    batches = middle_batches(data, config, sizes.warmup_batches + sizes.train_steps, device)
    warmup, timed = batches[: sizes.warmup_batches], batches[sizes.warmup_batches :]
    runner.train(warmup)
    tokens = sum(batch.num_target_tokens for batch in timed)
    flops = sum(step_flops(config.model, batch) for batch in timed)
    times = []
    for _ in range(sizes.train_repeats):
        synchronize(device)
        start = time.perf_counter()
        runner.train(timed)  # reads the last step's loss alone, as the Trainer reads at a logged row; ends synchronised
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    rate = tokens / seconds
    parameters = sum(parameter.numel() for parameter in model.parameters())
    setting = (
        f"d_model {config.model.d_model}, {config.model.num_encoder_layers}+{config.model.num_decoder_layers} "
        f"layers, vocabulary {config.model.tgt_vocab_size}, {precision}"
    )
    row = Row(
        f"train {name} preset",
        setting,
        rate,
        seconds=seconds,
        mfu=flops / seconds / peaks[precision],
        notes=f"{parameters / 1e6:.1f} M parameters; {len(timed)} batches of <= {config.data.max_tokens} tokens, "
        f"{flops / tokens / 1e9:.2f} GFLOP per target token",
    )
    rows = [row]
    if name == "base":
        per_step = tokens / len(timed) * config.train.grad_accum_steps  # target tokens per optimizer step
        estimate = PAPER_STEPS * per_step / rate
        rows.append(
            Row(
                "base recipe, estimate",
                f"{PAPER_STEPS:,} steps of {config.train.grad_accum_steps} batches",
                seconds=estimate,
                notes=f"{estimate / 3600:.1f} h at the speed above ({per_step:,.0f} target tokens a step)",
            )
        )
    return rows


def print_table(rows: list[Row]) -> None:
    def cell(value: float | None, form: str) -> str:
        return "" if value is None else format(value, form)

    print("| part | setting | tokens/s | sentences/s | seconds | MFU | notes |")
    print("|---|---|---:|---:|---:|---:|---|")
    for row in rows:
        print(
            f"| {row.part} | {row.setting} | {cell(row.tokens_per_second, ',.0f')} | "
            f"{cell(row.sentences_per_second, ',.1f')} | {cell(row.seconds, ',.2f')} | {cell(row.mfu, '.1%')} | "
            f"{row.notes} |"
        )


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="a dry run of every part at small sizes (the CPU)")
    parser.add_argument("--data-dir", default=None, help="folder holding multi30k/ (default: $TRANSFORMER_LAB_DATA)")
    parser.add_argument(
        "--preset-timeout", type=float, default=180.0, help="seconds the preset run may take before SIGTERM"
    )
    parser.add_argument(
        "--checkpoint", type=Path, default=None, help="decode this checkpoint instead of running the preset"
    )
    parser.add_argument("--out", type=Path, default=None, help="folder for the preset run (default: a temporary one)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads; 0 keeps torch's default")
    return parser.parse_args()


def main() -> None:
    arguments = parse_arguments()
    if arguments.threads:
        torch.set_num_threads(arguments.threads)
    device = torch.device(arguments.device)
    if device.type == "cpu" and not arguments.small:
        raise SystemExit("--device cpu: this benchmark sizes its runs for a GPU; on the CPU pass --small (a dry run)")
    sizes = SMALL_SIZES if arguments.small else GPU_SIZES
    if arguments.out is not None and arguments.checkpoint is None and (arguments.out / "translation").exists():
        # Said now, not after the matmul peaks: a lent GPU's minutes are few.
        raise SystemExit(
            f"--out: expected a folder without a translation/ run (the preset trains there), got {arguments.out}, "
            "which holds one; name a new folder, or pass --checkpoint to decode that run"
        )
    started = time.perf_counter()
    print("\n".join(machine_summary(device)))
    print(f"device {device}{', dry run (--small)' if arguments.small else ''}\n", flush=True)

    rows = []
    peaks = {}
    for name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        peaks[name] = matmul_peak(dtype, device, sizes.peak_size)
        rows.append(
            Row(
                "matmul peak",
                f"{name}, {sizes.peak_size} x {sizes.peak_size}",
                notes=f"{peaks[name] / 1e12:.2f} TFLOP/s",
            )
        )

    with tempfile.TemporaryDirectory(prefix="bench_gpu_") as temporary:
        out = arguments.out or Path(temporary)
        checkpoint = arguments.checkpoint
        if checkpoint is None:
            preset_row, checkpoint = train_preset(
                out / "translation", device, arguments.data_dir, sizes, arguments.preset_timeout
            )
            rows.append(preset_row)
        rows += decoding_rows(checkpoint, device, arguments.data_dir, sizes)

    for name, preset in (
        ("translation", translation_train.default_config()),
        ("base", translation_train.base_config()),
    ):
        config = dataclasses.replace(
            preset,
            data=dataclasses.replace(preset.data, data_dir=arguments.data_dir, max_tokens=sizes.max_tokens),
        )
        if arguments.small:
            config.data = dataclasses.replace(config.data, num_train=1500, vocab_size=min(config.data.vocab_size, 2000))
        data = translation_data.build_data(config.data)
        rows += training_rows(name, config, data, device, sizes, peaks)

    print_table(rows)
    print(f"\nwhole run: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
