"""``transformer-lab classify --checkpoint runs/NAME "Stocks rallied after the Fed..."``.

Texts come from the arguments, from ``--input`` (one a line) or from stdin (one a line).
Each gives one stdout line, in input order: the predicted class, then every class's
probability, tab-separated (``Business<TAB>World=0.0123 Sports=0.0031 ...``). A text that
cannot be classified (empty, or longer than the model reads without ``--truncate``) gives
``-`` and the reason on its stdout line and one line on stderr, and the exit code is 2;
the other texts are still classified. ``--output`` also writes one JSON object a line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from transformer_lab.api import Classifier
from transformer_lab.cli.decode_options import input_lines
from transformer_lab.cli.device_option import add_device_argument, device_of
from transformer_lab.hardware import PRECISIONS


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("classify", help="classify texts with a classification checkpoint")
    parser.add_argument("texts", nargs="*", help="texts to classify (none: read stdin, one per line)")
    parser.add_argument("--checkpoint", type=Path, required=True, help="run folder (its best/) or checkpoint folder")
    parser.add_argument("--input", type=Path, default=None, help="classify every line of this UTF-8 file")
    parser.add_argument("--output", type=Path, default=None, help="also write the results here, one JSON object a line")
    parser.add_argument(
        "--truncate", action="store_true", help="read only the first max_len subword tokens of a longer text (reported)"
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="auto",
        help="auto: bf16 autocast where this machine runs bf16 fast, else fp32 (default auto)",
    )
    add_device_argument(parser)
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    # Shared with translate and couplet: an empty --input or stdin is an error, bad UTF-8 names
    # its line and byte column, CRLF reads like LF.
    device = device_of(arguments)
    texts = input_lines(arguments.texts, arguments.input, purpose="classify")
    classifier = Classifier(arguments.checkpoint, device=device)
    results = classifier.classify_each(texts, precision=arguments.precision, truncate=arguments.truncate)
    records: list[dict[str, Any]] = []  # the --output JSON lines
    refused = 0
    for number, (text, result) in enumerate(zip(texts, results), start=1):
        if isinstance(result, str):
            refused += 1
            print(f"-\t{result}")
            print(f"transformer-lab classify: input {number}: {result}", file=sys.stderr)
            records.append({"text": text, "error": result})
            continue
        if result.truncated:
            print(
                f"transformer-lab classify: input {number}: read only the first "
                f"{classifier.max_len} of its {result.num_tokens} subword tokens (--truncate)",
                file=sys.stderr,
            )
        shares = " ".join(f"{name}={probability:.4f}" for name, probability in result.probabilities.items())
        print(f"{result.label_name}\t{shares}")
        records.append(
            {
                "text": text,
                "label": result.label_name,
                "probabilities": result.probabilities,
                "truncated": result.truncated,
            }
        )
    if arguments.output is not None:
        arguments.output.parent.mkdir(parents=True, exist_ok=True)
        arguments.output.write_text(
            "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records), encoding="utf-8"
        )
    return 2 if refused else 0
