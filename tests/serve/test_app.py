"""The JSON API through FastAPI's TestClient, against a tiny translation run trained here.

Oracles: the translation functions of the library (greedy output), the model's own
teacher-forced log-probabilities (beam scores), softmax rows summing to one (attention),
and the mask definitions written out by hand (masks view).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient

from transformer_lab import Translator
from transformer_lab.cli import main
from transformer_lab.data import BOS_ID, EOS_ID
from transformer_lab.data.subword import token_labels
from transformer_lab.decoding import gnmt_length_penalty
from transformer_lab.decoding.sentences import translate_sentences
from transformer_lab.serve import create_app, load_served_models, masks_view
from transformer_lab.serve.intake import MAX_BODY_BYTES, MAX_ERRORS_SHOWN
from transformer_lab.serve.requests import MAX_TEXT_CHARACTERS
from transformer_lab.tasks.translation import predict as translation_predict
from transformer_lab.training import resolve_checkpoint

NAME = "tiny"
SENTENCE = "Ein Hund spielt am Strand."


@pytest.fixture(scope="module")
def served(translation_run: Path) -> dict[str, Any]:
    return load_served_models([f"{NAME}={translation_run}"])


@pytest.fixture(scope="module")
def client(served: dict[str, Any]) -> TestClient:
    return TestClient(create_app(served))


def post(client: TestClient, path: str, **body: Any) -> dict[str, Any]:
    response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def teacher_forced_log_prob(model: torch.nn.Module, source_ids: list[int], output_ids: list[int]) -> float:
    """Sum of log p(token) for ``output_ids`` then ``<eos>``, read from one full forward pass."""
    with torch.no_grad():
        logits = model(torch.tensor([source_ids]), torch.tensor([[BOS_ID, *output_ids]]))  # [1, T, V]
    log_probs = logits.log_softmax(dim=-1)[0]  # [T, V]
    targets = [*output_ids, EOS_ID]
    return float(sum(log_probs[position, token] for position, token in enumerate(targets)))


def test_models_lists_the_checkpoint_with_its_task_and_shape(client: TestClient, translation_run: Path) -> None:
    listed = client.get("/api/models").json()["models"]
    assert [(model["name"], model["task"]) for model in listed] == [(NAME, "translation")]
    assert listed[0]["layers"] == 2 and listed[0]["heads"] == 2
    assert listed[0]["checkpoint"] == str(translation_run / "best")


TEXT_FIELD = {"name": "text", "type": "text", "required": True, "min_length": 1, "max_length": MAX_TEXT_CHARACTERS}
# Bodies each endpoint answers, to which one field at a time is set to a bound.
VALID_BODIES = {
    "/api/translate": {"text": SENTENCE},
    "/api/translation/attention": {"text": SENTENCE, "target_ids": [5]},
    "/api/echo": {"text": "hello", "numbers": [1]},
}


@pytest.fixture(scope="module")
def with_echo(served: dict[str, Any], echo_checkpoint: Path) -> dict[str, Any]:
    """The tiny translation model and the toy task's "echo", served together."""
    return {**served, **load_served_models([f"echo={echo_checkpoint}"])}


def test_models_carry_their_tasks_endpoints_and_fields(with_echo: dict[str, Any]) -> None:
    listed = {model["name"]: model for model in TestClient(create_app(with_echo)).get("/api/models").json()["models"]}
    assert listed[NAME]["endpoints"] == [
        {
            "path": "/api/translate",
            "fields": [
                TEXT_FIELD,
                {
                    "name": "strategy",
                    "type": "choice",
                    "required": False,
                    "default": "beam",
                    "choices": ["greedy", "beam"],
                },
                {
                    "name": "beam_size",
                    "type": "integer",
                    "required": False,
                    "default": 5,
                    "minimum": 1,
                    "maximum": translation_predict.MAX_BEAM_SIZE,
                    "description": "beam search only; also the n-best length",
                },
            ],
        },
        {
            "path": "/api/translation/attention",
            "fields": [
                TEXT_FIELD,
                {
                    "name": "target_ids",
                    "type": "json",
                    "required": True,
                    "max_length": 1024,
                    "description": "a candidate's ids, from /api/translate",
                },
            ],
        },
    ]
    assert listed["echo"]["task"] == "echo" and listed["echo"]["device"] == "cpu"
    assert listed["echo"]["endpoints"] == [
        {
            "path": "/api/echo",
            "fields": [
                TEXT_FIELD,
                {"name": "numbers", "type": "json", "required": True, "min_length": 1, "max_length": 4},
                {
                    "name": "times",
                    "type": "integer",
                    "required": False,
                    "default": 2,
                    "minimum": 1,
                    "maximum": 3,
                    "description": "copies of the text",
                },
                {"name": "separator", "type": "choice", "required": False, "default": " ", "choices": [" ", " | "]},
                {"name": "shout", "type": "boolean", "required": False, "default": False},
                {"name": "scale", "type": "number", "required": False, "default": 1.0, "minimum": 0, "maximum": 10},
            ],
        }
    ]


