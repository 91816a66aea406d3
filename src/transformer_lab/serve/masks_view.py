"""The masks pane: the lab's four masks for a small batch of sentences typed in.

The sentences form one batch padded to the longest, so the shorter ones show padding.
Tokens are the chosen model's subwords when a model that can tokenize is named, else
whitespace-separated words.
"""

from __future__ import annotations

from typing import Annotated, Any, Callable

from pydantic import BaseModel, Field

from transformer_lab.lab.mask_panels import mask_panels
from transformer_lab.serve.requests import REQUEST_CONFIG, ModelName, Text

MAX_SENTENCES = 4
MAX_TOKENS = 48  # a grid of 48 x 48 cells is the most the page draws legibly
PAD_LABEL = "<pad>"


class MasksRequest(BaseModel):
    model_config = REQUEST_CONFIG

    sentences: Annotated[list[Text], Field(min_length=1, max_length=MAX_SENTENCES)]
    model: ModelName | None = Field(default=None, description="tokenize with this model (None: words)")


def masks_for(request: MasksRequest, tokenize: Callable[[str], list[str]] | None) -> dict[str, Any]:
    """Tokens (padded) and the four bool panels (1 = hidden) of every sentence of the batch."""
    tokenized = [tokenize(sentence) if tokenize is not None else sentence.split() for sentence in request.sentences]
    for index, tokens in enumerate(tokenized):
        if not 1 <= len(tokens) <= MAX_TOKENS:
            # Named as the 422s name a list item (sentences.1), the same field in the same answer format.
            raise ValueError(f"sentences.{index}: expected 1 to {MAX_TOKENS} tokens, got {len(tokens)}")
    length = max(len(tokens) for tokens in tokenized)
    panels = mask_panels([len(tokens) for tokens in tokenized], length)
    return {
        "length": length,
        "tokenizer": "subwords" if tokenize is not None else "words",
        "sentences": [
            {
                "tokens": tokens + [PAD_LABEL] * (length - len(tokens)),
                "real_length": len(tokens),
                "panels": [
                    {"name": panel.name, "title": panel.title, "hidden": panel.hidden.int().tolist()}
                    for panel in sentence_panels
                ],
            }
            for tokens, sentence_panels in zip(tokenized, panels)
        ],
    }
