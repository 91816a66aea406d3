"""The couplet pane's endpoint, on a randomly initialised couplet checkpoint saved here.

Random weights are enough: the couplet constraints decide the form (length, punctuation
under punctuation), and the answer's own flags must agree with a check written here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient

from transformer_lab.cli import main
from transformer_lab.data import Vocabulary
from transformer_lab.decoding.couplet_constraints import CoupletConstraintConfig
from transformer_lab.evaluation.couplet_antithesis import antithesis_bonus
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.serve import create_app, load_served_models
from transformer_lab.tasks import seq2seq
from transformer_lab.tasks.couplet import train as couplet_train
from transformer_lab.training import apply_overrides, config_to_dict, save_checkpoint

CHARACTERS = "春风花月山水云天江河秋雨草星海林雾地湖溪"
MARKS = "，。"


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("couplet")
    vocabulary = Vocabulary.build([list(CHARACTERS + MARKS)])
    vocabulary.save(folder / "vocabulary.txt")
    config = apply_overrides(
        couplet_train.default_config(),
        [
            "model.d_model=32",
            "model.nhead=2",
            "model.num_encoder_layers=1",
            "model.num_decoder_layers=1",
            "model.dim_feedforward=64",
            "model.max_len=32",
        ],
    )
    config = seq2seq.with_vocabulary(config, len(vocabulary))
    torch.manual_seed(0)
    model = Seq2SeqTransformer.from_config(config.model)
    save_checkpoint(
        folder / "run" / "best",
        model,
        {"task": couplet_train.TASK_NAME, **config_to_dict(config)},
        extra_files={couplet_train.VOCABULARY_FILE: (folder / "vocabulary.txt").read_text(encoding="utf-8")},
    )
    return folder / "run"


@pytest.fixture(scope="module")
def client(run_folder: Path) -> TestClient:
    return TestClient(create_app(load_served_models([f"poet={run_folder}"])))


def post(client: TestClient, body: dict[str, Any]) -> Any:
    return client.post("/api/couplet", json=body)


def test_lower_lines_have_the_upper_lines_form_and_say_so(client: TestClient) -> None:
    upper = "春风，花月山"
    response = post(client, {"model": "poet", "text": upper, "count": 4})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["upper"] == upper and answer["model"] == "poet"
    lines = answer["candidates"]
    assert len(lines) == 4 and len({line["text"] for line in lines}) == 4
    assert [line["score"] for line in lines] == sorted((line["score"] for line in lines), reverse=True)
    for line in lines:
        text = line["text"]
        assert line["length_matches"] == (len(text) == len(upper)) and line["length_matches"]
        marks_aligned = all((character in MARKS) == (mark in MARKS) for character, mark in zip(text, upper))
        assert line["punctuation_matches"] == marks_aligned and marks_aligned
    assert client.get("/api/models").json()["models"][0]["task"] == "couplet"


def test_the_scores_are_those_that_ranked_the_lines_as_the_couplet_command_prints_them(
    client: TestClient, run_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The page showed the search's score alone: with the rerank on (the preset's), not the order of the list.
    upper = "春风花月"
    lines = post(client, {"model": "poet", "text": upper, "count": 5}).json()["candidates"]
    assert main(["couplet", "--checkpoint", str(run_folder), "--num-candidates", "5", upper]) == 0
    printed = capsys.readouterr().out.splitlines()[1:]
    assert [f"  {rank}. {line['text']}  ({line['score']:.2f})" for rank, line in enumerate(lines, 1)] == printed
    bonuses = [antithesis_bonus(upper, line["text"], CoupletConstraintConfig()) for line in lines]
    assert len(set(bonuses)) > 1  # the rerank moved the scores apart, so the check above can tell them


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"model": "poet", "text": "spring wind"}, 400, "Latin letters"),
        ({"model": "poet", "text": "，。"}, 400, "only punctuation"),
        ({"model": "poet", "text": "春" * 40}, 400, "expected at most 31"),
        ({"model": "poet", "text": "春风", "count": 9}, 422, "count"),
        ({"model": "poet", "text": ""}, 422, "text"),
    ],
)
def test_bad_upper_lines_get_a_4xx_json_error(
    client: TestClient, body: dict[str, Any], status: int, words: str
) -> None:
    response = post(client, body)
    assert response.status_code == status, response.text
    assert words in response.json()["error"]


def test_a_couplet_model_is_refused_by_the_translation_endpoint(client: TestClient) -> None:
    response = client.post("/api/translate", json={"model": "poet", "text": "春风"})
    assert response.status_code == 400 and "couplet model" in response.json()["error"]