def _value(field: dict[str, Any], size: int) -> Any:
    """A value of ``field``'s type whose number (or length) is ``size``; the JSON fields here are lists of ints."""
    if field["type"] in ("integer", "number"):
        return size
    return "a" * size if field["type"] == "text" else [1] * size


@pytest.mark.parametrize("max_text_characters", [MAX_TEXT_CHARACTERS, 50])
def test_every_declared_bound_is_the_one_the_server_enforces(
    with_echo: dict[str, Any], max_text_characters: int
) -> None:
    client = TestClient(create_app(with_echo, max_text_characters=max_text_characters))
    checked = []
    for model in client.get("/api/models").json()["models"]:
        for endpoint in model["endpoints"]:
            for field in endpoint["fields"]:
                for bound, outside in (("minimum", -1), ("maximum", 1), ("min_length", -1), ("max_length", 1)):
                    if bound not in field:
                        continue
                    body = {**VALID_BODIES[endpoint["path"]], "model": model["name"]}
                    within = client.post(endpoint["path"], json={**body, field["name"]: _value(field, field[bound])})
                    # Within the bound the request is valid (a model may still refuse it: 400, e.g. too many tokens).
                    assert within.status_code in (200, 400), (endpoint["path"], field["name"], bound, within.text)
                    past = client.post(
                        endpoint["path"], json={**body, field["name"]: _value(field, field[bound] + outside)}
                    )
                    assert past.status_code == 422, (endpoint["path"], field["name"], bound, past.text)
                    assert past.json()["error"].startswith(f"{field['name']}: "), past.text
                    checked.append((endpoint["path"], field["name"], bound))
    assert ("/api/translate", "text", "max_length") in checked and ("/api/echo", "scale", "minimum") in checked
    assert len(checked) == 15  # translate 4, attention 3, echo 8
    text_bounds = {
        field["max_length"]
        for model in client.get("/api/models").json()["models"]
        for endpoint in model["endpoints"]
        for field in endpoint["fields"]
        if field["type"] == "text"
    }
    assert text_bounds == {max_text_characters}


