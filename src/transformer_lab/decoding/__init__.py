"""Greedy and beam search over any model that follows `IncrementalDecoder`.

Both searches are batched, use the model's key/value cache (or, with `use_cache=False`,
re-run the whole prefix, the slow oracle), and accept a `logits_processor` hook that
sees the next-token log-probabilities before each choice.
"""

from transformer_lab.decoding.beam import BeamOutput, Hypothesis, beam_search, gnmt_length_penalty
from transformer_lab.decoding.config import DecodeConfig, decode
from transformer_lab.decoding.greedy import GreedyOutput, greedy_search
from transformer_lab.decoding.protocol import DecoderCache, IncrementalDecoder, LogitsProcessor

__all__ = [
    "BeamOutput",
    "DecodeConfig",
    "DecoderCache",
    "GreedyOutput",
    "Hypothesis",
    "IncrementalDecoder",
    "LogitsProcessor",
    "beam_search",
    "decode",
    "gnmt_length_penalty",
    "greedy_search",
]
