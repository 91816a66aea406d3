"""The classification pane: the predicted label of a text and the probability of every class."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict

from transformer_lab.lab.attention_maps import token_labels
from transformer_lab.serve.requests import ModelName, Text
from transformer_lab.tasks.classification.predict import predict
from transformer_lab.tasks.classification.train import TASK_NAME, load_classifier

TASK = TASK_NAME


class ClassifyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: ModelName
    text: Text


class ClassificationHandler:
    """A classification checkpoint loaded once: its model, tokenizer and class names."""

    task = TASK

    def __init__(self, checkpoint: Path, device: torch.device) -> None:
        model, self.tokenizer, self.config = load_classifier(checkpoint)
        self.model = model.to(device)

    def describe(self) -> dict[str, Any]:
        return {
            "layers": self.config.model.num_layers,
            "heads": self.config.model.nhead,
            "labels": list(self.config.class_names),
        }

    def tokenize(self, text: str) -> list[str]:
        """The subword tokens the model reads for ``text`` (for the masks view)."""
        return token_labels(self.tokenizer, self.tokenizer.encode(text))

    def classify(self, request: ClassifyRequest) -> dict[str, Any]:
        """The label and every class's probability, in the order of the class names."""
        (prediction,) = predict(self.model, self.tokenizer, self.config.class_names, [request.text])
        return {
            "label": prediction.label_name,
            "classes": [
                {"label": name, "probability": probability} for name, probability in prediction.probabilities.items()
            ],
            "num_tokens": prediction.num_tokens,
        }


def load(checkpoint: Path, device: torch.device) -> ClassificationHandler:
    return ClassificationHandler(checkpoint, device)


ENDPOINTS = (("/api/classify", ClassifyRequest, ClassificationHandler.classify),)
