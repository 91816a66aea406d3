"""The Python API: a checkpoint as an object that translates, classifies or writes couplets.

    from transformer_lab import Translator
    Translator("runs/de-en").translate(["Ein Hund läuft.", "Zwei Männer."], beam=5)

Each object is its task's predictor (``tasks.translation.predict.Translator``, ...) opened from a
checkpoint folder or a run folder (its best/) on ``device=`` (default "cpu"); README.md ("From
Python") shows every call. A setting out of range is a `SettingError`, a ValueError naming the keyword.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import torch

from transformer_lab.decoding.search_settings import decode_settings
from transformer_lab.decoding.sources import Candidate
from transformer_lab.devices import load_on
from transformer_lab.setting_error import SettingError
from transformer_lab.tasks.classification import predict as classification_predict
from transformer_lab.tasks.classification.predict import Prediction
from transformer_lab.tasks.classification.train import load_classifier
from transformer_lab.tasks.couplet import predict as couplet_predict
from transformer_lab.tasks.couplet import train as couplet_train
from transformer_lab.tasks.couplet.predict import CoupletResult
from transformer_lab.tasks.translation import predict as translation_predict
from transformer_lab.tasks.translation.train import load_translator


class Translator(translation_predict.Translator):
    """A translation checkpoint, ready to translate (see the module docstring)."""

    def __init__(
        self,
        checkpoint: str | os.PathLike[str],
        device: str | torch.device = "cpu",
        *,
        ensemble: Sequence[str | os.PathLike[str]] = (),
    ) -> None:
        """``ensemble``: more checkpoints (or run folders) decoded with this one, their probabilities averaged."""
        super().__init__(*load_on(load_translator, checkpoint, device))
        if ensemble not in ((), [], None):  # "" too is checked (and refused), not read as no ensemble
            self.model = self.ensembled(ensemble).model

    def plot_attention(
        self,
        sentence: str,
        path: str | os.PathLike[str],
        *,
        beam: int | None = None,
        precision: str | None = None,
        length_penalty: float | None = None,
        beam_stop: str | None = None,
    ) -> Path:
        """Translate ``sentence`` and draw its last decoder layer's cross-attention (mean of heads) to ``path``.

        Returns the image file written (matplotlib picks the format from the suffix). The
        rows are the ids the model generated with these settings; a blank sentence is a
        ValueError. Here, not in the task: drawing belongs to the lab, a layer above the tasks.
        """
        from transformer_lab.lab.figures import plot_attention_map

        settings = {"beam": beam, "precision": precision, "length_penalty": length_penalty, "beam_stop": beam_stop}
        return plot_attention_map(self, sentence, path, **settings)


class Classifier(classification_predict.Classifier):
    """A classification checkpoint, ready to classify (see the module docstring)."""

    def __init__(self, checkpoint: str | os.PathLike[str], device: str | torch.device = "cpu") -> None:
        super().__init__(*load_on(load_classifier, checkpoint, device))


class CoupletWriter(couplet_predict.CoupletWriter):
    """A couplet checkpoint (对联), ready to answer upper lines with lower lines (see the module docstring)."""

    def __init__(self, checkpoint: str | os.PathLike[str], device: str | torch.device = "cpu") -> None:
        super().__init__(*load_on(couplet_train.load, checkpoint, device))


__all__ = [
    "Candidate",
    "Classifier",
    "CoupletResult",
    "CoupletWriter",
    "Prediction",
    "SettingError",
    "Translator",
    "decode_settings",
]
