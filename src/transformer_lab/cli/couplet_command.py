"""``transformer-lab couplet --checkpoint DIR "晚风摇树树还挺"``: lower lines for upper lines.

Upper lines come as arguments, from --input (one per line) or from stdin. With one
candidate each answer is one line (to stdout or --output, aligned with the input); with
--num-candidates K each upper line is followed by its K lower lines and their scores. A
line that cannot be answered (empty, Latin letters, undecodable bytes, too long) gets an empty output line
and a message on stderr, and the command ends with exit code 2 after answering the rest.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from transformer_lab.api import CoupletWriter
from transformer_lab.cli.bounds import int_in
from transformer_lab.cli.decode_options import add_decode_arguments, decode_keywords, input_lines
from transformer_lab.cli.device_option import add_device_argument, device_of
from transformer_lab.cli.task_options import add_task_options, given_options
from transformer_lab.decoding.config import MAX_BEAM_SIZE
from transformer_lab.tasks.couplet.predict import CONSTRAINT_TASK_OPTIONS, with_constraint_options


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "couplet", help="write lower lines (下联) for upper lines (上联) with a couplet checkpoint"
    )
    parser.add_argument("lines", nargs="*", help="upper lines (none: read stdin, one per line)")
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint folder (e.g. runs/NAME/best)")
    parser.add_argument("--input", type=Path, default=None, help="answer every line of this UTF-8 file")
    parser.add_argument("--output", type=Path, default=None, help="write the answers to this file instead of stdout")
    add_decode_arguments(parser)
    add_device_argument(parser)
    parser.add_argument(
        "--num-candidates",
        type=int_in(1, MAX_BEAM_SIZE),
        default=1,
        help="lower lines per upper line, with scores (needs --beam >= it)",
    )
    constraint_options = add_task_options(parser, CONSTRAINT_TASK_OPTIONS)
    parser.set_defaults(handler=run, constraint_options=constraint_options)


def run(arguments: argparse.Namespace) -> int:
    device = device_of(arguments)
    lines = input_lines(arguments.lines, arguments.input, purpose="answer")
    writer = CoupletWriter(arguments.checkpoint, device=device)
    count = arguments.num_candidates
    constraints = with_constraint_options(
        writer.config.constraints, given_options(arguments, arguments.constraint_options)
    )
    results = writer.write(lines, num_candidates=count, constraints=constraints, **decode_keywords(arguments))
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
