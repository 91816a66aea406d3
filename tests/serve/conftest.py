"""A tiny translation run, trained here by the project's own code on a made-up corpus, and a toy served task.

The corpus is written as a Multi30k folder (``multi30k/train.de`` ...) so that
``translation.train`` runs exactly as on the real data: BPE on the training split, the
Trainer, validation BLEU, ``best/`` and ``last/`` checkpoints with the tokenizer inside.

The toy task ("echo") has no pane of its own on the page; its one endpoint declares a
field of every kind the page builds an input for, so the generic form is tested on it.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import socket
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

import pytest
import torch

from transformer_lab.tasks import registry
from transformer_lab.tasks.task import Endpoint, Serving, Task
from transformer_lab.tasks.translation import train as translation_train
from transformer_lab.training import apply_overrides

SUBJECTS = [("Ein Mann", "A man"), ("Eine Frau", "A woman"), ("Ein Hund", "A dog"), ("Ein Kind", "A child")]
VERBS = [("läuft", "runs"), ("schläft", "sleeps"), ("spielt", "plays"), ("wartet", "waits")]
PLACES = [("im Park", "in the park"), ("auf der Straße", "on the street"), ("am Strand", "on the beach")]


def corpus() -> list[tuple[str, str]]:
    """48 German -> English pairs built from the three lists above."""
    return [
        (f"{subject_de} {verb_de} {place_de}.", f"{subject_en} {verb_en} {place_en}.")
        for (subject_de, subject_en), (verb_de, verb_en), (place_de, place_en) in itertools.product(
            SUBJECTS, VERBS, PLACES
        )
    ]


def write_multi30k(folder: Path, pairs: list[tuple[str, str]]) -> None:
    (folder / "multi30k").mkdir(parents=True)
    for split, chosen in (("train", pairs), ("val", pairs[::24])):
        for side, language in ((0, "de"), (1, "en")):
            (folder / "multi30k" / f"{split}.{language}").write_text(
                "".join(pair[side] + "\n" for pair in chosen), encoding="utf-8"
            )


@pytest.fixture(scope="session")
def translation_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run folder (``best/``, ``last/``, ``metrics.jsonl``) of a 2-layer d_model-32 model."""
    data_dir = tmp_path_factory.mktemp("data")
    write_multi30k(data_dir, corpus())
    config = apply_overrides(
        translation_train.default_config(),
        [
            f"data.data_dir={data_dir}",
            "data.vocab_size=300",
            "data.min_frequency=1",
            "data.max_tokens=160",
            "model.d_model=32",
            "model.nhead=2",
            "model.num_encoder_layers=2",
            "model.num_decoder_layers=2",
            "model.dim_feedforward=64",
            "model.dropout=0.0",
            "model.max_len=64",
            "train.epochs=20",
            "train.cooldown_steps=0",  # the preset's is longer than this run
            "train.warmup_steps=40",
            "train.lr_factor=1.0",
            "train.precision=fp32",
            "train.label_smoothing=0.0",
            "train.keep_last=1",
            "train.progress_bar=false",
            "train.log_every_steps=1000",
            "decode.max_len=24",
            # fp32, not the preset's auto: the tests hold the scores to an fp32 forward pass,
            # and auto is bf16 on a CPU with fast bf16 products.
            "decode.precision=fp32",
        ],
    )
    run = tmp_path_factory.mktemp("runs") / "tiny-translation"
    translation_train.train(config, run)
    return run


def _unused_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def find_unused_port() -> Callable[[], int]:
    """Returns a function giving a loopback TCP port that nothing listens on right now."""
    return _unused_port


@dataclasses.dataclass(frozen=True)
class EchoRequest:
    text: str
    numbers: list[int] = dataclasses.field(metadata={"min_length": 1, "max_length": 4})
    times: int = dataclasses.field(default=2, metadata={"ge": 1, "le": 3, "description": "copies of the text"})
    separator: Literal[" ", " | "] = " "
    shout: bool = False
    scale: float = dataclasses.field(default=1.0, metadata={"ge": 0, "le": 10})


class Echo:
    """The toy task's Python API object: it needs no model."""

    def __init__(self, model: torch.nn.Module, vocabulary: None, config: None, device: torch.device) -> None:
        self.device = device


class EchoHandler:
    def __init__(self, predictor: Echo) -> None:
        self.predictor = predictor

    def describe(self) -> dict[str, Any]:
        return {"device": str(self.predictor.device)}

    def echo(self, request: EchoRequest) -> dict[str, Any]:
        text = request.text.upper() if request.shout else request.text
        return {"echo": request.separator.join([text] * request.times), "total": request.scale * sum(request.numbers)}


def _no_training(config: Any, out_dir: Any, *, resume: bool = False, init_from: Any = None) -> Any:
    raise NotImplementedError("the echo task is only served")


@pytest.fixture(scope="module")
def echo_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A checkpoint folder of the toy task "echo", registered while the module's tests run."""
    folder = tmp_path_factory.mktemp("echo")
    (folder / "config.json").write_text(json.dumps({"task": "echo"}), encoding="utf-8")
    task = Task(
        name="echo",
        presets={"default": lambda: None},
        train=_no_training,
        load=lambda checkpoint: (torch.nn.Identity(), None, None),
        reads_data=False,
        surfaces=frozenset({"serve"}),
        predictor=Echo,
        serving=Serving(EchoHandler, (Endpoint("/api/echo", EchoRequest, EchoHandler.echo),)),
    )
    with registry.registered(task):
        yield folder
