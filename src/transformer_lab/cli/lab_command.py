"""``transformer-lab lab EXPERIMENT``: run one of the mask experiments and print its table.

Exit code 0 when the claim holds, 1 when it does not (2 for bad input, as every command).
"""

from __future__ import annotations

import argparse

from transformer_lab.cli.bounds import float_in, int_in, path_of
from transformer_lab.data._checks import SEED_RANGE
from transformer_lab.data.dataset_folder import DatasetMissingError
from transformer_lab.lab.mask_experiments import DEFAULT_TOLERANCE, EXPERIMENTS, build_lab_setup, run_experiment
from transformer_lab.lab.mask_report import format_lab_result
from transformer_lab.training.checkpoint import resolve_checkpoint

MAX_TOLERANCE = 1e-2

_DESCRIPTIONS = {
    "tgt-padding-mask": "the decoder needs no target key padding mask when the loss ignores padding",
    "encoder-row-mask": "hiding the encoder's padded rows changes nothing that reaches the loss",
    "decoder-rows": "in the decoder, the loss's ignore_index plays the part of hiding padded rows",
    "key-padding-polarity": "'True = keep' vs 'True = padding' masks: converted, and mixed up",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "lab",
        help="check one of the tutorials' claims about masks on a real model and batch",
        description="Run a mask experiment, print its table, and exit 1 if the claim does not hold.",
    )
    parser.add_argument(
        "experiment",
        choices=list(EXPERIMENTS),
        help="; ".join(f"{name}: {words}" for name, words in _DESCRIPTIONS.items()),
    )
    parser.add_argument(
        "--checkpoint", type=path_of, default=None, help="a Seq2Seq checkpoint folder (default: a random model)"
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="a folder with train.de / train.en (whitespace tokens); default: a synthetic batch",
    )
    parser.add_argument("--batch-size", type=int_in(1, 256), default=6, help="sentences in the batch (default 6)")
    parser.add_argument(
        "--seed", type=int_in(*SEED_RANGE), default=0, help="seed of the random model and the batch (default 0)"
    )
    # Default None, so that a value given with --checkpoint (which fixes the model) can be refused;
    # without one, build_lab_setup's defaults (the numbers in the help) apply.
    parser.add_argument("--d-model", type=int_in(2, 1024), default=None, help="random model: d_model (default 32)")
    parser.add_argument("--nhead", type=int_in(1, 64), default=None, help="random model: heads (default 2)")
    parser.add_argument(
        "--num-layers", type=int_in(1, 12), default=None, help="random model: layers per stack (default 2)"
    )
    parser.add_argument(
        "--tolerance",
        # Bounded: the rows the claims expect to differ differ by far more than 1e-2, so a
        # larger tolerance would call them equal and the verdict would mean nothing.
        type=float_in(0.0, MAX_TOLERANCE),
        default=DEFAULT_TOLERANCE,
        help=f"largest |difference| called equal, in (0, {MAX_TOLERANCE:g}] (default {DEFAULT_TOLERANCE:g})",
    )
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    sizes = {"d_model": arguments.d_model, "nhead": arguments.nhead, "num_layers": arguments.num_layers}
    given = {keyword: value for keyword, value in sizes.items() if value is not None}
    if arguments.checkpoint is not None and given:
        keyword, value = next(iter(given.items()))
        raise ValueError(
            f"--{keyword.replace('_', '-')}: expected only without --checkpoint (the checkpoint fixes the model), "
            f"got {value}"
        )
    checkpoint = None if arguments.checkpoint is None else resolve_checkpoint(arguments.checkpoint, "--checkpoint")
    try:
        setup = build_lab_setup(
            checkpoint=checkpoint,
            data_dir=arguments.data_dir,
            batch_size=arguments.batch_size,
            seed=arguments.seed,
            **given,
        )
    except DatasetMissingError as error:
        raise error.named("--data-dir") from None
    result = run_experiment(arguments.experiment, setup, tolerance=arguments.tolerance)
    print(format_lab_result(result))
    return 0 if result.holds else 1
