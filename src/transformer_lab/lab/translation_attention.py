"""A heat map of one translated sentence's cross-attention (weights: ``tasks.translation.predict.cross_attention``)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from transformer_lab.data import SubwordTokenizer, TokenizerPair
from transformer_lab.decoding import DecodeConfig
from transformer_lab.lab.figures import plot_attention_heatmap
from transformer_lab.lab.plotting import check_image_path
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.tasks.attention_maps import token_labels
from transformer_lab.tasks.translation.predict import cross_attention, translate_nbest


def plot_translation_attention(
    model: Seq2SeqTransformer,
    tokenizer: SubwordTokenizer | TokenizerPair,
    sentence: str,
    decode_config: DecodeConfig,
    path: str | os.PathLike[str],
) -> Path:
    """Translate ``sentence``, then draw the last decoder layer's cross-attention (mean of heads).

    The rows are the ids the model generated (not the translation encoded again, which
    can split differently).
    """
    if not sentence.strip():
        raise ValueError("sentence: expected a non-empty sentence to plot, got an empty one")
    check_image_path(path)  # before the translation, not after it
    tokenizers = TokenizerPair.of(tokenizer)
    best = translate_nbest(model, tokenizers, sentence, dataclasses.replace(decode_config, num_return=1))[0]
    source_ids = tokenizers.source.encode(sentence)
    target_ids = best.ids
    layers = cross_attention(model, source_ids, target_ids)  # [N, H, T, S]
    weights = layers[-1].mean(dim=0)  # [T, S]
    return plot_attention_heatmap(
        weights,
        token_labels(tokenizers.source, source_ids),
        ["<bos>", *token_labels(tokenizers.target, target_ids)],
        path,
        title=f"cross-attention, decoder layer {len(layers) - 1} (mean of heads)",
    )
