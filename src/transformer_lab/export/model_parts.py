"""The typed parts of a model that the exporters read, or a clear error when a part is foreign.

``nn.Transformer`` (and ours, which mirrors it) types its stacks as any module, so that a
``custom_encoder`` / ``custom_decoder`` fits; an exporter writes out only what ours
build, layer by layer, and refuses anything else by name before it writes a file.
"""

from __future__ import annotations

from typing import TypeVar

from torch import nn

from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.nn import TransformerDecoder, TransformerEncoder

LayerType = TypeVar("LayerType", bound=nn.Module)


def seq2seq_stacks(model: Seq2SeqTransformer) -> tuple[TransformerEncoder, TransformerDecoder]:
    """``model.transformer``'s encoder and decoder stacks, or a ValueError if either is of another kind."""
    encoder, decoder = model.transformer.encoder, model.transformer.decoder
    if not isinstance(encoder, TransformerEncoder):
        raise ValueError(
            f"model: expected transformer.encoder to be a transformer_lab.nn.TransformerEncoder, "
            f"got {type(encoder).__name__}"
        )
    if not isinstance(decoder, TransformerDecoder):
        raise ValueError(
            f"model: expected transformer.decoder to be a transformer_lab.nn.TransformerDecoder, "
            f"got {type(decoder).__name__}"
        )
    return encoder, decoder


def typed_layers(stack: TransformerEncoder | TransformerDecoder, kind: type[LayerType], name: str) -> list[LayerType]:
    """``stack.layers`` as a list of ``kind``, or a ValueError naming the first layer of another kind."""
    layers: list[LayerType] = []
    for index, layer in enumerate(stack.layers):
        if not isinstance(layer, kind):
            raise ValueError(f"model: {name}.layers[{index}]: expected a {kind.__name__}, got {type(layer).__name__}")
        layers.append(layer)
    return layers
