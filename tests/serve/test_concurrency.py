"""50 requests at once, from a thread pool, to a real uvicorn server: all answered, all right.

The expected answers are computed first, one at a time, through the TestClient; the
parallel ones must be identical (the model is deterministic in eval mode), which fails if
concurrent requests ever shared a cache, a recorder or a half-finished state.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import uvicorn
from fastapi.testclient import TestClient

from transformer_lab.serve import create_app, load_served_models

NAME = "tiny"
PARALLEL_REQUESTS = 50
LOCK_TIMEOUT_SECONDS = 600.0


@pytest.fixture(scope="module")
def app_and_server(translation_run: Path, find_unused_port: Callable[[], int]) -> Iterator[tuple[TestClient, str]]:
    # The requests queue for the one model; on a loaded machine 50 of them can take longer
    # than the default wait, and more than the default queue holds: a 503 is not what this
    # test is about (test_app and test_load_shedding test it).
    app = create_app(
        load_served_models([f"{NAME}={translation_run}"]),
        lock_timeout=LOCK_TIMEOUT_SECONDS,
        max_queue=PARALLEL_REQUESTS,
    )
    port = find_unused_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield TestClient(app), f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def requests_to_send(count: int) -> list[tuple[str, dict[str, Any]]]:
    """A mix of greedy, beam, attention and masks requests over different sentences."""
    subjects = ["Ein Mann", "Eine Frau", "Ein Hund", "Ein Kind", "Zwei Hunde"]
    verbs = ["läuft", "schläft", "spielt", "wartet", "springt"]
    sent: list[tuple[str, dict[str, Any]]] = []
    for index in range(count):
        text = f"{subjects[index % 5]} {verbs[(index // 5) % 5]} im Park."
        kind = index % 4
        if kind == 0:
            sent.append(("/api/translate", {"model": NAME, "text": text, "strategy": "greedy"}))
        elif kind == 1:
            sent.append(
                ("/api/translate", {"model": NAME, "text": text, "strategy": "beam", "beam_size": 1 + index % 5})
            )
        elif kind == 2:
            sent.append(
                ("/api/translation/attention", {"model": NAME, "text": text, "target_ids": [5, 6, 7][: 1 + index % 3]})
            )
        else:
            sent.append(("/api/masks", {"sentences": [text, "kurz"], "model": NAME}))
    return sent


def without_timing(answer: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in answer.items() if key != "elapsed_ms"}


def test_fifty_parallel_requests_are_all_answered_correctly(app_and_server: tuple[TestClient, str]) -> None:
    client, base_url = app_and_server
    requests = requests_to_send(PARALLEL_REQUESTS)
    expected = []
    for path, body in requests:
        response = client.post(path, json=body)
        assert response.status_code == 200, response.text
        expected.append(without_timing(response.json()))
    start = threading.Barrier(PARALLEL_REQUESTS)

    def send(request: tuple[str, dict[str, Any]]) -> tuple[int, dict[str, Any]]:
        path, body = request
        message = urllib.request.Request(
            base_url + path, data=json.dumps(body).encode("utf-8"), headers={"Content-Type": "application/json"}
        )
        start.wait(timeout=30)  # release all 50 at once
        try:
            with urllib.request.urlopen(message, timeout=LOCK_TIMEOUT_SECONDS + 60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    with ThreadPoolExecutor(max_workers=PARALLEL_REQUESTS) as pool:
        answers = list(pool.map(send, requests))
    assert [status for status, _ in answers] == [200] * PARALLEL_REQUESTS
    for index, ((_, answer), wanted) in enumerate(zip(answers, expected)):
        assert without_timing(answer) == wanted, f"request {index}: {requests[index]}"
