"""A small AG-News-format data folder made up here: four topics, each with its own words.

The rows use the release's serialisation (every field quoted, backslash line breaks,
doubled quotes), so training on it exercises the reader too; the topics are separable
from the words alone, so a working model must beat chance (25 %) clearly.
"""

from __future__ import annotations

import random
from pathlib import Path

TOPIC_WORDS = (
    ("minister", "election", "treaty", "embassy", "parliament", "rebels", "summit", "ceasefire"),
    ("match", "goal", "coach", "league", "striker", "tournament", "season", "championship"),
    ("shares", "profit", "investors", "quarterly", "merger", "earnings", "stocks", "revenue"),
    ("software", "internet", "processor", "researchers", "satellite", "browser", "genome", "wireless"),
)
FILLER_WORDS = ("the", "a", "on", "after", "new", "said", "monday", "report", "officials", "week", "more", "year")


def _row(label: int, generator: random.Random) -> str:
    def words(topic: int, filler: int) -> list[str]:
        chosen = generator.sample(TOPIC_WORDS[label], topic) + generator.sample(FILLER_WORDS, filler)
        generator.shuffle(chosen)
        return chosen

    title = " ".join(words(2, 1)).capitalize()
    description = " ".join(words(3, 3)) + '\\"quoted", \\$5 ' + " ".join(words(1, 2))
    return f'"{label + 1}","{title}","{description.replace(chr(34), chr(34) * 2)}"\n'


def write_news_folder(root: Path, train_per_class: int = 60, test_per_class: int = 20, seed: int = 0) -> Path:
    """Write ``root/ag_news/{train.csv,test.csv,classes.txt}``; return ``root``."""
    generator = random.Random(seed)
    folder = root / "ag_news"
    folder.mkdir(parents=True, exist_ok=True)
    for name, per_class in (("train.csv", train_per_class), ("test.csv", test_per_class)):
        rows = [_row(label, generator) for label in range(4) for _ in range(per_class)]
        generator.shuffle(rows)
        (folder / name).write_text("".join(rows), encoding="utf-8")
    (folder / "classes.txt").write_text("World\nSports\nBusiness\nSci/Tech\n", encoding="utf-8")
    return root


def tiny_overrides(data_dir: Path, epochs: int = 4) -> list[str]:
    """Config overrides for a model that trains in a couple of seconds."""
    return [
        f"data.data_dir={data_dir}",
        "data.vocab_size=300",
        "data.max_tokens=512",
        "data.validation_fraction=0.2",
        "model.d_model=32",
        "model.nhead=2",
        "model.num_layers=1",
        "model.dim_feedforward=64",
        "model.dropout=0.1",
        "model.max_len=128",
        f"train.epochs={epochs}",
        "train.warmup_steps=10",
        "train.lr_factor=2.0",
        "train.progress_bar=false",
    ]
