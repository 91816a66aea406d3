"""``transformer-lab serve --checkpoint runs/A [--checkpoint runs/B ...]``: the local web page.

Loads every checkpoint once, then serves the page and its JSON API with uvicorn until
Ctrl-C. The web packages are imported only here, so other commands start without them.
"""

from __future__ import annotations

import argparse
import errno
import socket

from transformer_lab.cli.bounds import duration_in, int_in
from transformer_lab.cli.device_option import add_device_argument, device_of
from transformer_lab.extras import require_extra

DEFAULT_HOST = "127.0.0.1"  # this machine only: the page runs models for whoever reaches it
DEFAULT_PORT = 8000
# serve.admission.MAX_WAIT_SECONDS, written out like the defaults below (tested equal).
MAX_WAIT_SECONDS = 3600.0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("serve", help="a local web page to try trained models and look inside them")
    parser.add_argument(
        "--checkpoint",
        action="append",
        required=True,
        metavar="[NAME=]PATH",
        help="a run folder (its best/, else last/) or a checkpoint folder; repeat to serve several",
    )
    parser.add_argument(
        "--port", type=int_in(1, 65535), default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--host",
        type=host_of,
        default=DEFAULT_HOST,
        help=f"address to listen on (default {DEFAULT_HOST}: this machine only; 0.0.0.0: every network interface)",
    )
    # The defaults are serve.app's (MAX_QUEUE, LOCK_TIMEOUT_SECONDS, MAX_BODY_BYTES), written
    # out here because the web packages are imported only when the command runs.
    parser.add_argument(
        "--max-queue",
        type=int_in(0, 10_000),
        default=None,
        metavar="N",
        help="requests that may wait behind the running one; more get 503 at once (default 16)",
    )
    parser.add_argument(
        "--wait-limit",
        type=duration_in(MAX_WAIT_SECONDS),
        default=None,
        metavar="SECONDS",
        help="the longest a request waits, from its arrival, for the model before a 503 (and for its whole body "
        "before a 408): seconds, or 90s, 2m (default 30, at most 3600)",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int_in(1, 1 << 30),
        default=None,
        metavar="BYTES",
        help="larger request bodies get 413 before they are read (default 1048576 = 1 MiB)",
    )
    add_device_argument(parser)
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    device = device_of(arguments)
    uvicorn = require_extra("uvicorn", "the web server")
    require_extra("fastapi", "the web server")

    from transformer_lab.serve import create_app, load_served_models

    if arguments.max_queue is not None and arguments.max_queue < 0:
        raise ValueError(f"--max-queue must be >= 0, got {arguments.max_queue}")
    if arguments.wait_limit is not None and not arguments.wait_limit > 0:
        raise ValueError(f"--wait-limit must be a number of seconds > 0, got {arguments.wait_limit}")
    if arguments.max_body_bytes is not None and arguments.max_body_bytes < 1:
        raise ValueError(f"--max-body-bytes must be >= 1, got {arguments.max_body_bytes}")
    # Only the options given: the others keep create_app's defaults.
    given = {
        "max_queue": arguments.max_queue,
        "lock_timeout": arguments.wait_limit,
        "max_body_bytes": arguments.max_body_bytes,
    }
    limits = {keyword: value for keyword, value in given.items() if value is not None}
    served = load_served_models(arguments.checkpoint, device=device)
    for model in served.values():
        print(f"{model.name}: {model.task}, {model.checkpoint} on {device}")
    # Bound before "open ..." is said: uvicorn would report a bad --host or --port itself, in its
    # own words and with exit 3, after that line. Handing it the bound sockets leaves no race.
    sockets = listening_sockets(arguments.host, arguments.port)
    try:
        print(f"open {page_url(arguments.host, arguments.port)}  (Ctrl-C stops)", flush=True)
        config = uvicorn.Config(
            create_app(served, **limits), host=arguments.host, port=arguments.port, log_level="warning"
        )
        uvicorn.Server(config).run(sockets=sockets)
    finally:
        for bound in sockets:
            bound.close()
    return 0


def host_of(text: str) -> str:
    """An argparse type: an address to listen on; an empty one is refused.

    The resolver reads "" as every interface, so a script's unset variable (``--host "$HOST"``)
    would open the page, and the models it runs, to the whole network.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(
            f"expected an address to listen on ({DEFAULT_HOST}: this machine only; 0.0.0.0: every network "
            f"interface), got {'an empty one' if not text else repr(text)}"
        )
    return text


def page_url(host: str, port: int) -> str:
    """The page's address as a browser takes it: an IPv6 address within brackets (``http://[::1]:8000/``)."""
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def listening_sockets(host: str, port: int) -> list[socket.socket]:
    """A TCP socket bound to ``port`` on each address ``host`` resolves to, as asyncio's create_server binds them.

    A failure is a ValueError naming ``--host`` or ``--port``, what was expected and the errno's name.
    """
    try:
        addresses = socket.getaddrinfo(
            host or None, port, family=socket.AF_UNSPEC, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as error:
        raise ValueError(
            f"--host: expected an address of this machine, got {host!r} ({_error_name(error)}: {error.strerror})"
        ) from error
    sockets: list[socket.socket] = []
    try:
        for family, kind, protocol, _, address in dict.fromkeys(addresses):
            bound = socket.socket(family, kind, protocol)
            sockets.append(bound)
            # As uvicorn and asyncio do: a restart may reuse the port of connections still in TIME_WAIT.
            bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                # The IPv4 address, if the host has one, gets its own socket.
                bound.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            bound.bind(address)
    except OSError as error:
        for bound in sockets:
            bound.close()
        raise ValueError(_bind_failure(host, port, error)) from error
    return sockets


def _bind_failure(host: str, port: int, error: OSError) -> str:
    name = _error_name(error)
    if error.errno == errno.EADDRINUSE:
        return f"--port {port}: expected a free port on {host}, got one in use ({name})"
    if error.errno == errno.EACCES:
        return f"--port {port}: expected a port this user may listen on at {host}, got one it may not ({name})"
    if error.errno == errno.EADDRNOTAVAIL:
        return f"--host: expected an address of this machine, got {host!r} ({name}: {error.strerror})"
    return f"--host, --port: expected an address and port to listen on, got {host}:{port} ({name}: {error.strerror})"


def _error_name(error: OSError) -> str:
    # errno's symbolic name (EADDRINUSE); a resolver error's is one of socket's EAI_ constants.
    if isinstance(error, socket.gaierror):
        names = [name for name in dir(socket) if name.startswith("EAI_") and getattr(socket, name) == error.errno]
        return names[0] if names else f"resolver error {error.errno}"
    return errno.errorcode.get(error.errno or 0, f"errno {error.errno}")
