"""Small real artefacts the reliability tests break on purpose: a translation checkpoint, data files.

Nothing here is a stub: the checkpoint is what ``translation.train`` writes (config.json
with the task, model.safetensors, tokenizer.json), only with random weights and a
tokenizer trained on a few sentences, so that building it takes well under a second.
"""

from __future__ import annotations

from pathlib import Path

import torch

from transformer_lab.data import SubwordTokenizer
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.tasks import translation
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


def write_translation_checkpoint(folder: Path, overrides: list[str] | None = None, seed: int = 0) -> Path:
    """A translation checkpoint folder as ``translation.train`` writes it, with random weights."""
    tokenizer = tiny_tokenizer()
    config = apply_overrides(translation.default_config(), [*TINY_MODEL, *(overrides or [])])
    config = translation.with_vocabulary(config, tokenizer)
    torch.manual_seed(seed)
    model = Seq2SeqTransformer.from_config(config.model)
    return save_checkpoint(
        folder,
        model,
        {"task": translation.TASK_NAME, **config_to_dict(config)},
        extra_files={translation.TOKENIZER_FILE: tokenizer.to_json()},
    )


def write_multi30k_split(folder: Path, split: str, german: list[str], english: list[str], newline: str = "\n") -> Path:
    """Write ``<split>.de`` / ``<split>.en`` into ``folder`` (a stand-in Multi30k folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    for language, lines in (("de", german), ("en", english)):
        (folder / f"{split}.{language}").write_bytes("".join(line + newline for line in lines).encode("utf-8"))
    return folder
