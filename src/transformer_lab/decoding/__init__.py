"""Greedy and beam search over any model that follows `IncrementalDecoder`.

Both searches are batched, use the model's key/value cache (or, with `use_cache=False`,
re-run the whole prefix, the slow oracle), and accept a `logits_processor` hook that
sees the next-token log-probabilities before each choice. Both return a `DecodeOutput`.
"""

from transformer_lab.decoding.beam import beam_search
from transformer_lab.decoding.config import DecodeConfig, decode, decoding_model
from transformer_lab.decoding.greedy import greedy_search
from transformer_lab.decoding.output import DecodeOutput, Hypothesis, gnmt_length_penalty
from transformer_lab.decoding.protocol import DecoderCache, IncrementalDecoder, LogitsProcessor

__all__ = [
    "DecodeConfig",
    "DecodeOutput",
    "DecoderCache",
    "Hypothesis",
    "IncrementalDecoder",
    "LogitsProcessor",
    "beam_search",
    "decode",
    "decoding_model",
    "gnmt_length_penalty",
    "greedy_search",
]
