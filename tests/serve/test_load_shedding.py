"""Load shedding and size limits against a real uvicorn server on 127.0.0.1.

The model is a fake: a classification "handler" whose work sleeps ``WORK_SECONDS`` (or
waits for the test to let it go) and records when it ran, so the test controls how slow
the model is and sees which requests really ran. Everything else (admission, queue, time
limit, body limit, text caps, the JSON errors) is the app's own code over real sockets.
Timings are asserted with margins wide enough for one shared core, and still fail if a
request waits in the thread pool, runs after its time limit or is refused slowly.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import uvicorn
from fastapi import FastAPI

from transformer_lab.serve import ServedModel, create_app
from transformer_lab.tasks import registry
from transformer_lab.tasks.classification.predict import ClassifyRequest
from transformer_lab.tasks.task import Endpoint, Serving

NAME = "fake"
WORK_SECONDS = 0.3
FAST_REFUSAL_SECONDS = 1.0  # a refusal from a full queue must come back within this
MODELS_WORST_SECONDS = 0.5  # GET /api/models while the model is saturated


class FakeModel:
    """Counts calls, remembers when each started and how many ran at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, float]] = []  # (text, time.monotonic() at start)
        self.running = 0
        self.most_running = 0
        self.release = threading.Event()

    def describe(self) -> dict[str, Any]:
        return {"layers": 1, "heads": 1, "labels": ["a", "b"]}

    def classify(self, request: ClassifyRequest) -> dict[str, Any]:
        with self.lock:
            self.calls.append((request.text, time.monotonic()))
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        try:
            if request.text == "hold":
                assert self.release.wait(timeout=20), "the test never let the held request go"
            else:
                time.sleep(WORK_SECONDS)
        finally:
            with self.lock:
                self.running -= 1
        return {"label": "a", "classes": [], "num_tokens": 1}


@contextmanager
def serving(find_unused_port: Callable[[], int], **limits: Any) -> Iterator[tuple[FastAPI, FakeModel, int]]:
    """A uvicorn server in a thread for the fake model under ``limits``; stopped on exit."""
    fake = FakeModel()
    served = {NAME: ServedModel(name=NAME, checkpoint=Path("fake"), task="classification", handler=fake)}
    with pytest.MonkeyPatch.context() as patch:
        # create_app reads each task's Serving; the fake's method replaces the real one.
        endpoint = Endpoint("/api/classify", ClassifyRequest, FakeModel.classify)
        faked = dataclasses.replace(registry.TASKS["classification"], serving=Serving(FakeModel, (endpoint,)))
        patch.setitem(registry.TASKS, "classification", faked)
        app = create_app(served, **limits)
    port = find_unused_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield app, fake, port
    finally:
        fake.release.set()
        server.should_exit = True
        thread.join(timeout=10)


def request(
    port: int, method: str, path: str, body: Any = None, timeout: float = 30
) -> tuple[int, dict[str, str], Any, float]:
    """(status, headers, JSON answer, seconds) of one request on a fresh connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    started = time.monotonic()
    try:
        data = None if body is None else json.dumps(body).encode("utf-8")
        connection.request(method, path, body=data, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        return (
            response.status,
            {key.lower(): value for key, value in response.getheaders()},
            answer,
            time.monotonic() - started,
        )
    finally:
        connection.close()


def classify(port: int, text: str) -> tuple[int, dict[str, str], Any, float]:
    return request(port, "POST", "/api/classify", {"model": NAME, "text": text})


def fire(port: int, texts: list[str]) -> list[tuple[int, dict[str, str], Any, float, float]]:
    """All ``texts`` at once from threads: (status, headers, answer, seconds, monotonic send time)."""
    start = threading.Barrier(len(texts))

    def send(text: str) -> tuple[int, dict[str, str], Any, float, float]:
        start.wait(timeout=20)
        sent = time.monotonic()
        return (*classify(port, text), sent)

    with ThreadPoolExecutor(max_workers=len(texts)) as pool:
        return list(pool.map(send, texts))


def raw_exchange(port: int, head: bytes, body_parts: list[bytes]) -> tuple[int, Any]:
    """Send ``head`` and ``body_parts`` but never finish the body; the answer must come anyway."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(head)
        for part in body_parts:
            sock.sendall(part)
        response = http.client.HTTPResponse(sock)
        response.begin()  # a server that waited for the whole body would time out here
        return response.status, json.loads(response.read())


