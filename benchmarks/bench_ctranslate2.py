"""Our decoder against CTranslate2 on the same weights: greedy and beam search, one thread.

One random Seq2SeqTransformer of the translation preset's shape (d_model 256, 4 heads,
3+3 layers, feed-forward 1024, a shared vocabulary of 8000, all embeddings tied,
post-norm), exported with ``transformer_lab.export.export_model``. The generator's bias
on eos is set to -1e9 before the export, so that no engine can stop early: every
run decodes exactly the requested number of tokens, and ms/step compares like with like.

Four engines (five where the CPU multiplies bf16 fast), timed in alternation in this one
process (the order rotates every repeat, so that a slow patch of a shared machine hits all
of them), median of ``--repeats`` runs:

- ours: ``greedy_search`` / ``beam_search`` (key/value cache, float32, torch);
- ours int8: the same calls on ``transformer_lab.models.quantization.int8_for_inference``'s
  copy (torch dynamic int8 quantization of the feed-forward layers and the generator):
  an approximation; the table gives the share of rows whose ids equal ours (float32);
- CTranslate2 float32 (``compute_type="float32"``): must give our ids exactly (checked,
  and the table says so);
- CTranslate2 int8 (``compute_type="int8"``, the same export quantized on load): an
  approximation; the table gives the share of rows whose ids equal ours (float32);
- ours bf16, only where ``hardware.bf16_support`` says bf16 is fast (AMX or AVX512-BF16;
  elsewhere it runs ~100x slower): the same calls on
  ``transformer_lab.models.bfloat16.bf16_for_inference``'s copy, what ``--precision auto``
  decodes with there. CTranslate2 has no bf16 on the CPU, so its ratios are to CTranslate2's
  float32 and int8.

ms/step is the median seconds of one whole decoding (encoder included) divided by the
new tokens, in milliseconds: the time of one step of the whole batch.

Default mode, three cases: greedy, batch 1, 64 tokens; greedy, batch 32, 64 tokens;
beam 5, batch 32, 40 tokens (length penalty 0 on both sides), a Markdown table: ms/step of
each engine, ours fp32 / CTranslate2 fp32, ours int8 / CTranslate2 int8, ours bf16 against
both, and the id checks.

``--batch-sweep B1 B2 ...``: greedy decoding of ``--new-tokens`` tokens (default 64) at each
batch size instead, the engines alternated as above; prints the same table by batch size and draws ms/step
against the batch size (log-log, one line per engine, the machine in a footnote) into
``--figure`` (default docs/figures/decode-ms-per-step.png; needs matplotlib, the plots extra).

Sources are 24 random ordinary tokens (seeded by the batch size). torch and CTranslate2
both run on one intra-op thread (``--threads``); on a shared machine pin the process to a
quiet core (``taskset -c N``).

    .venv/bin/python benchmarks/bench_ctranslate2.py [--repeats 5] [--threads 1]
    .venv/bin/python benchmarks/bench_ctranslate2.py --batch-sweep 1 2 4 8 16 32 64 \\
        [--new-tokens 64] [--repeats 5] [--figure docs/figures/decode-ms-per-step.png]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from torch import Tensor

from transformer_lab.allocator import configure_allocator
from transformer_lab.decoding import beam_search, greedy_search
from transformer_lab.export import export_model
from transformer_lab.hardware import bf16_support, machine_summary
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.models.bfloat16 import bf16_for_inference
from transformer_lab.models.quantization import int8_for_inference

PAD_ID, BOS_ID, EOS_ID = 0, 2, 3
SPECIALS = ["<pad>", "<unk>", "<bos>", "<eos>"]
FIRST_TOKEN = len(SPECIALS)
DEFAULT_FIGURE = Path(__file__).resolve().parent.parent / "docs" / "figures" / "decode-ms-per-step.png"
# The engines, in the order of the tables and the figure; "ours" (float32) is the reference.
ENGINES = ("ours", "ours int8", "ct2 float32", "ct2 int8")
# Timed too where this CPU multiplies bf16 fast (hardware.bf16_support); elsewhere it would take ~100x longer.
BF16_ENGINE = "ours bf16"


@dataclass(frozen=True)
class Case:
    name: str
    beam_size: int  # 1: greedy
    batch_size: int
    new_tokens: int


CASES = (
    Case("greedy, batch 1, 64 tokens", 1, 1, 64),
    Case("greedy, batch 32, 64 tokens", 1, 32, 64),
    Case("beam 5, batch 32, 40 tokens", 5, 32, 40),
)

Decoder = Callable[[Tensor, Case], list[list[int]]]


def build_model(vocab_size: int) -> Seq2SeqTransformer:
    """The random translation-preset-shaped model, eos forbidden through the generator's bias."""
    torch.manual_seed(0)
    model = Seq2SeqTransformer(
        src_vocab_size=vocab_size,
        tgt_vocab_size=vocab_size,
        d_model=256,
        nhead=4,
        num_encoder_layers=3,
        num_decoder_layers=3,
        dim_feedforward=1024,
        dropout=0.0,
        norm_first=False,
        max_len=256,
        tie_embeddings="all",
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
    ).eval()
    with torch.no_grad():
        # In the model itself, not a logits processor: the exported weights carry it too.
        model.generator.bias[EOS_ID] = -1e9
    return model


