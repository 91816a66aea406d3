"""The antithesis rules' floor and ceiling on a couplet test set: the references, and random lower lines.

What a model's tone opposition, parts of speech and rhythm mean depends on where chance
lies: this prints the rules' means (evaluation/couplet_antithesis.py) for the reference
lower lines and for a lower line drawn at random (seeded) among the references of the
same length, so that length and punctuation positions are kept roughly and only the
pairing is lost.

    .venv/bin/python benchmarks/couplet_antithesis_baseline.py --data-dir ~/data
"""

from __future__ import annotations

import argparse
import random
import time
from collections import defaultdict

from transformer_lab.data.couplet import load_couplets
from transformer_lab.evaluation.couplet_antithesis import antithesis_report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="the folder holding couplet/")
    parser.add_argument("--split", default="test", help="the split to score (default: the 4,000 wb14123 test pairs)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random pairing")
    arguments = parser.parse_args()
    pairs = load_couplets(arguments.split, arguments.data_dir).pairs
    uppers = [upper for upper, _ in pairs]
    references = [lower for _, lower in pairs]
    by_length: dict[int, list[str]] = defaultdict(list)
    for lower in references:
        by_length[len(lower)].append(lower)
    generator = random.Random(arguments.seed)
    shuffled = [generator.choice(by_length[len(upper)]) for upper in uppers]
    started = time.perf_counter()
    reports = {
        "references": antithesis_report(uppers, references),
        "random lower line": antithesis_report(uppers, shuffled),
    }
    seconds = time.perf_counter() - started
    print(f"couplet {arguments.split}: {len(pairs)} pairs, scored in {seconds:.1f} s")
    print(f"| rule | {' | '.join(reports)} |")
    print("|---|" + "---:|" * len(reports))
    for name in ("tone_opposition", "part_of_speech_agreement", "rhythm_agreement", "unreused_characters"):
        values = " | ".join(f"{getattr(report, name).value:.3f}" for report in reports.values())
        print(f"| {name.replace('_', ' ')} | {values} |")


if __name__ == "__main__":
    main()
