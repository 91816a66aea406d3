"""``transformer-lab couplet --checkpoint DIR "晚风摇树树还挺"``: lower lines for upper lines.

Upper lines come as arguments, from --input (one per line) or from stdin. With one
candidate each answer is one line (to stdout or --output, aligned with the input); with
--num-candidates K each upper line is followed by its K lower lines and their scores. A
line that cannot be answered (empty, Latin letters, undecodable bytes, too long) gets an empty output line
and a message on stderr, and the command ends with exit code 2 after answering the rest.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from transformer_lab.cli.bounds import int_in
from transformer_lab.cli.couplet_options import add_constraint_arguments, constraint_overrides
from transformer_lab.cli.decode_options import (
    add_decode_arguments,
    command_precision,
    input_lines,
    with_decode_arguments,
)
from transformer_lab.decoding import decoding_model
from transformer_lab.decoding.config import MAX_BEAM_SIZE
from transformer_lab.tasks import couplet


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "couplet", help="write lower lines (下联) for upper lines (上联) with a couplet checkpoint"
    )
    parser.add_argument("lines", nargs="*", help="upper lines (none: read stdin, one per line)")
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint folder (e.g. runs/NAME/best)")
    parser.add_argument("--input", type=Path, default=None, help="answer every line of this UTF-8 file")
    parser.add_argument("--output", type=Path, default=None, help="write the answers to this file instead of stdout")
    add_decode_arguments(parser)
    parser.add_argument(
        "--num-candidates",
        type=int_in(1, MAX_BEAM_SIZE),
        default=1,
        help="lower lines per upper line, with scores (needs --beam >= it)",
    )
    add_constraint_arguments(parser)
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    lines = input_lines(arguments.lines, arguments.input, purpose="answer")
    model, vocabulary, config = couplet.load(arguments.checkpoint)
    precision = command_precision(arguments, config.decode.precision, model)
    decode_config = with_decode_arguments(config.decode, arguments, precision)
    model = decoding_model(model, precision)
    count = arguments.num_candidates
    if count > 1 and arguments.beam is None and decode_config.strategy == "beam":
        # Enough beams for the candidates asked for, when --beam leaves the choice to us.
        decode_config = dataclasses.replace(decode_config, beam_size=max(decode_config.beam_size, count))
    constraints = constraint_overrides(config.constraints, arguments)
    results = couplet.generate(model, vocabulary, lines, decode_config, constraints, num_candidates=count)
    output: list[str] = []
    refused = 0
    for number, result in enumerate(results, start=1):
        if result.error:
            refused += 1
            print(f"transformer-lab couplet: line {number}: {result.error}", file=sys.stderr)
        elif result.note:
            print(f"transformer-lab couplet: line {number}: {result.note}", file=sys.stderr)
        if count == 1:
            output.append(result.candidates[0].text if result.candidates else "")
            continue
        output.append(result.upper)
        output.extend(
            f"  {rank}. {candidate.text}  ({candidate.score:.2f})"
            for rank, candidate in enumerate(result.candidates, 1)
        )
    text = "".join(line + "\n" for line in output)
    if arguments.output is not None:
        arguments.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 2 if refused else 0
