"""The cross-attention of one translated sentence: every layer and head, and a heat map of it.

Shape legend: N decoder layers, H heads, T target length (``<bos>`` first), S source length.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Sequence

import torch
from torch import Tensor

from transformer_lab.data import BOS_ID, SubwordTokenizer, TokenizerPair
from transformer_lab.decoding import DecodeConfig
from transformer_lab.lab.attention_maps import attention_maps, token_labels
from transformer_lab.lab.figures import plot_attention_heatmap
from transformer_lab.lab.plotting import check_image_path
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.nn import TransformerDecoder
from transformer_lab.tasks.translation.predict import translate_nbest


def cross_attention(model: Seq2SeqTransformer, source_ids: Sequence[int], target_ids: Sequence[int]) -> Tensor:
    """The decoder's cross-attention weights while it reads ``source_ids`` and writes ``target_ids``.

    The decoder is teacher-forced with ``<bos>`` followed by ``target_ids``, so row ``t``
    is what the model looked at when it chose target token ``t`` (row 0: the first token).

    Shape:
        returns ``[N, H, T, S]`` on the model's device, with T = ``len(target_ids) + 1`` and S = ``len(source_ids)``.
    """
    if len(source_ids) == 0:
        raise ValueError("source_ids: expected at least one token id, got none")
    device = next(model.parameters()).device  # the ids go where the model is (a GPU's, when served there)
    src_ids = torch.tensor([list(source_ids)], device=device)  # [1, S]
    tgt_in_ids = torch.tensor([[BOS_ID, *target_ids]], device=device)  # [1, T]
    maps = attention_maps(model, src_ids, tgt_in_ids)
    layers = _decoder_layers(model)
    return torch.stack([maps[f"decoder.layers.{layer}.multihead_attn"][0] for layer in range(layers)])  # [N, H, T, S]


def _decoder_layers(model: Seq2SeqTransformer) -> int:
    decoder = model.transformer.decoder
    assert isinstance(decoder, TransformerDecoder), type(decoder)  # Seq2SeqTransformer builds its own stacks
    return len(decoder.layers)


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
    weights = cross_attention(model, source_ids, target_ids)[-1].mean(dim=0)  # [T, S]
    last_layer = _decoder_layers(model) - 1
    return plot_attention_heatmap(
        weights,
        token_labels(tokenizers.source, source_ids),
        ["<bos>", *token_labels(tokenizers.target, target_ids)],
        path,
        title=f"cross-attention, decoder layer {last_layer} (mean of heads)",
    )
