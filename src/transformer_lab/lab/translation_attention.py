"""A cross-attention heat map of one translated sentence."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import torch

from transformer_lab.data import BOS_ID, SubwordTokenizer
from transformer_lab.decoding import DecodeConfig
from transformer_lab.lab.attention_maps import attention_maps
from transformer_lab.lab.figures import plot_attention_heatmap
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.tasks.translation import translate_sentences


def plot_translation_attention(
    model: Seq2SeqTransformer,
    tokenizer: SubwordTokenizer,
    sentence: str,
    decode_config: DecodeConfig,
    path: str | os.PathLike[str],
) -> Path:
    """Translate ``sentence``, then draw the last decoder layer's cross-attention (mean of heads)."""
    if not sentence.strip():
        raise ValueError("sentence: expected a non-empty sentence to plot, got an empty one")
    translated = translate_sentences(model, tokenizer, [sentence], dataclasses.replace(decode_config, num_return=1))[0]
    source_ids = tokenizer.encode(sentence)
    target_ids = tokenizer.encode(translated)
    maps = attention_maps(model, torch.tensor([source_ids]), torch.tensor([[BOS_ID, *target_ids]]))
    last_layer = len(model.transformer.decoder.layers) - 1
    weights = maps[f"decoder.layers.{last_layer}.multihead_attn"][0].mean(dim=0)  # [T, S]

    def labels(ids: list[int]) -> list[str]:
        return [tokenizer.decode([token_id]).strip() or tokenizer.id_to_token(token_id) for token_id in ids]

    return plot_attention_heatmap(
        weights, labels(source_ids), ["<bos>", *labels(target_ids)], path,
        title=f"cross-attention, decoder layer {last_layer} (mean of heads)",
    )
