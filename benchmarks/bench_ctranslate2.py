"""Our decoder against CTranslate2 on the same weights: greedy and beam search, one thread.

One random Seq2SeqTransformer of the translation preset's shape (d_model 256, 4 heads,
3+3 layers, feed-forward 1024, a shared vocabulary of 8000, all embeddings tied,
post-norm), exported with ``transformer_lab.export.export_model``. The generator's bias
on eos is set to -1e9 before the export, so that neither engine can stop early: every
run decodes exactly the requested number of tokens, and ms/step compares like with like.

Three engines, timed in alternation in this one process (the order rotates every repeat,
so that a slow patch of a shared machine hits all of them), median of ``--repeats`` runs:

- ours: ``greedy_search`` / ``beam_search`` (key/value cache, float32, torch);
- CTranslate2 float32 (``compute_type="float32"``): must give our ids exactly (checked,
  and the table says so);
- CTranslate2 int8 (``compute_type="int8"``, the same export quantized on load): an
  approximation; the table gives the share of rows whose ids equal ours.

Cases: greedy, batch 1, 64 tokens; greedy, batch 32, 64 tokens; beam 5, batch 32, 40
tokens (length penalty 0 on both sides). Sources are 24 random ordinary tokens.
torch and CTranslate2 both run on one intra-op thread (``--threads``).

    .venv/bin/python benchmarks/bench_ctranslate2.py [--repeats 5] [--threads 1]
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

from transformer_lab.decoding import beam_search, greedy_search
from transformer_lab.export import export_model
from transformer_lab.hardware import machine_summary
from transformer_lab.models import Seq2SeqTransformer

PAD_ID, BOS_ID, EOS_ID = 0, 2, 3
SPECIALS = ["<pad>", "<unk>", "<bos>", "<eos>"]
FIRST_TOKEN = len(SPECIALS)


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


def build_model(vocab_size: int) -> Seq2SeqTransformer:
    """The random translation-preset-shaped model, eos forbidden through the generator's bias."""
    torch.manual_seed(0)
    model = Seq2SeqTransformer(
        src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=256, nhead=4,
        num_encoder_layers=3, num_decoder_layers=3, dim_feedforward=1024, dropout=0.0,
        norm_first=False, max_len=256, tie_embeddings="all", pad_id=PAD_ID, bos_id=BOS_ID, eos_id=EOS_ID,
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


def ctranslate2_decoder(translator, tokens: list[str]) -> Callable[[Tensor, Case], list[list[int]]]:
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


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per engine and case (after one warm-up)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads of torch and of CTranslate2")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--source-length", type=int, default=24)
    return parser.parse_args()


def main() -> None:
    import ctranslate2

    arguments = parse_arguments()
    torch.set_num_threads(arguments.threads)
    print("\n".join(machine_summary()))
    print(f"torch {torch.__version__}, ctranslate2 {ctranslate2.__version__}, {arguments.threads} thread(s) each, "
          f"median of {arguments.repeats} runs")
    model = build_model(arguments.vocab_size)
    tokens = SPECIALS + [f"w{token_id}" for token_id in range(FIRST_TOKEN, arguments.vocab_size)]
    with tempfile.TemporaryDirectory() as folder:
        out_dir = export_model(model, tokens, tokens, Path(folder) / "ct2")
        engines: dict[str, Callable[[Tensor, Case], list[list[int]]]] = {
            "ours": lambda src_ids, case: decode_ours(model, src_ids, case),
        }
        for compute_type in ("float32", "int8"):
            translator = ctranslate2.Translator(
                str(out_dir), device="cpu", compute_type=compute_type, inter_threads=1, intra_threads=arguments.threads
            )
            engines[f"ct2 {compute_type}"] = ctranslate2_decoder(translator, tokens)

        print()
        print(f"{'case':<30}{'ours ms/step':>14}{'ct2 fp32':>11}{'ct2 int8':>11}"
              f"{'ours/fp32':>11}{'ours/int8':>11}  fp32 ids = ours  int8 rows = ours")
        for case in CASES:
            src_ids = random_sources(case.batch_size, arguments.source_length, arguments.vocab_size, seed=case.batch_size)
            outputs = {name: decode(src_ids, case) for name, decode in engines.items()}  # warm-up and check
            if any(len(ids) != case.new_tokens for ids in outputs["ours"]):
                raise RuntimeError(f"{case.name}: a row stopped before {case.new_tokens} tokens; eos was not forbidden")
            fp32_equal = outputs["ct2 float32"] == outputs["ours"]
            int8_rows = sum(a == b for a, b in zip(outputs["ct2 int8"], outputs["ours"]))
            times: dict[str, list[float]] = {name: [] for name in engines}
            names = list(engines)
            for repeat in range(arguments.repeats):
                for name in names[repeat % len(names):] + names[: repeat % len(names)]:
                    start = time.perf_counter()
                    engines[name](src_ids, case)
                    times[name].append(time.perf_counter() - start)
            ms_per_step = {name: 1e3 * statistics.median(seconds) / case.new_tokens for name, seconds in times.items()}
            ours, fp32, int8 = ms_per_step["ours"], ms_per_step["ct2 float32"], ms_per_step["ct2 int8"]
            print(f"{case.name:<30}{ours:>14.2f}{fp32:>11.2f}{int8:>11.2f}{ours / fp32:>10.1f}x{ours / int8:>10.1f}x"
                  f"  {'yes' if fp32_equal else 'NO'}{'':>13}{int8_rows}/{case.batch_size}")


if __name__ == "__main__":
    main()
