"""``transformer-lab explain``: the printed walk of tensor shapes through attention."""

from __future__ import annotations

import argparse

from transformer_lab.cli.bounds import int_in
from transformer_lab.lab.explain import explain_attention, explain_transformer, format_shape_walk
from transformer_lab.lab.tensor_sizes import MAX_FLOATS, tensor_floats


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "explain", help="print every tensor's shape through one attention call (or a whole model)"
    )
    parser.add_argument("--d-model", type=int_in(1, 4096), default=32, help="embed_dim / d_model (default 32)")
    parser.add_argument("--nhead", type=int_in(1, 16), default=1, help="number of heads (default 1)")
    parser.add_argument("--src-len", type=int_in(1, 512), default=5, help="source (key) length (default 5)")
    parser.add_argument("--tgt-len", type=int_in(1, 512), default=3, help="target (query) length (default 3)")
    parser.add_argument("--batch", type=int_in(1, 16), default=2, help="batch size (default 2)")
    parser.add_argument("--full", action="store_true", help="walk a whole encoder-decoder instead")
    # Default None, so that a value given without --full (one attention call has no layers) is refused.
    parser.add_argument(
        "--num-layers", type=int_in(1, 12), default=None, help="layers per stack with --full (default 1)"
    )
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    sizes = {name: getattr(arguments, name) for name in ("d_model", "nhead", "src_len", "tgt_len", "batch")}
    if arguments.d_model % arguments.nhead:  # named as typed; the library names its keywords
        raise ValueError(
            f"--d-model: expected a multiple of --nhead (each head takes d_model / nhead dimensions), "
            f"got --d-model {arguments.d_model} with --nhead {arguments.nhead}"
        )
    layers = (arguments.num_layers or 1) if arguments.full else None
    floats = tensor_floats(**sizes, num_layers=layers)
    if floats > MAX_FLOATS:  # before anything is allocated
        last = ", --batch and --num-layers" if arguments.full else " and --batch"
        options = f"--d-model, --nhead, --src-len, --tgt-len{last}"
        raise ValueError(
            f"{options}: expected sizes whose tensors hold at most {MAX_FLOATS:,} floats together (1 GiB), "
            f"got about {floats:,}; make one of them smaller"
        )
    if arguments.full:
        records = explain_transformer(num_layers=arguments.num_layers or 1, **sizes)
    elif arguments.num_layers is not None:
        raise ValueError(
            f"--num-layers: expected only with --full (one attention call has no layers), got {arguments.num_layers}"
        )
    else:
        records = explain_attention(**sizes)
    print(format_shape_walk(records))
    return 0
