"""``transformer-lab serve --checkpoint runs/A [--checkpoint runs/B ...]``: the local web page.

Loads every checkpoint once, then serves the page and its JSON API with uvicorn until
Ctrl-C. The web packages are imported only here, so other commands start without them.
"""

from __future__ import annotations

import argparse

DEFAULT_HOST = "127.0.0.1"  # this machine only: the page runs models for whoever reaches it
DEFAULT_PORT = 8000


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("serve", help="a local web page to try trained models and look inside them")
    parser.add_argument(
        "--checkpoint", action="append", required=True, metavar="[NAME=]PATH",
        help="a run folder (its best/, else last/) or a checkpoint folder; repeat to serve several",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})")
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    if not 1 <= arguments.port <= 65535:
        raise ValueError(f"--port must be in [1, 65535], got {arguments.port}")
    import uvicorn

    from transformer_lab.serve import create_app, load_served_models

    served = load_served_models(arguments.checkpoint)
    for model in served.values():
        print(f"{model.name}: {model.task}, {model.checkpoint}")
    print(f"open http://{arguments.host}:{arguments.port}/  (Ctrl-C stops)", flush=True)
    uvicorn.run(create_app(served), host=arguments.host, port=arguments.port, log_level="warning")
    return 0
