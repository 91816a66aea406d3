"""``transformer_lab.nn``: the Transformer's modules, a from-scratch twin of ``torch.nn``'s.

A ``state_dict`` saved from ``torch.nn.Transformer`` (or any of its parts) loads into the
class of the same name here and gives the same outputs (in training, up to the dropout
masks, which :mod:`transformer_lab.nn.dropout` draws more cheaply). On top of the twin:
incremental decoding with a key/value cache (:class:`DecoderCache`) and the explicit,
traceable attention path.
"""

from transformer_lab.nn.attention import MultiheadAttention, set_attention_path
from transformer_lab.nn.cache import AttentionCache, DecoderCache, DecoderLayerCache
from transformer_lab.nn.decoder import TransformerDecoder, TransformerDecoderLayer
from transformer_lab.nn.dropout import Dropout, dropout
from transformer_lab.nn.encoder import TransformerEncoder, TransformerEncoderLayer
from transformer_lab.nn.masks import causal_mask, lengths_to_padding_mask, padding_mask
from transformer_lab.nn.transformer import Transformer

__all__ = [
    "MultiheadAttention",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerDecoder",
    "Transformer",
    "Dropout",
    "dropout",
    "AttentionCache",
    "DecoderLayerCache",
    "DecoderCache",
    "causal_mask",
    "padding_mask",
    "lengths_to_padding_mask",
    "set_attention_path",
]