def test_a_saturated_server_answers_in_time_or_refuses_at_once_and_lists_models_fast(
    find_unused_port: Callable[[], int],
) -> None:
    limit, queue, count = 3.0, 4, 48  # 48 > Starlette's 40 threads: the old design queued /api/models behind them
    with serving(find_unused_port, lock_timeout=limit, max_queue=queue) as (app, fake, port):
        model_latencies: list[float] = []
        queued_seen: list[int] = []
        stop = threading.Event()

        def poll_models() -> None:
            while not stop.is_set():
                status, _, answer, seconds = request(port, "GET", "/api/models", timeout=10)
                assert status == 200 and answer["models"][0]["name"] == NAME
                model_latencies.append(seconds)
                queued_seen.append(app.state.admission.queued)
                time.sleep(0.02)

        poller = threading.Thread(target=poll_models)
        poller.start()
        try:
            results = fire(port, [f"text {index}" for index in range(count)])
        finally:
            stop.set()
            poller.join(timeout=20)
    answered = [result for result in results if result[0] == 200]
    refused = [result for result in results if result[0] == 503]
    assert len(answered) + len(refused) == count, sorted({result[0] for result in results})
    assert len(answered) >= 1 + queue, "the running request and a full queue are all answered"
    assert len(refused) >= count // 2, f"only {len(refused)} of {count} refused: the queue is not bounded"
    for status, headers, answer, seconds, _ in refused:
        assert seconds < FAST_REFUSAL_SECONDS, f"a refusal took {seconds:.2f} s"
        assert int(headers["retry-after"]) >= 1 and "busy" in answer["error"], (headers, answer)
    worst_answered = max(result[3] for result in answered)
    assert worst_answered < limit + WORK_SECONDS + 1.0, f"an answer took {worst_answered:.2f} s"
    assert fake.most_running == 1, "model work ran concurrently"
    assert len(fake.calls) == len(answered), "a refused request ran"
    assert len(model_latencies) >= 5 and max(model_latencies) < MODELS_WORST_SECONDS, max(model_latencies)
    assert max(queued_seen) <= queue


def test_no_request_starts_after_its_time_limit(find_unused_port: Callable[[], int]) -> None:
    # 6 at once, 0.3 s each, 0.5 s limit: the first two run, the others are refused at 0.5 s.
    limit = 0.5
    with serving(find_unused_port, lock_timeout=limit, max_queue=8) as (_, fake, port):
        results = fire(port, [f"text {index}" for index in range(6)])
    sent_by_text = {f"text {index}": result[4] for index, result in enumerate(results)}
    started_after = [started - sent_by_text[text] for text, started in fake.calls]
    assert max(started_after) <= limit + 0.15, f"work started {max(started_after):.2f} s after its request"
    answered = [result for result in results if result[0] == 200]
    timed_out = [result for result in results if result[0] == 503]
    assert len(answered) == len(fake.calls) and 1 <= len(answered) <= 3, [result[0] for result in results]
    assert len(timed_out) >= 3 and len(answered) + len(timed_out) == 6
    for _, headers, answer, seconds, _ in timed_out:
        assert f"within {limit:g} s of the request's arrival" in answer["error"] and "retry-after" in headers
        assert limit - 0.05 <= seconds < limit + 1.0, f"refused after {seconds:.2f} s"


