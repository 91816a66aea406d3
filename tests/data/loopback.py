"""A loopback HTTP server for the download tests: serves a folder on 127.0.0.1, records each request."""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Server:
    root: Path
    base_url: str
    requests: list[str]


class RecordingHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files from `directory` and records each requested path; logs nothing."""

    requests: list[str]

    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        self.requests.append(self.path)
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (base signature)
        pass


@contextlib.contextmanager
def serve_folder(root: Path) -> Iterator[Server]:
    """Serve `root` at http://127.0.0.1:PORT/ (a free port, a thread) while the block runs."""
    requests: list[str] = []
    handler = type("Handler", (RecordingHandler,), {"requests": requests})
    with serving(functools.partial(handler, directory=str(root))) as base_url:
        yield Server(root, base_url + "/", requests)


@contextlib.contextmanager
def serving(handler: Callable[..., http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """Answer with ``handler`` at http://127.0.0.1:PORT (a free port, a thread) while the block runs; yields the URL."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True  # a handler that stalls on purpose does not hold the shutdown
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
