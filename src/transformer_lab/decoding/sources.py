"""Decoding many encoded sources: length-sorted batches in, :class:`Candidate` lists out, in input order.

What every sequence-to-sequence predictor (translation, couplets, the synthetic tasks) runs
between its own encoding of the texts and its own reading of the ids.

Shape legend: B batch, S source length.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Sequence, Union

import torch
from torch import Tensor

from transformer_lab.data import EOS_ID, PAD_ID
from transformer_lab.data._checks import is_integer
from transformer_lab.decoding.config import DecodeConfig, decode, decoding_model
from transformer_lab.decoding.ensemble import Ensemble
from transformer_lab.decoding.output import Hypothesis
from transformer_lab.decoding.protocol import LogitsProcessor
from transformer_lab.hardware import resolve_inference_precision
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.nn.eval_mode import eval_mode

# What decodes a batch of sources: one model, or several decoded as one.
DecodedModel = Union[Seq2SeqTransformer, Ensemble]


@dataclass(frozen=True)
class Candidate:
    """One output of an n-best list.

    ``ids`` are the generated ids without ``<bos>``/``<eos>``; ``log_prob`` is the sum of
    the token log-probabilities (``<eos>`` and any constraint's penalty included) and
    ``score`` that sum divided by the GNMT length penalty, the number beam search ranks
    by (greedy reports it too). ``cut``: the search stopped it at its length limit rather
    than at an eos, so it may not be whole.
    """

    text: str
    ids: list[int]
    score: float
    log_prob: float
    cut: bool = False


def decode_sources(
    model: DecodedModel,
    encoded: Sequence[Sequence[int]],
    decode_config: DecodeConfig,
    *,
    logits_processor: LogitsProcessor | None = None,
    batch_size: int = 64,
) -> list[list[Hypothesis]]:
    """The hypotheses (best first) of every encoded source, in input order; an empty source gets none.

    Sources are decoded in batches of ``batch_size`` sorted by length, so that little of
    a batch is padding; the searches stop at the positional table themselves. ``model`` runs in
    eval mode and is left in the mode it came in.
    """
    batch_size = check_batch_size(batch_size)
    with eval_mode(model):
        return _decoded(model, encoded, decode_config, logits_processor, batch_size)


def _decoded(
    model: DecodedModel,
    encoded: Sequence[Sequence[int]],
    decode_config: DecodeConfig,
    logits_processor: LogitsProcessor | None,
    batch_size: int,
) -> list[list[Hypothesis]]:
    """`decode_sources`' search, ``model`` already in eval mode."""
    device = next(model.parameters()).device
    # One resolution of "auto" for every batch; the bf16 or int8 copy is made once, not once per batch.
    precision = resolve_inference_precision(None, decode_config.precision, device)
    decode_config = dataclasses.replace(decode_config, precision=precision)
    model = decoding_model(model, precision)
    found: list[list[Hypothesis]] = [[] for _ in encoded]
    order = sorted((index for index, ids in enumerate(encoded) if ids), key=lambda index: len(encoded[index]))
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            longest = max(len(encoded[index]) for index in chunk)
            src_ids = torch.full((len(chunk), longest), PAD_ID, dtype=torch.long)  # [B, S]
            for row, index in enumerate(chunk):
                src_ids[row, : len(encoded[index])] = torch.tensor(list(encoded[index]), dtype=torch.long)
            output = decode(model, src_ids.to(device), decode_config, logits_processor=logits_processor)
            for row, index in enumerate(chunk):
                found[index] = output.hypotheses[row]
    return found


def check_batch_size(batch_size: object) -> int:
    """``batch_size`` as a Python int (a NumPy integer too); a ValueError naming it unless >= 1 (a bool is no size)."""
    if not is_integer(batch_size) or batch_size < 1:
        # range() with a negative step is empty: every source would silently get no hypothesis.
        raise ValueError(f"batch_size: expected an int >= 1, got {batch_size!r}")
    return int(batch_size)


def candidates_of(
    hypotheses: Sequence[Hypothesis], to_text: Callable[[list[int]], str], limit: int | None = None
) -> list[Candidate]:
    """The :class:`Candidate` of each hypothesis, its ids without eos or padding, its text from ``to_text``.

    ``limit``: the most new tokens the search allowed the source (``DecodeConfig.max_new_tokens``).
    A hypothesis without eos was cut; greedy search forces eos at a sentence's own limit
    (length_limits.py), so one as long as ``limit`` counts as cut too.
    """
    candidates = []
    for hypothesis in hypotheses:
        kept = strip_generated(hypothesis.ids, EOS_ID, PAD_ID)
        cut = EOS_ID not in hypothesis.ids or (limit is not None and len(kept) >= limit)
        candidates.append(Candidate(to_text(kept), kept, hypothesis.score, hypothesis.log_prob, cut))
    return candidates


def strip_generated(ids: Tensor | list[int], eos_id: int, pad_id: int) -> list[int]:
    """Tokens of one generated row up to (not including) its first ``eos``, padding removed."""
    tokens = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
    if eos_id in tokens:
        tokens = tokens[: tokens.index(eos_id)]
    return [token for token in tokens if token != pad_id]
