"""The translation pane: the n-best translations of a sentence and their cross-attention.

Shape legend: N decoder layers, H heads, T target length, S source length.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal, Sequence

import torch
from pydantic import BaseModel, ConfigDict, Field

from transformer_lab.decoding import decoding_model
from transformer_lab.lab.attention_maps import token_labels
from transformer_lab.lab.translation_attention import cross_attention
from transformer_lab.nn import TransformerDecoder
from transformer_lab.serve.requests import ModelName, Text
from transformer_lab.tasks.translation import predict as translation_predict
from transformer_lab.tasks.translation import train as translation_train

TASK = translation_train.TASK_NAME
MAX_BEAM_SIZE = 8  # the n-best list the page shows; larger beams add time, not insight
WEIGHT_DECIMALS = 4  # attention weights sent to the page (a heat-map needs no more)


class TranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: ModelName
    text: Text
    strategy: Literal["greedy", "beam"] = "beam"
    beam_size: int = Field(default=5, ge=1, le=MAX_BEAM_SIZE, description="also the length of the n-best list")


class AttentionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: ModelName
    text: Text
    target_ids: list[int] = Field(max_length=1024, description="a candidate's ids, as /api/translate gave them")


class TranslationHandler:
    """A translation checkpoint loaded once: its model, tokenizers (source and target) and decoding defaults."""

    task = TASK

    def __init__(self, checkpoint: Path, device: torch.device) -> None:
        model, self.tokenizer, self.config = translation_train.load_translator(checkpoint)
        model = model.to(device)  # first: the precision below resolves on the device it runs on
        # Its bf16 copy where the checkpoint's decoding precision resolves to bf16, made once here.
        self.model = decoding_model(model, self.config.decode.precision)

    def describe(self) -> dict[str, Any]:
        decoder = self.model.transformer.decoder
        assert isinstance(decoder, TransformerDecoder), type(decoder)  # Seq2SeqTransformer builds its own stacks
        return {
            "layers": len(decoder.layers),
            "heads": self.config.model.nhead,
            "strategy": self.config.decode.strategy,
            "beam_size": min(self.config.decode.beam_size, MAX_BEAM_SIZE),
            "max_beam_size": MAX_BEAM_SIZE,
        }

    def tokenize(self, text: str) -> list[str]:
        """The subword tokens the model reads for ``text`` (for the masks view)."""
        return token_labels(self.tokenizer.source, self.tokenizer.source.encode(text))

    def translate(self, request: TranslateRequest) -> dict[str, Any]:
        """The n-best list (one line for greedy) and the best candidate's cross-attention."""
        beam = request.strategy == "beam"
        decode_config = dataclasses.replace(
            self.config.decode,
            strategy=request.strategy,
            beam_size=request.beam_size if beam else 1,
            num_return=request.beam_size if beam else 1,
        )
        candidates = translation_predict.translate_nbest(self.model, self.tokenizer, request.text, decode_config)
        return {
            "candidates": [
                {
                    "text": candidate.text,
                    "ids": candidate.ids,
                    "tokens": token_labels(self.tokenizer.target, candidate.ids),
                    "score": candidate.score,
                    "log_prob": candidate.log_prob,
                }
                for candidate in candidates
            ],
            "attention": self._attention(request.text, candidates[0].ids),
        }

    def attention(self, request: AttentionRequest) -> dict[str, Any]:
        """The cross-attention of any output (e.g. the n-best line the user picked)."""
        vocab_size = self.tokenizer.target.vocab_size
        outside = [token_id for token_id in request.target_ids if not 0 <= token_id < vocab_size]
        if outside:
            raise ValueError(f"target_ids: expected ids in [0, {vocab_size}), got {outside[:5]}")
        return self._attention(request.text, request.target_ids)

    def _attention(self, text: str, target_ids: Sequence[int]) -> dict[str, Any]:
        source_ids = self.tokenizer.source.encode(text)
        limit = self.model.max_len
        for name, length in (("text", len(source_ids)), ("target_ids", len(target_ids) + 1)):
            if length > limit:
                raise ValueError(f"{name}: expected at most {limit} tokens (the model's max_len), got {length}")
        weights = cross_attention(self.model, source_ids, target_ids)  # [N, H, T, S]
        return {
            "source_tokens": token_labels(self.tokenizer.source, source_ids),
            # Row t is the query that chose output token t; the last row chose <eos>.
            "target_tokens": [*token_labels(self.tokenizer.target, target_ids), "<eos>"],
            "weights": weights.float().round(decimals=WEIGHT_DECIMALS).tolist(),
        }


def load(checkpoint: Path, device: torch.device) -> TranslationHandler:
    return TranslationHandler(checkpoint, device)


ENDPOINTS = (
    ("/api/translate", TranslateRequest, TranslationHandler.translate),
    ("/api/translation/attention", AttentionRequest, TranslationHandler.attention),
)
