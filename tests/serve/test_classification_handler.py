"""The classification pane's endpoint, on a randomly initialised classifier saved here.

The oracle is the task's own ``predict`` on the same checkpoint: the page must show its
label and every class's probability, in the order of the class names, summing to one.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient

from transformer_lab.data import PAD_ID, SubwordTokenizer
from transformer_lab.models import TransformerClassifier
from transformer_lab.serve import create_app, load_served_models
from transformer_lab.tasks.classification import train as classification_train
from transformer_lab.tasks.classification.predict import Classifier
from transformer_lab.training import apply_overrides, config_to_dict, save_checkpoint

TEXTS = ["Stocks rally as markets rebound.", "The team wins the final match.", "New chip doubles battery life."]
CLASSES = ("World", "Sports", "Business", "Sci/Tech")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tokenizer = SubwordTokenizer.train(TEXTS * 3, vocab_size=300, min_frequency=1)
    config = apply_overrides(
        classification_train.default_config(),
        ["model.d_model=32", "model.nhead=2", "model.num_layers=1", "model.dim_feedforward=64", "model.max_len=32"],
    )
    config = dataclasses.replace(
        config,
        class_names=CLASSES,
        model=dataclasses.replace(
            config.model, vocab_size=tokenizer.vocab_size, num_classes=len(CLASSES), pad_id=PAD_ID
        ),
    )
    torch.manual_seed(0)
    model = TransformerClassifier.from_config(config.model)
    folder = tmp_path_factory.mktemp("classifier") / "run" / "best"
    save_checkpoint(
        folder,
        model,
        {"task": classification_train.TASK_NAME, **config_to_dict(config)},
        extra_files={classification_train.TOKENIZER_FILE: tokenizer.to_json()},
    )
    return folder


@pytest.fixture(scope="module")
def client(checkpoint: Path) -> TestClient:
    return TestClient(create_app(load_served_models([f"news={checkpoint}"])))


def test_label_and_bars_are_the_tasks_prediction(client: TestClient, checkpoint: Path) -> None:
    response = client.post("/api/classify", json={"model": "news", "text": TEXTS[0]})
    assert response.status_code == 200, response.text
    answer = response.json()
    expected = Classifier(*classification_train.load_classifier(checkpoint)).classify(TEXTS[0], precision="fp32")
    assert answer["label"] == expected.label_name
    assert [entry["label"] for entry in answer["classes"]] == list(CLASSES)
    for entry in answer["classes"]:
        assert math.isclose(entry["probability"], expected.probabilities[entry["label"]], abs_tol=1e-6)
    assert math.isclose(sum(entry["probability"] for entry in answer["classes"]), 1.0, abs_tol=1e-5)
    assert answer["label"] == max(answer["classes"], key=lambda entry: entry["probability"])["label"]
    described = client.get("/api/models").json()["models"][0]
    assert described["task"] == "classification" and described["labels"] == list(CLASSES)


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"model": "news", "text": " "}, 422, "whitespace"),
        ({"model": "news", "text": "market " * 100}, 400, "more than the model reads (32"),
        ({"model": "news", "text": "x" * 10_000}, 422, "at most 1000 characters"),
        ({"model": "elsewhere", "text": "x"}, 404, "'elsewhere'"),
    ],
)
def test_bad_texts_get_a_4xx_json_error(client: TestClient, body: dict[str, Any], status: int, words: str) -> None:
    response = client.post("/api/classify", json=body)
    assert response.status_code == status, response.text
    assert words in response.json()["error"]


def test_a_text_too_long_is_refused_naming_the_request_field_and_no_option_the_api_lacks(
    client: TestClient, checkpoint: Path
) -> None:
    response = client.post("/api/classify", json={"model": "news", "text": "market " * 100})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    # The body's field is `text`, and the API cannot truncate: no texts[0], no --truncate.
    assert error.startswith("text: the text is ") and error.endswith("(32, its max_len); shorten it"), error
    # The Python API names its own argument.
    with pytest.raises(ValueError, match=r"^texts\[0\]: .*; shorten it, or truncate it explicitly \(truncate=True\)$"):
        Classifier(*classification_train.load_classifier(checkpoint)).classify(["market " * 100])


def test_masks_view_reads_with_the_classifiers_tokenizer(client: TestClient) -> None:
    answer = client.post("/api/masks", json={"sentences": [TEXTS[1]], "model": "news"}).json()
    assert answer["tokenizer"] == "subwords" and len(answer["sentences"][0]["tokens"]) >= len(TEXTS[1].split())
