"""A tiny translation run, trained here by the project's own code on a made-up corpus.

The corpus is written as a Multi30k folder (``multi30k/train.de`` ...) so that
``translation.train`` runs exactly as on the real data: BPE on the training split, the
Trainer, validation BLEU, ``best/`` and ``last/`` checkpoints with the tokenizer inside.
"""

from __future__ import annotations

import itertools
import socket
from pathlib import Path
from typing import Callable

import pytest

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
