"""The web page's translate call for one sentence: the server's own time, median of repeats.

Loads a translation checkpoint as ``transformer-lab serve`` does and posts the page's
request (``POST /api/translate``, beam 5 by default) through FastAPI's test client, so the
figure is the server's ``elapsed_ms`` (the model's work and the JSON), without a network.
To compare two versions of the code, run this script under each (``PYTHONPATH=OTHER/src``)
in turns on the same quiet core.

    .venv/bin/python benchmarks/bench_serve_translate.py --checkpoint runs/NAME [--repeats 21] [--beam 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from transformer_lab.hardware import machine_summary

SENTENCE = "Ein Hund spielt mit einem roten Ball im Park."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, help="a translation checkpoint or run folder")
    parser.add_argument("--repeats", type=int, default=21, help="timed requests (after two warm-up requests)")
    parser.add_argument("--beam", type=int, default=5, help="beam size of the request")
    parser.add_argument("--text", default=SENTENCE, help="the sentence to translate")
    parser.add_argument("--threads", type=int, default=1, help="torch's intra-op threads")
    arguments = parser.parse_args()
    torch.set_num_threads(arguments.threads)
    from fastapi.testclient import TestClient

    from transformer_lab.serve import create_app
    from transformer_lab.serve.registry import load_served_models

    app = create_app(load_served_models([f"translation={arguments.checkpoint}"]))
    body = {"model": "translation", "text": arguments.text, "strategy": "beam", "beam_size": arguments.beam}
    server_ms, client_ms = [], []
    with TestClient(app) as client:
        for attempt in range(arguments.repeats + 2):
            started = time.perf_counter()
            response = client.post("/api/translate", json=body)
            wall = 1000 * (time.perf_counter() - started)
            response.raise_for_status()
            if attempt >= 2:
                server_ms.append(response.json()["elapsed_ms"])
                client_ms.append(wall)
        answer = response.json()
    for line in machine_summary():
        print(line)
    print(f"torch {torch.__version__}, {arguments.threads} thread(s); {arguments.checkpoint}, beam {arguments.beam}")
    print(
        f"server time: median {statistics.median(server_ms):.1f} ms "
        f"(min {min(server_ms):.1f}, max {max(server_ms):.1f}) "
        f"over {len(server_ms)}; request round trip median {statistics.median(client_ms):.1f} ms"
    )
    best = answer.get("translations", answer.get("candidates", [answer]))[0]
    print(f"answer: {best}")


if __name__ == "__main__":
    main()
