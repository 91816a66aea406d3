"""Per-sentence length limits (``max_len_a * src_len + max_len_b``) inside one batched search.

A search runs every row of a batch for at most one ``max_len``. With a limit that grows
with the source, the longest source of the batch used to set it for all rows, so a short
sentence's output depended on which sentences it was batched with. :class:`RowLengthLimit`
is a logits processor that ends each row at its own limit: once a row holds its ``limit``
tokens, eos is the only token left. The row then has exactly the tokens it would have had
decoded alone (where the search cuts it at ``limit``), plus that eos, which
``strip_generated`` removes; the batch runs to the largest limit plus one. Greedy search
uses it; beam search takes the limits itself (``beam_search(max_lengths=...)``), as the
forced eos would add its log-probability and one token to the scores that rank the n-best
list.

Shape legend: N rows decoded together, S source length, V vocabulary, t prefix length.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from transformer_lab.decoding.protocol import LogitsProcessor, apply_logits_processor
from transformer_lab.nn import host_reads


class RowLengthLimit:
    """End every row at ``min(max_len, int(a * its source length) + b)`` tokens, then chain ``inner``."""

    reads_source_ids = True

    def __init__(
        self, a: float | None, b: int | None, max_len: int, eos_id: int, pad_id: int, inner: LogitsProcessor | None
    ) -> None:
        self.a, self.b, self.max_len = a or 0.0, b or 0, max_len
        self.eos_id, self.pad_id, self.inner = eos_id, pad_id, inner
        # The last source tensor seen (and its version) with its limits: a search passes the
        # same src_ids at every step until beam search drops finished sentences.
        self._limits_of: tuple[Tensor, int | None, Tensor] | None = None

    def limits(self, src_ids: Tensor) -> Tensor:
        """Each row's most new tokens, computed once per source tensor. Shape: src_ids [N, S] -> [N]."""
        version = None if src_ids.is_inference() else src_ids._version
        if self._limits_of is not None and self._limits_of[0] is src_ids and self._limits_of[1] == version:
            return self._limits_of[2]
        lengths = (src_ids != self.pad_id).sum(dim=1).double()  # [N]
        # The same int(a * n) + b as DecodeConfig.max_new_tokens, in float64 like Python's.
        limits = torch.clamp((self.a * lengths).floor().long() + self.b, max=self.max_len)  # [N]
        self._limits_of = (src_ids, version, limits)
        return limits

    def __call__(self, step: int, prefix_ids: Tensor, log_probs: Tensor, src_ids: Tensor) -> Tensor:
        if self.inner is not None:
            log_probs = apply_logits_processor(self.inner, step, prefix_ids, log_probs, src_ids)  # [N, V]
        done = self.limits(src_ids) <= step  # [N]: the row already holds its limit of tokens
        if not host_reads.host_reads_wait(done.device) and not bool(done.any()):
            # No row at its limit: nothing to force. Asked only where the answer costs no
            # wait for the device; elsewhere the forcing below runs at every step.
            return log_probs
        eos = log_probs[:, self.eos_id]  # [N]
        # A processor may have forbidden eos; at the limit it is the only way out.
        eos = torch.where(torch.isfinite(eos), eos, torch.zeros_like(eos))  # [N]
        forced = torch.full_like(log_probs, -math.inf)  # [N, V]
        forced[:, self.eos_id] = eos
        return torch.where(done.unsqueeze(1), forced, log_probs)  # [N, V]
