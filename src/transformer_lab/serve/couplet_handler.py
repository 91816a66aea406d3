"""The couplet pane: an upper line in, several lower lines out, with scores and the form checks."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field

from transformer_lab.data.chinese import is_punctuation
from transformer_lab.data.couplet import split_characters
from transformer_lab.decoding import decoding_model
from transformer_lab.nn import TransformerDecoder
from transformer_lab.serve.requests import ModelName, Text
from transformer_lab.tasks.couplet import predict as couplet_predict
from transformer_lab.tasks.couplet import train as couplet_train

TASK = couplet_train.TASK_NAME
MAX_LOWER_LINES = 8


class CoupletRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: ModelName
    text: Text
    count: int = Field(
        default=5, ge=1, le=MAX_LOWER_LINES, description="how many lower lines (the beam is at least this wide)"
    )


class CoupletHandler:
    """A couplet checkpoint loaded once: its model, character vocabulary and constraints."""

    task = TASK

    def __init__(self, checkpoint: Path, device: torch.device) -> None:
        model, self.vocabulary, self.config = couplet_train.load(checkpoint)
        model = model.to(device)  # first: the precision below resolves on the device it runs on
        # Its bf16 copy where the checkpoint's decoding precision resolves to bf16, made once here.
        self.model = decoding_model(model, self.config.decode.precision)

    def describe(self) -> dict[str, Any]:
        decoder = self.model.transformer.decoder
        assert isinstance(decoder, TransformerDecoder), type(decoder)  # Seq2SeqTransformer builds its own stacks
        return {
            "layers": len(decoder.layers),
            "heads": self.config.model.nhead,
            "punctuation": self.config.constraints.punctuation_mode,
            "max_count": MAX_LOWER_LINES,
        }

    def tokenize(self, text: str) -> list[str]:
        """One token per character, as the model reads an upper line (for the masks view)."""
        return list(split_characters(text))

    def write(self, request: CoupletRequest) -> dict[str, Any]:
        """The lower lines best first; each says whether its length and punctuation match the upper line."""
        decode_config = dataclasses.replace(
            self.config.decode, strategy="beam", beam_size=max(request.count, self.config.decode.beam_size)
        )
        (result,) = couplet_predict.generate(
            self.model,
            self.vocabulary,
            [request.text],
            decode_config,
            self.config.constraints,
            num_candidates=request.count,
        )
        if result.error is not None:
            raise ValueError(f"text: {result.error}")
        marks = [is_punctuation(character) for character in result.upper]
        return {
            "upper": result.upper,
            "note": result.note,
            "candidates": [
                {
                    "text": candidate.text,
                    "score": candidate.score,
                    "length_matches": len(candidate.text) == len(result.upper),
                    "punctuation_matches": [is_punctuation(character) for character in candidate.text] == marks,
                }
                for candidate in result.candidates
            ],
        }


def load(checkpoint: Path, device: torch.device) -> CoupletHandler:
    return CoupletHandler(checkpoint, device)


ENDPOINTS = (("/api/couplet", CoupletRequest, CoupletHandler.write),)
