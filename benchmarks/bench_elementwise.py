"""The two element-wise costs a training-step profile named, ours against torch's, side by side.

A bf16 training step of the translation model spent 15-20 % of its time in dropout's
``bernoulli_`` and about 7 % in the loss's log-softmax, forward and backward (profile in
docs/experiments/2026-11-training-speed.md). This times, forward + backward, in alternation in one run:

- dropout (p = 0.1) of a bf16 ``[4096, 1024]`` activation (the feed-forward's hidden layer
  at the translation default): ``torch.nn.functional.dropout`` against
  ``transformer_lab.nn.dropout``;
- label-smoothed cross-entropy (smoothing 0.1, padding ignored) of bf16 ``[4096, 8000]``
  logits (a token-budget batch over the joint BPE vocabulary):
  ``F.cross_entropy(label_smoothing=...)`` on the float32 logits, the same loss composed
  from ``log_softmax`` and two ``nll_loss`` (our former implementation), and
  ``transformer_lab.training.label_smoothed_cross_entropy``;
- R-Drop's loss (``train.rdrop_alpha``) of two bf16 ``[2048, 8000]`` copies: composed by
  autograd (the cross-entropy of both plus ``F.kl_div`` both ways) against
  ``transformer_lab.training.rdrop.rdrop_loss``, beside the cross-entropy of both alone.

    .venv/bin/python benchmarks/bench_elementwise.py [--threads N] [--repeats 15]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch
import torch.nn.functional as F

from transformer_lab.hardware import machine_summary
from transformer_lab.nn import dropout
from transformer_lab.training import label_smoothed_cross_entropy
from transformer_lab.training.rdrop import rdrop_loss

PAD_ID = 0
SMOOTHING = 0.1
DROPOUT = 0.1
RDROP_ALPHA = 5.0


def composed_loss(logits: torch.Tensor, target_ids: torch.Tensor) -> torch.Tensor:
    """The smoothed loss as it was written before: log_softmax, two nll_loss, a row sum."""
    vocabulary_size = logits.shape[-1]
    log_probs = F.log_softmax(logits.float(), dim=-1)  # [N, V]
    keep_mask = target_ids != PAD_ID  # [N]
    true_class_term = F.nll_loss(log_probs, target_ids, ignore_index=PAD_ID)
    negative_log_likelihood = F.nll_loss(log_probs, target_ids, ignore_index=PAD_ID, reduction="none")  # [N]
    wrong_class_total = (-log_probs.sum(dim=-1) - negative_log_likelihood).masked_fill(~keep_mask, 0.0).sum()
    wrong_class_mean = wrong_class_total / keep_mask.sum()
    return (1.0 - SMOOTHING) * true_class_term + SMOOTHING / (vocabulary_size - 1) * wrong_class_mean


def composed_rdrop(first: torch.Tensor, second: torch.Tensor, target_ids: torch.Tensor) -> torch.Tensor:
    """R-Drop's loss as autograd composes it: both copies' cross-entropy, then the KL both ways."""
    both = torch.cat([first, second])  # [2N, V]
    cross_entropy = label_smoothed_cross_entropy(both, target_ids.repeat(2), SMOOTHING, PAD_ID, reduction="sum")
    log_first, log_second = F.log_softmax(first.float(), dim=-1), F.log_softmax(second.float(), dim=-1)  # [N, V]
    divergence = F.kl_div(log_second, log_first, log_target=True, reduction="sum") + F.kl_div(
        log_first, log_second, log_target=True, reduction="sum"
    )
    return (cross_entropy + RDROP_ALPHA * divergence / 2) / both.shape[0]


def time_side_by_side(candidates: dict[str, Callable[[], torch.Tensor]], repeats: int) -> dict[str, float]:
    """Median seconds of forward + backward per candidate, candidates alternating, order flipped each repeat."""

    def step(function: Callable[[], torch.Tensor]) -> None:
        output = function()
        output.backward(torch.ones_like(output))

    for function in candidates.values():  # warm-up
        step(function)
    seconds: dict[str, list[float]] = {name: [] for name in candidates}
    names = list(candidates)
    for repeat in range(repeats):
        for name in names if repeat % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            step(candidates[name])
            seconds[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in seconds.items()}


def print_table(title: str, medians: dict[str, float], baseline: str) -> None:
    print(f"\n{title}\n")
    print(f"| implementation | ms (forward + backward) | speed vs {baseline} |")
    print("|---|---:|---:|")
    for name, seconds in medians.items():
        print(f"| {name} | {seconds * 1e3:.1f} | {medians[baseline] / seconds:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=0, help="torch threads; 0 keeps torch's default")
    parser.add_argument("--repeats", type=int, default=15)
    arguments = parser.parse_args()
    if arguments.threads:
        torch.set_num_threads(arguments.threads)
    print("\n".join(machine_summary()))
    print(f"median of {arguments.repeats}")
    torch.manual_seed(0)
    activation = torch.randn(4096, 1024).to(torch.bfloat16).requires_grad_(True)
    dropout_medians = time_side_by_side(
        {
            "torch.nn.functional.dropout": lambda: F.dropout(activation, DROPOUT),
            "transformer_lab.nn.dropout": lambda: dropout(activation, DROPOUT),
        },
        arguments.repeats,
    )
    print_table("dropout p=0.1, bf16 [4096, 1024]", dropout_medians, "torch.nn.functional.dropout")

    logits = torch.randn(4096, 8000).to(torch.bfloat16).requires_grad_(True)
    target_ids = torch.randint(4, 8000, (4096,))
    target_ids[-300:] = PAD_ID  # some padding, as in a real batch
    # torch spreads the smoothing over all V classes, ours over the V - 1 wrong ones.
    torch_smoothing = SMOOTHING * 8000 / 7999
    loss_candidates = {
        "F.cross_entropy (float32 logits)": lambda: F.cross_entropy(
            logits.float(), target_ids, ignore_index=PAD_ID, label_smoothing=torch_smoothing
        ),
        "composed (log_softmax + 2 nll_loss)": lambda: composed_loss(logits, target_ids),
        "label_smoothed_cross_entropy": lambda: label_smoothed_cross_entropy(logits, target_ids, SMOOTHING, PAD_ID),
    }
    values = {name: function().item() for name, function in loss_candidates.items()}
    spread = max(values.values()) - min(values.values())
    if spread > 1e-4:
        raise SystemExit(f"the losses disagree: {values}")
    loss_medians = time_side_by_side(loss_candidates, arguments.repeats)
    print_table(
        "label-smoothed cross-entropy, bf16 logits [4096, 8000] "
        f"(all three give {values['label_smoothed_cross_entropy']:.5f})",
        loss_medians,
        "F.cross_entropy (float32 logits)",
    )

    first, second = (torch.randn(2048, 8000).to(torch.bfloat16).requires_grad_(True) for _ in range(2))
    real_ids = torch.randint(4, 8000, (2048,))  # real tokens only: R-Drop's loss is given no padding
    rdrop_candidates = {
        "cross-entropy of both copies alone": lambda: label_smoothed_cross_entropy(
            torch.cat([first, second]), real_ids.repeat(2), SMOOTHING, PAD_ID
        ),
        "composed (cross-entropy + F.kl_div both ways)": lambda: composed_rdrop(first, second, real_ids),
        "rdrop_loss": lambda: rdrop_loss(first, second, real_ids, SMOOTHING, RDROP_ALPHA),
    }
    composed, fused = (
        composed_rdrop(first, second, real_ids).item(),
        rdrop_loss(first, second, real_ids, SMOOTHING, RDROP_ALPHA).item(),
    )
    if abs(composed - fused) > 1e-3 * abs(composed):
        raise SystemExit(f"the R-Drop losses disagree: composed {composed}, rdrop_loss {fused}")
    rdrop_medians = time_side_by_side(rdrop_candidates, arguments.repeats)
    print_table(
        f"R-Drop's loss (alpha {RDROP_ALPHA}), two bf16 copies [2048, 8000] (both give {fused:.5f})",
        rdrop_medians,
        "composed (cross-entropy + F.kl_div both ways)",
    )


if __name__ == "__main__":
    main()
