"""Load shedding of the web server: many slow requests at once, and a 100 MB body.

Starts the server in a subprocess (this script with ``--serve PORT``) with the default
limits of ``serve.app`` (or those given) and a fake classification model whose work sleeps
``--work-seconds``, so the figures measure the admission code, not a model. Then:

1. ``--requests`` POST /api/classify at once from threads, while another thread polls
   ``GET /api/models``; prints how many were answered and refused and the worst latencies;
2. a 100 MB body, sent whole with a Content-Length, then chunked; prints the status and
   the server's resident memory (VmRSS of /proc/PID/status) before and after.

    .venv/bin/python benchmarks/bench_serve_load.py [--requests 200] [--work-seconds 0.3]
        [--max-queue N] [--wait-limit S] [--body-megabytes 100]
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import json
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

NAME = "fake"


def serve(port: int, work_seconds: float, limits: dict[str, Any]) -> None:
    """The server side: the real app over a fake model whose work is a sleep."""
    import uvicorn

    from transformer_lab.serve import ServedModel, create_app
    from transformer_lab.tasks import registry
    from transformer_lab.tasks.classification.predict import ClassifyRequest
    from transformer_lab.tasks.task import Endpoint, Serving

    class FakeModel:
        def describe(self) -> dict[str, Any]:
            return {"layers": 1, "heads": 1, "labels": ["a", "b"]}

        def classify(self, request: Any) -> dict[str, Any]:
            time.sleep(work_seconds)
            return {"label": "a", "classes": [], "num_tokens": 1}

    endpoint = Endpoint("/api/classify", ClassifyRequest, FakeModel.classify)
    task = registry.TASKS["classification"]
    registry.TASKS["classification"] = dataclasses.replace(task, serving=Serving(FakeModel, (endpoint,)))
    served = {NAME: ServedModel(name=NAME, checkpoint=Path("fake"), task="classification", handler=FakeModel())}
    uvicorn.run(create_app(served, **limits), host="127.0.0.1", port=port, log_level="error")


def request(port: int, method: str, path: str, body: Any = None) -> tuple[int, dict[str, str], float]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    started = time.monotonic()
    try:
        data = None if body is None else json.dumps(body).encode("utf-8")
        connection.request(method, path, body=data, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        return response.status, {key.lower(): value for key, value in response.getheaders()}, time.monotonic() - started
    finally:
        connection.close()


def resident_megabytes(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status")


def send_big_body(port: int, megabytes: int, chunked: bool) -> int:
    """POST ``megabytes`` MB of spaces (as much as the server lets in); the status it answered."""
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {megabytes * 1024 * 1024}"
    head = f"POST /api/classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{framing}\r\n\r\n"
    piece = b" " * (1024 * 1024)
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(head.encode("ascii"))
        try:
            for _ in range(megabytes):
                sock.sendall(b"100000\r\n" + piece + b"\r\n" if chunked else piece)
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before the body ended
        response = http.client.HTTPResponse(sock)
        response.begin()
        response.read()
        return response.status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--work-seconds", type=float, default=0.3)
    parser.add_argument("--max-queue", type=int, default=None)
    parser.add_argument("--wait-limit", type=float, default=None)
    parser.add_argument("--body-megabytes", type=int, default=100)
    arguments = parser.parse_args()
    limits: dict[str, Any] = {}
    if arguments.max_queue is not None:
        limits["max_queue"] = arguments.max_queue
    if arguments.wait_limit is not None:
        limits["lock_timeout"] = arguments.wait_limit
    if arguments.serve is not None:
        serve(arguments.serve, arguments.work_seconds, limits)
        return

    from transformer_lab.hardware import machine_summary
    from transformer_lab.serve import app as serve_app

    print("\n".join(machine_summary()), flush=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, __file__, "--serve", str(port), "--work-seconds", str(arguments.work_seconds)]
    for option in ("--max-queue", "--wait-limit"):
        value = getattr(arguments, option[2:].replace("-", "_"))
        if value is not None:
            command += [option, str(value)]
    server = subprocess.Popen(command)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                request(port, "GET", "/api/models")
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the server did not start")
                time.sleep(0.1)

        queue = limits.get("max_queue", serve_app.MAX_QUEUE)
        wait_limit = limits.get("lock_timeout", serve_app.LOCK_TIMEOUT_SECONDS)
        models_latencies: list[float] = []
        stop = threading.Event()

        def poll_models() -> None:
            while not stop.is_set():
                models_latencies.append(request(port, "GET", "/api/models")[2])
                time.sleep(0.05)

        start = threading.Barrier(arguments.requests)

        def send(index: int) -> tuple[int, dict[str, str], float]:
            start.wait()
            return request(port, "POST", "/api/classify", {"model": NAME, "text": f"text {index}"})

        poller = threading.Thread(target=poll_models)
        poller.start()
        began = time.monotonic()
        with ThreadPoolExecutor(max_workers=arguments.requests) as pool:
            results = list(pool.map(send, range(arguments.requests)))
        total = time.monotonic() - began
        stop.set()
        poller.join()
        answered = [seconds for status, _, seconds in results if status == 200]
        refused = [(seconds, headers.get("retry-after")) for status, headers, seconds in results if status == 503]
        others = sorted({status for status, _, _ in results} - {200, 503})
        print(
            f"{arguments.requests} requests at once, work {arguments.work_seconds:g} s each, "
            f"capacity 1 running + queue {queue}, wait limit {wait_limit:g} s: all done in {total:.2f} s"
        )
        print(f"answered 200: {len(answered)}, worst latency {max(answered, default=0):.2f} s")
        print(
            f"refused 503: {len(refused)}, worst latency {max((s for s, _ in refused), default=0):.3f} s, "
            f"Retry-After values {sorted({value for _, value in refused})}"
        )
        print(f"other statuses: {others or 'none'}")
        print(f"GET /api/models meanwhile: {len(models_latencies)} calls, worst {max(models_latencies):.3f} s")

        for chunked in (False, True):
            before = resident_megabytes(server.pid)
            status = send_big_body(port, arguments.body_megabytes, chunked)
            after = resident_megabytes(server.pid)
            kind = "chunked" if chunked else "with Content-Length"
            print(f"{arguments.body_megabytes} MB body {kind}: {status}; server RSS {before:.0f} MB -> {after:.0f} MB")
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