def test_a_queued_request_whose_client_left_is_not_run(find_unused_port: Callable[[], int]) -> None:
    with serving(find_unused_port, lock_timeout=20.0, max_queue=4) as (app, fake, port):
        holder = ThreadPoolExecutor(max_workers=1)
        held = holder.submit(classify, port, "hold")
        deadline = time.monotonic() + 10
        while not fake.calls:
            assert time.monotonic() < deadline, "the held request never ran"
            time.sleep(0.01)
        body = json.dumps({"model": NAME, "text": "gone"}).encode("utf-8")
        head = (
            f"POST /api/classify HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode("ascii")
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(head + body)
            while app.state.admission.queued != 1:
                assert time.monotonic() < deadline, "the second request never queued"
                time.sleep(0.01)
        left_at = time.monotonic()  # the socket is closed: the client is gone
        while app.state.admission.queued != 0:
            assert time.monotonic() - left_at < 2.0, "the abandoned request still holds its place in the queue"
            time.sleep(0.01)
        fake.release.set()
        assert held.result(timeout=10)[0] == 200
        holder.shutdown()
        status, _, answer, _ = classify(port, "after")
        assert status == 200 and answer["model"] == NAME
    assert [text for text, _ in fake.calls] == ["hold", "after"], "the abandoned request ran"


def test_a_body_over_the_limit_gets_413_without_being_read(find_unused_port: Callable[[], int]) -> None:
    limit = 1000
    with serving(find_unused_port, max_body_bytes=limit) as (_, fake, port):
        # Declares 10^9 bytes, sends 100: answered at once from the header.
        head = (
            b"POST /api/classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000000\r\n\r\n"
        )
        status, answer = raw_exchange(port, head, [b"x" * 100])
        assert status == 413, answer
        assert answer["error"] == f"body: expected at most {limit} bytes, got a Content-Length of 1000000000"
        # Chunked: two chunks of 600 bytes and no end; refused once the count passes the limit.
        head = (
            b"POST /api/classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"258\r\n" + b" " * 600 + b"\r\n"  # 0x258 = 600
        status, answer = raw_exchange(port, head, [chunk, chunk])
        assert status == 413, answer
        assert f"expected at most {limit} bytes, got at least 1200" in answer["error"]
        # Under the limit, a request is served as before.
        assert classify(port, "short")[0] == 200
    assert [text for text, _ in fake.calls] == ["short"]


def test_over_long_texts_and_too_many_lines_get_a_422_naming_the_field(find_unused_port: Callable[[], int]) -> None:
    with serving(find_unused_port, max_text_characters=50, max_lines=3) as (_, fake, port):
        status, _, answer, _ = classify(port, "x" * 80)
        assert status == 422 and answer["error"] == "text: expected at most 50 characters, got 80"
        status, _, answer, _ = classify(port, "a\nb\nc\nd")
        assert status == 422 and answer["error"] == "text: expected at most 3 lines in one request, got 4"
        status, _, answer, _ = request(port, "POST", "/api/masks", {"sentences": ["a\nb", "c\nd"]})
        assert status == 422 and answer["error"] == "sentences: expected at most 3 lines in one request, got 4"
        status, _, answer, _ = request(port, "POST", "/api/masks", {"sentences": ["ok", "y" * 51]})
        assert status == 422 and answer["error"] == "sentences.1: expected at most 50 characters, got 51"
        assert classify(port, "a\nb\nc")[0] == 200
    assert [text for text, _ in fake.calls] == ["a\nb\nc"], "a refused request reached the model"


def test_a_body_that_never_finishes_gets_408_by_the_wait_limit(find_unused_port: Callable[[], int]) -> None:
    # uvicorn waits for a body as long as the client keeps the connection: a Content-Length larger than what
    # was sent, or a chunked body never ended, held the connection (and the client) without an answer.
    limit = 0.5
    with serving(find_unused_port, lock_timeout=limit) as (_, fake, port):
        head = b"POST /api/classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(head + b"Content-Length: 100\r\n\r\n" + b'{"model": "fake"')
            response = http.client.HTTPResponse(sock)
            response.begin()
            assert response.status == 408
            assert json.loads(response.read())["error"] == (
                f"body: expected the 100 bytes of its Content-Length within {limit:g} s of the request's arrival, "
                "got 16 bytes and then nothing"
            )
            # Closed: the rest of the body, sent late, would have been read as the next request.
            assert response.getheader("connection") == "close" and sock.recv(100) == b""
        chunk = b"10\r\n" + b'{"model": "fake"' + b"\r\n"  # 0x10 = 16
        status, answer = raw_exchange(port, head + b"Transfer-Encoding: chunked\r\n\r\n", [chunk])
        assert status == 408, answer
        assert answer["error"].startswith(f"body: expected its end within {limit:g} s")
        assert time.monotonic() - started < 4 * limit + 2
        # A body that arrives whole is served, however long the work then takes.
        assert classify(port, "short")[0] == 200
    assert [text for text, _ in fake.calls] == ["short"]