def test_page_and_its_files_are_served(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for name in ("app.js", "style.css"):
        assert f"/static/{name}" in page.text
        assert client.get(f"/static/{name}").status_code == 200
    assert "http" not in page.text.replace("http-equiv", ""), "the page must load nothing from elsewhere"
    for path in ("/", "/static/app.js", "/api/models"):  # /api/models: was 405
        head = client.head(path)
        assert head.status_code == 200 and head.content == b"", path
        assert head.headers["content-length"] == client.get(path).headers["content-length"], path


def test_greedy_answer_is_the_library_translation(client: TestClient, served: dict[str, Any]) -> None:
    translator = served[NAME].handler.predictor
    answer = post(client, "/api/translate", model=NAME, text=SENTENCE, strategy="greedy")
    greedy = dataclasses.replace(translator.config.decode, strategy="greedy")
    expected = translate_sentences(translator.model, translator.tokenizers, [SENTENCE], greedy)[0]
    assert [candidate["text"] for candidate in answer["candidates"]] == [expected]
    assert answer["model"] == NAME and answer["elapsed_ms"] > 0


def test_a_beam_size_with_greedy_search_is_refused_naming_it(client: TestClient) -> None:
    # Greedy search ignored it: a greedy request with beam_size 7 answered one greedy line.
    body = {"model": NAME, "text": SENTENCE, "strategy": "greedy", "beam_size": 7}
    response = client.post("/api/translate", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"] == (
        "beam_size: expected only with strategy 'beam', got strategy 'greedy' (leave beam_size out)"
    )
    # The default search is beam search, which takes it.
    assert len(post(client, "/api/translate", model=NAME, text=SENTENCE, beam_size=2)["candidates"]) == 2


def test_beam_nbest_scores_are_the_models_log_probabilities(client: TestClient, served: dict[str, Any]) -> None:
    translator = served[NAME].handler.predictor
    answer = post(client, "/api/translate", model=NAME, text=SENTENCE, strategy="beam", beam_size=4)
    candidates = answer["candidates"]
    assert len(candidates) == 4
    assert len({tuple(candidate["ids"]) for candidate in candidates}) == 4, "the n-best lines differ"
    scores = [candidate["score"] for candidate in candidates]
    assert scores == sorted(scores, reverse=True)
    source_ids = translator.tokenizers.source.encode(SENTENCE)
    alpha = translator.config.decode.length_penalty
    for candidate in candidates:
        assert candidate["text"] == translator.tokenizers.target.decode(candidate["ids"])
        assert candidate["tokens"] == token_labels(translator.tokenizers.target, candidate["ids"])
        expected = teacher_forced_log_prob(translator.model, source_ids, candidate["ids"])
        assert math.isclose(candidate["log_prob"], expected, abs_tol=1e-4)
        penalty = gnmt_length_penalty(len(candidate["ids"]) + 1, alpha)  # + 1: the <eos>
        assert math.isclose(candidate["score"], candidate["log_prob"] / penalty, rel_tol=1e-5)


def test_attention_has_every_layer_and_head_and_rows_sum_to_one(client: TestClient, served: dict[str, Any]) -> None:
    translator = served[NAME].handler.predictor
    answer = post(client, "/api/translate", model=NAME, text=SENTENCE, strategy="beam", beam_size=3)
    attention = answer["attention"]
    best = answer["candidates"][0]
    assert attention["source_tokens"] == token_labels(
        translator.tokenizers.source, translator.tokenizers.source.encode(SENTENCE)
    )
    assert attention["target_tokens"] == [*best["tokens"], "<eos>"]
    weights = torch.tensor(attention["weights"])  # [N, H, T, S]
    assert tuple(weights.shape) == (2, 2, len(best["ids"]) + 1, len(attention["source_tokens"]))
    assert torch.allclose(weights.sum(dim=-1), torch.ones(weights.shape[:-1]), atol=1e-3)
    # The attention of another n-best line, asked for separately, is that line's own.
    other = answer["candidates"][-1]
    again = post(client, "/api/translation/attention", model=NAME, text=SENTENCE, target_ids=best["ids"])
    assert again["weights"] == attention["weights"]
    second = post(client, "/api/translation/attention", model=NAME, text=SENTENCE, target_ids=other["ids"])
    assert len(second["weights"][0][0]) == len(other["ids"]) + 1


def test_masks_follow_their_definitions(client: TestClient, served: dict[str, Any]) -> None:
    answer = post(client, "/api/masks", sentences=["one two three four five", "six seven"])
    assert answer["length"] == 5 and answer["tokenizer"] == "words"
    short = answer["sentences"][1]
    assert short["tokens"] == ["six", "seven", "<pad>", "<pad>", "<pad>"] and short["real_length"] == 2
    for sentence in answer["sentences"]:
        real = sentence["real_length"]
        expected = {
            "causal": lambda query, key: key > query,
            "key_padding": lambda query, key: key >= real,
            "decoder": lambda query, key: key > query or key >= real,
            "rows_and_columns": lambda query, key: query >= real or key >= real,
        }
        assert [panel["name"] for panel in sentence["panels"]] == list(expected)
        for panel in sentence["panels"]:
            rule = expected[panel["name"]]
            assert panel["hidden"] == [[int(rule(query, key)) for key in range(5)] for query in range(5)], panel["name"]
    with_model = post(client, "/api/masks", sentences=[SENTENCE], model=NAME)
    tokenizer = served[NAME].handler.predictor.tokenizers
    assert with_model["sentences"][0]["tokens"] == token_labels(tokenizer.source, tokenizer.source.encode(SENTENCE))
    assert with_model["tokenizer"] == "subwords"


BAD_REQUESTS = [
    ("/api/translate", {"model": NAME, "text": ""}, 422, "text"),
    ("/api/translate", {"model": NAME, "text": "   \n "}, 422, "whitespace"),
    ("/api/translate", {"model": NAME, "text": "Hund " * 2000}, 422, f"at most {MAX_TEXT_CHARACTERS} characters"),
    ("/api/translate", {"model": "nobody", "text": SENTENCE}, 404, "'nobody'"),
    ("/api/translate", {"model": NAME, "text": SENTENCE, "beam_size": 0}, 422, "beam_size"),
    ("/api/translate", {"model": NAME, "text": SENTENCE, "beam_size": 99}, 422, "beam_size"),
    ("/api/translate", {"model": NAME, "text": SENTENCE, "strategy": "sampling"}, 422, "strategy"),
    ("/api/translate", {"model": NAME, "text": SENTENCE, "colour": "red"}, 422, "colour"),
    ("/api/translate", {"text": SENTENCE}, 422, "model"),
    ("/api/translate", ["not", "an", "object"], 422, "body"),
    # 300 words: under the character limit, over the tiny model's 64 positions.
    # Named as the request's field (was: "sentence must be at most ...", no field of the API).
    ("/api/translate", {"model": NAME, "text": "Hund " * 150}, 400, "text must be at most 64 subword tokens"),
    ("/api/translation/attention", {"model": NAME, "text": SENTENCE, "target_ids": [10**6]}, 400, "target_ids"),
    # The ids sent, and the limit on them: <bos> takes one of the 64 positions (was: "at most 64 ..., got 65").
    (
        "/api/translation/attention",
        {"model": NAME, "text": SENTENCE, "target_ids": [5] * 64},
        400,
        "target_ids: expected at most 63 ids (the model's max_len 64, less the <bos> the decoder reads first), got 64",
    ),
    ("/api/masks", {"sentences": []}, 422, "sentences"),
    ("/api/masks", {"sentences": ["a"] * 5}, 422, "sentences"),
    ("/api/masks", {"sentences": ["a", "word " * 49]}, 400, "sentences.1: expected 1 to 48 tokens, got 49"),
    ("/api/masks", {"sentences": ["a b"], "model": "nobody"}, 404, "'nobody'"),
]


@pytest.mark.parametrize(("path", "body", "status", "words"), BAD_REQUESTS)
def test_bad_requests_get_a_4xx_json_error(client: TestClient, path: str, body: Any, status: int, words: str) -> None:
    response = client.post(path, json=body)
    assert response.status_code == status, response.text
    assert words in response.json()["error"]


def test_a_compressed_body_is_refused_naming_its_encoding(client: TestClient) -> None:
    # Was 422 "body: expected UTF-8 JSON, got b'\\x8b' at byte offset 1": the symptom, not the cause.
    body = gzip.compress(json.dumps({"model": NAME, "text": SENTENCE}).encode("utf-8"))
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    response = client.post("/api/translate", content=body, headers=headers)
    assert response.status_code == 415
    assert response.json() == {
        "error": "Content-Encoding: expected none (identity), got 'gzip'; send the JSON uncompressed"
    }
    plain = {"Content-Type": "application/json", "Content-Encoding": "identity"}
    assert client.post("/api/translate", content=gzip.decompress(body), headers=plain).status_code == 200


def test_the_line_limit_counts_the_text_fields_only(served: dict[str, Any]) -> None:
    # strategy is a str too (a choice, sent or defaulted); counted as a line, it made the limit one short.
    client = TestClient(create_app(served, max_lines=3))
    three_lines = {"model": NAME, "text": "Hund\nHund\nHund"}
    for body in (three_lines, {**three_lines, "strategy": "greedy"}):
        assert client.post("/api/translate", json=body).status_code == 200, body
    over = client.post("/api/translate", json={"model": NAME, "text": "Hund\n" * 4, "strategy": "greedy"})
    assert over.status_code == 422 and over.json()["error"] == "text: expected at most 3 lines in one request, got 4"


# A value of another JSON type was coerced (true read as 1, "3" as 3, 2.0 as 2) while a number for text was refused.
WRONG_TYPES = [
    ("/api/translate", {"beam_size": True}, "beam_size: expected an integer, got true"),
    ("/api/translate", {"beam_size": "3"}, 'beam_size: expected an integer, got "3"'),
    ("/api/translate", {"beam_size": 2.0}, "beam_size: expected an integer, got 2.0"),
    ("/api/translate", {"beam_size": None}, "beam_size: expected an integer, got null"),
    ("/api/translate", {"text": 5}, "text: expected a string, got 5"),
    ("/api/translation/attention", {"target_ids": ["36", 4]}, 'target_ids.0: expected an integer, got "36"'),
    (
        "/api/translation/attention",
        {"target_ids": [True, False]},
        "target_ids.0: expected an integer, got true; target_ids.1: expected an integer, got false",
    ),
    ("/api/translation/attention", {"target_ids": 5}, "target_ids: expected a list, got 5"),
    ("/api/echo", {"scale": "2"}, 'scale: expected a number, got "2"'),
    ("/api/echo", {"shout": 1}, "shout: expected true or false, got 1"),
    ("/api/echo", {"times": 2.5}, "times: expected an integer, got 2.5"),
    ("/api/masks", {"sentences": ["a b"], "model": 5}, "model: expected a string, got 5"),
    ("/api/masks", {"sentences": [["a"]]}, "sentences.0: expected a string, got a list"),
]


@pytest.mark.parametrize(("path", "fields", "message"), WRONG_TYPES)
def test_a_value_of_another_json_type_is_refused_naming_the_field(
    with_echo: dict[str, Any], path: str, fields: dict[str, Any], message: str
) -> None:
    body = {**VALID_BODIES.get(path, {}), **fields}
    if path != "/api/masks":
        body["model"] = "echo" if path == "/api/echo" else NAME
    response = TestClient(create_app(with_echo)).post(path, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"] == message


# pydantic's own wording ("Input should be greater than or equal to 1", "Field required") named no given value.
# Validation comes before the model is looked up, so the couplet and classify routes answer these for any model.
OUT_OF_RANGE = [
    ("/api/translate", {"beam_size": -1}, "beam_size: expected an integer in [1, 8], got -1"),
    ("/api/translate", {"beam_size": 9}, "beam_size: expected an integer in [1, 8], got 9"),
    (
        "/api/translate",
        {"beam_size": 10**30},
        "beam_size: expected an integer in [1, 8], got 1000000000000000000000000000000",
    ),
    ("/api/couplet", {"text": "春风", "count": 0}, "count: expected an integer in [1, 8], got 0"),
    ("/api/echo", {"times": 4}, "times: expected an integer in [1, 3], got 4"),
    ("/api/echo", {"scale": -0.5}, "scale: expected a number in [0, 10], got -0.5"),
    ("/api/echo", {"scale": 11}, "scale: expected a number in [0, 10], got 11"),
    ("/api/translate", {"strategy": "Beam"}, "strategy: expected 'greedy' or 'beam', got 'Beam'"),
    ("/api/translate", {"strategy": 5}, "strategy: expected 'greedy' or 'beam', got 5"),
    ("/api/translate", {"strategy": "b" * 100}, f"strategy: expected 'greedy' or 'beam', got '{'b' * 37}...'"),
    ("/api/echo", {"separator": ","}, "separator: expected ' ' or ' | ', got ','"),
    ("/api/translate", {"text": ""}, "text: expected at least 1 character, got 0"),
    ("/api/translate", {"model": ""}, "model: expected at least 1 character, got 0"),
    ("/api/translate", {"model": "m" * 600}, "model: expected at most 512 characters, got 600"),
    ("/api/translate", {"text": "a" * 1200}, "text: expected at most 1000 characters, got 1200"),
    ("/api/masks", {"sentences": []}, "sentences: expected at least 1 item, got 0"),
    ("/api/masks", {"sentences": ["a"] * 5}, "sentences: expected at most 4 items, got 5"),
    ("/api/masks", {"sentences": ["a"], "model": ""}, "model: expected at least 1 character, got 0"),
    ("/api/echo", {"numbers": []}, "numbers: expected at least 1 item, got 0"),
    ("/api/translation/attention", {"target_ids": [5] * 1025}, "target_ids: expected at most 1024 items, got 1025"),
    ("/api/translate", {"text": None}, "text: expected a string (a required field), got none"),
    ("/api/classify", {"text": None}, "text: expected a string (a required field), got none"),
    ("/api/translation/attention", {"target_ids": None}, "target_ids: expected a list (a required field), got none"),
    ("/api/masks", {"sentences": None}, "sentences: expected a list (a required field), got none"),
    (
        "/api/translate",
        {"model": None, "text": None},
        "model: expected a string (a required field), got none; text: expected a string (a required field), got none",
    ),
]


@pytest.mark.parametrize(("path", "fields", "message"), OUT_OF_RANGE)
def test_a_value_out_of_range_or_choices_or_a_missing_field_is_refused_naming_what_was_given(
    with_echo: dict[str, Any], path: str, fields: dict[str, Any], message: str
) -> None:
    # A field given as None here is left out of the body.
    body = {**VALID_BODIES.get(path, {"text": SENTENCE}), "model": "echo" if path == "/api/echo" else NAME, **fields}
    if path == "/api/masks":
        body = {"sentences": ["a b"], **fields}
    body = {key: value for key, value in body.items() if value is not None}
    response = TestClient(create_app(with_echo)).post(path, json=body)
    assert response.status_code == 422, response.text
    assert response.json() == {"error": message}


@pytest.mark.parametrize("path", ["/api/translate", "/api/masks"])
@pytest.mark.parametrize(
    ("content", "headers", "message"),
    [
        (b"", {"Content-Type": "application/json"}, "body: expected a JSON object, got an empty body"),
        (b"", {}, "body: expected a JSON object, got an empty body"),
        (b" null ", {"Content-Type": "application/json"}, "body: expected a JSON object, got null"),
    ],
)
def test_an_empty_or_null_body_is_refused_as_such(
    client: TestClient, path: str, content: bytes, headers: dict[str, str], message: str
) -> None:
    # An empty body was "body: Field required" (FastAPI's no body); a JSON null is a value of another type.
    response = client.post(path, content=content, headers=headers)
    assert response.status_code == 422, response.text
    assert response.json() == {"error": message}


def test_an_integer_is_taken_as_a_number_and_a_list_body_is_refused_as_such(with_echo: dict[str, Any]) -> None:
    client = TestClient(create_app(with_echo))
    answer = post(client, "/api/echo", model="echo", text="hi", numbers=[1, 2], scale=2)
    assert answer["total"] == 6.0
    refused = client.post("/api/translate", json=["not", "an", "object"])
    assert refused.status_code == 422 and refused.json()["error"] == "body: expected a JSON object, got a list"


def test_malformed_json_and_unknown_paths_get_json_errors(client: TestClient) -> None:
    response = client.post(
        "/api/translate", content=b'{"model": "tiny", "text": ', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422 and "malformed JSON" in response.json()["error"]
    assert client.get("/api/nothing").json()["error"] == "Not Found"
    assert client.get("/api/translate").status_code == 405


BAD_UTF8 = b'{"model": "tiny", "text": "Ein \xff"}'
# Bodies json.loads cannot read for other reasons than their syntax; each was a bare 400 "error parsing the body".
UNREADABLE_BODIES = [
    (BAD_UTF8, f"body: expected UTF-8 JSON, got b'\\xff' at byte offset {BAD_UTF8.index(0xFF)} (invalid start byte)"),
    (
        b'{"model": "tiny", "text": "Ein", "beam_size": 1' + b"0" * 5000 + b"}",
        f"body: expected numbers of at most {sys.get_int_max_str_digits()} digits, got one of 5001 digits",
    ),
    (
        b'{"model": "tiny", "text": "Ein", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        f"body: expected JSON nested at most about {sys.getrecursionlimit()} levels deep, got deeper",
    ),
    # json.loads keeps the last of a repeated key: this was answered for "Eine Frau".
    (b'{"model": "tiny", "text": "Ein Hund", "text": "Eine Frau"}', "body: key 'text' appears twice"),
]


@pytest.mark.parametrize(("content", "message"), UNREADABLE_BODIES)
def test_a_body_json_cannot_read_gets_a_422_saying_why(client: TestClient, content: bytes, message: str) -> None:
    response = client.post("/api/translate", content=content, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json() == {"error": message}


def test_a_body_of_100000_unknown_keys_gets_a_short_422_naming_each_problem_once(client: TestClient) -> None:
    # Was: a 7.9 MB answer naming all 100,000 keys twice, after a second of work on the event loop.
    body = {"model": NAME, "text": SENTENCE, **{f"{index:x}": 1 for index in range(100_000)}}
    content = json.dumps(body, separators=(",", ":")).encode()
    assert 900_000 < len(content) < MAX_BODY_BYTES
    response = client.post("/api/translate", content=content, headers={"Content-Type": "application/json"})
    assert response.status_code == 422 and len(response.content) < 2_000, response.content[:200]
    named = [f"{index:x}: Extra inputs are not permitted" for index in range(MAX_ERRORS_SHOWN)]
    assert response.json() == {"error": "; ".join([*named, "and 99,980 more unknown keys (100,000 in all)"])}


def test_a_422_names_its_first_problems_once_and_counts_the_rest(client: TestClient) -> None:
    # Validation's own errors, one per list item: 1,024 wrong ids were 1,024 messages, twice.
    body = {"model": NAME, "text": SENTENCE, "target_ids": ["x"] * 1024}
    response = client.post("/api/translation/attention", json=body)
    assert response.status_code == 422
    named = [f'target_ids.{index}: expected an integer, got "x"' for index in range(MAX_ERRORS_SHOWN)]
    assert response.json() == {"error": "; ".join([*named, "and 1,004 more problems (1,024 in all)"])}
    extra = {f"extra{index:02d}": 1 for index in range(3)}
    response = client.post("/api/translate", json={"model": NAME, "text": SENTENCE, **extra})
    named = [f"extra{index:02d}: Extra inputs are not permitted" for index in range(3)]
    assert response.json() == {"error": "; ".join(named)}  # a few unknown keys, as validation names them
    long_key = "k" * 5_000
    response = client.post("/api/translate", json={"model": NAME, "text": SENTENCE, long_key: 1})
    assert response.json() == {"error": f"{'k' * 77}...: Extra inputs are not permitted"}


SURROGATE = "the lone surrogate U+D800 at character {} (a \\u escape without its pair)"
# JSON may escape half of a surrogate pair ("\ud800"), which json.loads reads into a str with no UTF-8 form.
# In a value of another type, or in over 20 unknown keys, it was quoted into the 422 and the answer could not be
# encoded (a 500); in a text, pydantic's "Input should be a valid string, unable to parse raw data ...".
LONE_SURROGATES = [
    ("/api/translate", '"text": "Ein \\ud800 Hund"', f"text: expected valid Unicode text, got {SURROGATE.format(4)}"),
    (
        "/api/translate",
        '"text": "Ein", "beam_size": "\\ud800"',
        f"beam_size: expected valid Unicode text, got {SURROGATE.format(0)}",
    ),
    (
        "/api/translation/attention",
        '"text": "Ein", "target_ids": [5, "x\\ud800"]',
        f"target_ids.1: expected valid Unicode text, got {SURROGATE.format(1)}",
    ),
    (
        "/api/translate",
        '"text": "Ein", "\\ud800": 1',
        f"body: expected keys of valid Unicode text, got a key with {SURROGATE.format(0)}",
    ),
    (
        "/api/translate",
        '"text": "Ein", ' + ", ".join(f'"\\ud800{index}": 1' for index in range(25)),
        f"body: expected keys of valid Unicode text, got a key with {SURROGATE.format(0)}",
    ),
]


@pytest.mark.parametrize(("path", "fields", "message"), LONE_SURROGATES)
def test_a_lone_surrogate_escape_anywhere_in_a_body_gets_a_422_naming_where(
    client: TestClient, path: str, fields: str, message: str
) -> None:
    content = f'{{"model": "{NAME}", {fields}}}'.encode()
    response = client.post(path, content=content, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json() == {"error": message}
    # A pair escaped whole is one character, served as any other.
    paired = client.post(
        "/api/masks", content=b'{"sentences": ["a \\ud83d\\ude00"]}', headers={"Content-Type": "application/json"}
    )
    assert paired.status_code == 200 and paired.json()["sentences"][0]["tokens"] == ["a", "\U0001f600"]


@pytest.mark.parametrize(
    ("headers", "given"),
    [
        ({"Content-Type": "text/plain"}, "'text/plain'"),
        ({"Content-Type": "application/x-www-form-urlencoded"}, "'application/x-www-form-urlencoded'"),
        ({}, "none"),
    ],
)
def test_a_body_sent_as_another_content_type_gets_a_415_naming_it(
    client: TestClient, headers: dict[str, str], given: str
) -> None:
    # A well-formed JSON object, but not sent as JSON: the server never read it as one.
    response = client.post("/api/translate", content=b'{"model": "tiny", "text": "Ein Hund."}', headers=headers)
    assert response.status_code == 415, response.text
    assert response.json()["error"] == f"Content-Type: expected application/json, got {given}"


def test_a_request_waits_a_bounded_time_for_the_model_then_gets_503(
    served: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, release = threading.Event(), threading.Event()
    original = masks_view.masks_for

    def slow_masks(*arguments: Any) -> dict[str, Any]:
        entered.set()
        release.wait(timeout=30)
        return original(*arguments)

    monkeypatch.setattr(masks_view, "masks_for", slow_masks)
    client = TestClient(create_app(served, lock_timeout=0.2))
    translate = {"model": NAME, "text": SENTENCE, "strategy": "greedy"}
    outcome: dict[str, Any] = {}
    holder = threading.Thread(
        target=lambda: outcome.update(first=client.post("/api/masks", json={"sentences": ["a b"]}))
    )
    holder.start()
    try:
        assert entered.wait(timeout=30)
        started = time.perf_counter()
        waiting = client.post("/api/translate", json=translate)
        assert waiting.status_code == 503 and "busy" in waiting.json()["error"]
        assert time.perf_counter() - started < 10
    finally:
        release.set()
        holder.join(timeout=30)
    assert outcome["first"].status_code == 200
    assert client.post("/api/translate", json=translate).status_code == 200, "the model is free again"


def test_run_folders_names_and_errors(translation_run: Path, tmp_path: Path) -> None:
    assert resolve_checkpoint(translation_run) == translation_run / "best"
    assert resolve_checkpoint(translation_run / "last") == translation_run / "last"
    assert list(load_served_models([translation_run])) == ["tiny-translation"]
    assert list(load_served_models([translation_run / "last"])) == ["tiny-translation/last"]
    with pytest.raises(ValueError, match="expected a unique name"):
        load_served_models([translation_run, translation_run])
    with pytest.raises(FileNotFoundError, match="expected a checkpoint folder"):
        resolve_checkpoint(tmp_path)
    (tmp_path / "config.json").write_text('{"task": "copy"}', encoding="utf-8")
    with pytest.raises(ValueError, match="got task 'copy'"):
        load_served_models([tmp_path])


def test_a_name_too_long_to_be_asked_for_is_refused_when_served_and_a_long_folder_name_is_served(
    translation_run: Path, tmp_path: Path
) -> None:
    # Was: served and listed, then every request naming it a 422 ("expected at most 200 characters").
    with pytest.raises(ValueError) as raised:
        load_served_models([f"{'m' * 513}={translation_run}"])
    assert str(raised.value).endswith(
        "expected a model name of at most 512 characters, got 513; name it with NAME=PATH"
    )
    long_folder = tmp_path / ("x" * 250)  # near the common 255-byte limit of a folder name
    shutil.copytree(translation_run / "best", long_folder)
    client = TestClient(create_app(load_served_models([long_folder])))
    response = client.post("/api/translate", json={"model": "x" * 250, "text": "Ein Hund."})
    assert response.status_code == 200, response.text


def test_a_path_holding_an_equals_sign_is_served_as_a_path_and_empty_values_are_named(
    translation_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(translation_run, tmp_path / "lr=0.1")
    monkeypatch.chdir(tmp_path)
    # An existing folder is a path even where it reads as NAME=PATH; NAME=PATH still names one.
    served = load_served_models(["lr=0.1"])
    assert {name: model.checkpoint for name, model in served.items()} == {"lr=0.1": Path("lr=0.1", "best")}
    assert list(load_served_models(["tuned=lr=0.1"])) == ["tuned"]
    # An empty value is named as such, never read as the current folder ('.').
    with pytest.raises(ValueError, match=r"^--checkpoint x=: expected a checkpoint path after x=, got an empty one$"):
        load_served_models(["x="])
    with pytest.raises(ValueError, match=r"^--checkpoint: expected \[NAME=\]PATH, got an empty value$"):
        load_served_models([""])
    for open_empty in (lambda: resolve_checkpoint(""), lambda: Translator("")):
        with pytest.raises(ValueError, match=r"^checkpoint: expected a checkpoint folder .*, got an empty path$"):
            open_empty()
    with pytest.raises(SystemExit):
        main(["translate", "--checkpoint", "", "Ein Hund."])
    assert "argument --checkpoint: expected a path, got an empty one" in capsys.readouterr().err


def test_cli_reports_bad_checkpoints_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--checkpoint", str(tmp_path / "missing")]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("transformer-lab serve: error: --checkpoint: expected a checkpoint")
    assert error[0].endswith(f"got '{tmp_path / 'missing'}'")
    # The port is read as the other bounded options are, by argparse, before any checkpoint.
    for port, given in (("70000", "70000"), ("0", "0"), ("abc", "'abc'")):
        with pytest.raises(SystemExit) as exited:
            main(["serve", "--checkpoint", str(tmp_path), "--port", port])
        assert exited.value.code == 2
        assert f"argument --port: expected an int in [1, 65,535], got {given}" in capsys.readouterr().err
