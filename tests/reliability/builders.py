"""Small real artefacts the reliability tests break on purpose: checkpoints of each task, data files.

Nothing here is a stub: the translation checkpoint is what ``translation.train`` writes
(config.json with the task, model.safetensors, tokenizer.json), only with random weights
and a tokenizer trained on a few sentences, so that building it takes well under a second.
The classification and couplet checkpoints are trained by their task's ``train`` on the
made-up corpora of ``tests/tasks`` (news_fixture.py, couplet_fixture.py) for a moment
(about 2 s together on one thread).
"""

from __future__ import annotations

from pathlib import Path

import torch

from tests.tasks.couplet_fixture import TINY_OVERRIDES as COUPLET_OVERRIDES
from tests.tasks.couplet_fixture import write_couplet_folder
from tests.tasks.news_fixture import tiny_overrides, write_news_folder
from transformer_lab.data import SubwordTokenizer
from transformer_lab.data.tokenizer_pair import JOINT_TOKENIZER_FILE
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.tasks import seq2seq
from transformer_lab.tasks.classification import train as classification_train
from transformer_lab.tasks.couplet import train as couplet_train
from transformer_lab.tasks.translation import train as translation_train
from transformer_lab.training import apply_overrides, config_to_dict, save_checkpoint

SENTENCES = [
    ("Ein Mann fährt Fahrrad.", "A man rides a bike."),
    ("Zwei Hunde spielen im Schnee.", "Two dogs play in the snow."),
    ("Eine Frau liest ein Buch.", "A woman reads a book."),
    ("Kinder laufen über die Wiese.", "Children run across the meadow."),
]

TINY_MODEL = [
    "model.d_model=16",
    "model.nhead=2",
    "model.num_encoder_layers=1",
    "model.num_decoder_layers=1",
    "model.dim_feedforward=32",
    "model.dropout=0.0",
    "decode.max_len=8",
    "decode.beam_size=2",
]


def tiny_tokenizer() -> SubwordTokenizer:
    return SubwordTokenizer.train_from_pairs(SENTENCES, vocab_size=300, min_frequency=1)


def write_translation_checkpoint(
    folder: Path, overrides: list[str] | None = None, seed: int = 0, favoured: str | None = None
) -> Path:
    """A translation checkpoint folder as ``translation.train`` writes it, with random weights.

    ``favoured``: a text of one token that the generator's bias makes the model write at every step.
    """
    tokenizer = tiny_tokenizer()
    config = apply_overrides(translation_train.default_config(), [*TINY_MODEL, *(overrides or [])])
    config = seq2seq.with_vocabulary(config, tokenizer.vocab_size)
    torch.manual_seed(seed)
    model = Seq2SeqTransformer.from_config(config.model)
    if favoured is not None:
        (token,) = tokenizer.encode(favoured)
        with torch.no_grad():
            model.generator.bias[token] = 1000.0
    return save_checkpoint(
        folder,
        model,
        {"task": translation_train.TASK_NAME, **config_to_dict(config)},
        extra_files={JOINT_TOKENIZER_FILE: tokenizer.to_json()},
    )


def write_multi30k_split(folder: Path, split: str, german: list[str], english: list[str], newline: str = "\n") -> Path:
    """Write ``<split>.de`` / ``<split>.en`` into ``folder`` (a stand-in Multi30k folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    for language, lines in (("de", german), ("en", english)):
        (folder / f"{split}.{language}").write_bytes("".join(line + newline for line in lines).encode("utf-8"))
    return folder


def train_classification_checkpoint(root: Path) -> Path:
    """One epoch of ``classification.train`` on 40 made-up articles; returns the run's ``last/``.

    The run's data folder is ``root/data`` (``ag_news/train.csv``, ``test.csv``, ``classes.txt``).
    """
    data_dir = write_news_folder(root / "data", train_per_class=10, test_per_class=2)
    overrides = [*tiny_overrides(data_dir, epochs=1), "data.validation_fraction=0.25"]
    classification_train.train(apply_overrides(classification_train.default_config(), overrides), root / "run")
    return root / "run" / "last"


def train_couplet_checkpoint(root: Path) -> Path:
    """Two steps of ``couplet.train`` on 60 made-up couplets; returns the run's ``last/``.

    The run's data folder, recorded in its config, is ``root/data``
    (``couplet/train_couplet_machine/``, ``couplet/test/``).
    """
    data_dir = write_couplet_folder(root / "data", num_train=60, num_test=5)
    overrides = [f"data.data_dir={data_dir}", *COUPLET_OVERRIDES, "train.max_steps=2", "data.num_validation=4"]
    couplet_train.train(apply_overrides(couplet_train.default_config(), overrides), root / "run")
    return root / "run" / "last"
