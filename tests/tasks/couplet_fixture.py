"""A small made-up couplet corpus in the wb14123 form, and the overrides of a model that trains in seconds.

Each upper character has its own answer, disjoint from the upper characters, so a working
model learns the mapping; a third of the lines carry a '，' that the answer must keep.
"""

from __future__ import annotations

import random
from pathlib import Path

UPPER_CHARACTERS = "春风花月山水云天江河"
ANSWER = dict(zip(UPPER_CHARACTERS, "秋雨草星海林雾地湖溪"))

TINY_OVERRIDES = [
    "train.cooldown_steps=0",  # the preset's cool-down is longer than these 150-step runs
    "data.num_validation=10",
    "data.max_tokens=256",
    "model.d_model=32",
    "model.nhead=2",
    "model.num_encoder_layers=1",
    "model.num_decoder_layers=1",
    "model.dim_feedforward=64",
    "train.max_steps=150",
    "train.epochs=0",
    "train.warmup_steps=30",
    "train.lr_factor=0.3",
    "train.log_every_steps=5",
    "train.progress_bar=false",
    "decode.beam_size=3",
]


def set_arguments(overrides: list[str]) -> list[str]:
    """``--set`` arguments for the command line: ["--set", "a=1", "--set", "b=2", ...]."""
    return [argument for override in overrides for argument in ("--set", override)]


TINY = set_arguments(TINY_OVERRIDES)


def made_up_couplets(count: int, seed: int) -> list[tuple[str, str]]:
    generator = random.Random(seed)
    pairs = []
    for _ in range(count):
        upper = "".join(generator.choice(UPPER_CHARACTERS) for _ in range(generator.randint(3, 7)))
        if generator.random() < 0.3:
            upper = upper[:2] + "，" + upper[2:]
        pairs.append((upper, "".join(ANSWER.get(character, character) for character in upper)))
    return pairs


def write_split(folder: Path, pairs: list[tuple[str, str]], newline: str = "\n") -> Path:
    """Write ``in.txt`` / ``out.txt`` as the release does: characters separated by spaces, a trailing space."""
    folder.mkdir(parents=True)
    for name, side in (("in.txt", 0), ("out.txt", 1)):
        text = "".join(" ".join(pair[side]) + " " + newline for pair in pairs)
        (folder / name).write_bytes(text.encode("utf-8"))
    return folder


def write_couplet_folder(root: Path, num_train: int = 400, num_test: int = 30) -> Path:
    """Write ``root/couplet/{train_couplet_machine,test}/``; return ``root``."""
    write_split(root / "couplet" / "train_couplet_machine", made_up_couplets(num_train, seed=1))
    write_split(root / "couplet" / "test", made_up_couplets(num_test, seed=2))
    return root