def random_sources(batch_size: int, length: int, vocab_size: int, seed: int) -> Tensor:
    """Shape: returns LongTensor[batch_size, length] of ordinary (non-special) ids, no padding."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(FIRST_TOKEN, vocab_size, (batch_size, length), generator=generator)


def decode_ours(model: Seq2SeqTransformer, src_ids: Tensor, case: Case) -> list[list[int]]:
    if case.beam_size == 1:
        output = greedy_search(model, src_ids, case.new_tokens)
    else:
        output = beam_search(model, src_ids, case.beam_size, case.new_tokens, length_penalty=0.0)
    return [sentence[0].ids for sentence in output.hypotheses]


def ctranslate2_decoder(translator, tokens: list[str]) -> Decoder:
    """A function decoding like ``decode_ours`` with a CTranslate2 Translator."""
    ids_of = {token: token_id for token_id, token in enumerate(tokens)}

    def decode(src_ids: Tensor, case: Case) -> list[list[int]]:
        results = translator.translate_batch(
            [[tokens[token_id] for token_id in row] for row in src_ids.tolist()],
            beam_size=case.beam_size,
            length_penalty=0.0,
            max_decoding_length=case.new_tokens,
            min_decoding_length=0,
            return_end_token=True,
        )
        return [[ids_of[token] for token in result.hypotheses[0]] for result in results]

    return decode


@dataclass(frozen=True)
class Timing:
    """One case timed: the ids of every engine (from the warm-up) and its median ms per step."""

    outputs: dict[str, list[list[int]]]
    ms_per_step: dict[str, float]

    def equal_rows(self, name: str) -> int:
        """How many rows of engine ``name`` have exactly our (float32) ids."""
        return sum(a == b for a, b in zip(self.outputs[name], self.outputs["ours"]))


def time_case(engines: dict[str, Decoder], src_ids: Tensor, case: Case, repeats: int) -> Timing:
    """One warm-up run of every engine (its ids kept), then ``repeats`` alternated timed runs each."""
    outputs = {name: decode(src_ids, case) for name, decode in engines.items()}  # warm-up and check
    for name in ("ours", "ours int8", BF16_ENGINE):
        if name in outputs and any(len(ids) != case.new_tokens for ids in outputs[name]):
            raise RuntimeError(
                f"{case.name}: a row of {name} stopped before {case.new_tokens} tokens; eos was not forbidden"
            )
    times: dict[str, list[float]] = {name: [] for name in engines}
    names = list(engines)
    for repeat in range(repeats):
        for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
            start = time.perf_counter()
            engines[name](src_ids, case)
            times[name].append(time.perf_counter() - start)
    ms_per_step = {name: 1e3 * statistics.median(seconds) / case.new_tokens for name, seconds in times.items()}
    return Timing(outputs, ms_per_step)


def table_header(first_column: str, engines: dict[str, Decoder]) -> list[str]:
    """The Markdown header of the results table: ms/step per engine, the ratios, the id checks."""
    bf16 = BF16_ENGINE in engines
    columns = [first_column, "ours fp32", "ours int8", *(["ours bf16"] if bf16 else []), "ct2 fp32", "ct2 int8"]
    columns += ["ours fp32 / ct2 fp32", "ours int8 / ct2 int8"]
    columns += ["ours bf16 / ct2 fp32", "ours bf16 / ct2 int8"] if bf16 else []
    columns += ["ct2 fp32 ids = ours", "rows = ours fp32: ours int8, ct2 int8" + (", ours bf16" if bf16 else "")]
    return ["| " + " | ".join(columns) + " |", "|---" + "|---:" * (len(columns) - 3) + "|:---:|---:|"]


def table_row(first_column: str, timing: Timing, batch_size: int) -> str:
    """One case's line of the results table (``table_header``'s columns)."""
    ms = timing.ms_per_step
    bf16 = BF16_ENGINE in ms
    times = [ms["ours"], ms["ours int8"], *([ms[BF16_ENGINE]] if bf16 else []), ms["ct2 float32"], ms["ct2 int8"]]
    ratios = [ms["ours"] / ms["ct2 float32"], ms["ours int8"] / ms["ct2 int8"]]
    ratios += [ms[BF16_ENGINE] / ms["ct2 float32"], ms[BF16_ENGINE] / ms["ct2 int8"]] if bf16 else []
    equal = [timing.equal_rows(name) for name in ("ours int8", "ct2 int8", *([BF16_ENGINE] if bf16 else []))]
    cells = [first_column, *(f"{value:.2f}" for value in times), *(f"{ratio:.2f}x" for ratio in ratios)]
    cells.append("yes" if timing.outputs["ct2 float32"] == timing.outputs["ours"] else "NO")
    cells.append(", ".join(f"{count}/{batch_size}" for count in equal))
    return "| " + " | ".join(cells) + " |"


def run_cases(engines: dict[str, Decoder], arguments: argparse.Namespace) -> None:
    """The default mode: the three cases of the module docstring, one line each."""
    print()
    print("ms per step of the whole batch (median):")
    print()
    print("\n".join(table_header("case", engines)))
    for case in CASES:
        src_ids = random_sources(case.batch_size, arguments.source_length, arguments.vocab_size, seed=case.batch_size)
        timing = time_case(engines, src_ids, case, arguments.repeats)
        print(table_row(case.name, timing, case.batch_size))


def run_batch_sweep(engines: dict[str, Decoder], arguments: argparse.Namespace, footnote: str) -> None:
    """``--batch-sweep``: greedy decoding at each batch size, a Markdown table, and the figure."""
    rows: list[tuple[int, Timing]] = []
    for batch_size in arguments.batch_sweep:
        case = Case(f"greedy, batch {batch_size}, {arguments.new_tokens} tokens", 1, batch_size, arguments.new_tokens)
        src_ids = random_sources(batch_size, arguments.source_length, arguments.vocab_size, seed=batch_size)
        rows.append((batch_size, time_case(engines, src_ids, case, arguments.repeats)))
    print()
    print(f"greedy decoding, {arguments.new_tokens} new tokens, ms per step of the whole batch (median):")
    print()
    print("\n".join(table_header("batch", engines)))
    for batch_size, timing in rows:
        print(table_row(str(batch_size), timing, batch_size))
    if arguments.no_figure:
        return
    from transformer_lab.lab.result_plots import plot_ms_per_step  # matplotlib (the plots extra) only here

    labels = {
        "ours": "ours fp32",
        "ours int8": "ours int8",
        BF16_ENGINE: "ours bf16",
        "ct2 float32": "CTranslate2 fp32",
        "ct2 int8": "CTranslate2 int8",
    }
    path = plot_ms_per_step(
        arguments.figure,
        [batch_size for batch_size, _ in rows],
        {labels[name]: [timing.ms_per_step[name] for _, timing in rows] for name in engines},
        title=f"greedy decoding of {arguments.new_tokens} tokens: ms per step by batch size",
        footnote=footnote,
    )
    print()
    print(f"figure: {path}")


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per engine and case (after one warm-up)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads of torch and of CTranslate2")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--source-length", type=int, default=24)
    parser.add_argument(
        "--batch-sweep",
        type=int,
        nargs="+",
        metavar="BATCH",
        help="greedy decoding at each of these batch sizes instead of the three default cases",
    )
    parser.add_argument(
        "--new-tokens", type=int, default=64, help="tokens decoded per row in --batch-sweep (default 64)"
    )
    parser.add_argument(
        "--figure",
        type=Path,
        default=DEFAULT_FIGURE,
        help="the --batch-sweep figure (PNG; default docs/figures/decode-ms-per-step.png)",
    )
    parser.add_argument("--no-figure", action="store_true", help="--batch-sweep: print the table only")
    parser.add_argument(
        "--default-allocator",
        action="store_true",
        help="leave glibc's malloc as it is (by default freed memory is kept, as the console script does)",
    )
    arguments = parser.parse_args()
    if arguments.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {arguments.repeats}")
    if arguments.new_tokens < 1:
        parser.error(f"--new-tokens must be >= 1, got {arguments.new_tokens}")
    if arguments.batch_sweep is not None and min(arguments.batch_sweep) < 1:
        parser.error(f"--batch-sweep sizes must be >= 1, got {arguments.batch_sweep}")
    return arguments


def main() -> None:
    import ctranslate2

    arguments = parse_arguments()
    torch.set_num_threads(arguments.threads)
    summary = machine_summary()
    print("\n".join(summary))
    print(configure_allocator(keep=not arguments.default_allocator))
    versions = (
        f"torch {torch.__version__}, ctranslate2 {ctranslate2.__version__}, {arguments.threads} thread(s) each, "
        f"median of {arguments.repeats} runs"
    )
    print(versions)
    model = build_model(arguments.vocab_size)
    model_int8 = int8_for_inference(model)
    tokens = SPECIALS + [f"w{token_id}" for token_id in range(FIRST_TOKEN, arguments.vocab_size)]
    with tempfile.TemporaryDirectory() as folder:
        out_dir = export_model(model, tokens, tokens, Path(folder) / "ct2")
        engines: dict[str, Decoder] = {
            "ours": lambda src_ids, case: decode_ours(model, src_ids, case),
            "ours int8": lambda src_ids, case: decode_ours(model_int8, src_ids, case),
        }
        for compute_type in ("float32", "int8"):
            translator = ctranslate2.Translator(
                str(out_dir), device="cpu", compute_type=compute_type, inter_threads=1, intra_threads=arguments.threads
            )
            engines[f"ct2 {compute_type}"] = ctranslate2_decoder(translator, tokens)
        assert tuple(engines) == ENGINES
        if bf16_support(torch.device("cpu")).fast:
            model_bf16 = bf16_for_inference(model)
            engines[BF16_ENGINE] = lambda src_ids, case: decode_ours(model_bf16, src_ids, case)
        if arguments.batch_sweep:
            footnote = (
                f"{summary[0]}; {versions}. Random weights of the translation preset's shape "
                f"(d_model 256, 3+3 layers, vocabulary {arguments.vocab_size}), sources of "
                f"{arguments.source_length} random tokens, eos forbidden; ms/step = median seconds "
                f"of a whole decoding / new tokens."
            )
            run_batch_sweep(engines, arguments, footnote)
        else:
            run_cases(engines, arguments)


if __name__ == "__main__":
    main()
