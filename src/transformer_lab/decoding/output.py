"""What every search returns: per sentence the hypotheses best first, and the best ones as a tensor.

Greedy and beam search share this one type, so a caller never branches on the strategy.

Shape legend: B batch, L longest best hypothesis (eos included).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

# The GNMT alpha the searches accept: the field uses 0-2 (GNMT 0.6, fairseq 1.0); beyond 10
# the penalty overflows for long outputs and says nothing a smaller alpha would not.
MAX_LENGTH_PENALTY = 10.0


def check_length_penalty(value: object) -> float:
    """``value`` if it is a float in [0, MAX_LENGTH_PENALTY], else a ValueError saying the range."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= MAX_LENGTH_PENALTY:
        raise ValueError(
            f"length_penalty: expected a float in [0, {MAX_LENGTH_PENALTY:g}] (GNMT alpha; 0 ranks by raw "
            f"log-prob), given {value!r}"
        )
    return float(value)


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """The GNMT length penalty ((5 + length) / 6) ** alpha (Wu et al., 2016).

    alpha = 0 gives 1 (rank by raw log-prob); larger alpha favours longer hypotheses.
    """
    if length < 0:  # (5 + length) / 6 <= 0 gave a complex number or 0, which a score is divided by
        raise ValueError(f"length: expected an int >= 0, given {length!r}")
    return ((5.0 + length) / 6.0) ** alpha


@dataclass(frozen=True)
class Hypothesis:
    """One output sequence of a search.

    `ids` are the generated tokens without bos, ending with eos if the hypothesis
    finished (a hypothesis cut at the length limit has none); `log_prob` is the raw sum
    of the token log-probabilities; `score` is `log_prob` divided by the GNMT length
    penalty of `len(ids)`, the number beam search ranks finished hypotheses by.
    """

    ids: list[int]
    score: float
    log_prob: float


@dataclass
class DecodeOutput:
    """The result of `greedy_search`, `beam_search` and `decode`.

    `hypotheses[b]` holds sentence b's hypotheses, best first: one for greedy search,
    `num_return` for beam search (fewer only if a logits processor left fewer possible
    sequences; none at all if it forbade everything).

    Shape:
        best_ids: LongTensor[B, L], each sentence's best hypothesis (eos included) padded
            with pad_id; L is the longest of them.
        scores: FloatTensor[B], the raw log-prob of each best hypothesis (-inf if none).
        lengths: LongTensor[B], the number of tokens of each best hypothesis, eos included.
    """

    hypotheses: list[list[Hypothesis]]
    best_ids: Tensor
    scores: Tensor
    lengths: Tensor

    @classmethod
    def from_hypotheses(cls, hypotheses: list[list[Hypothesis]], pad_id: int, device: torch.device) -> DecodeOutput:
        """Pack the best hypothesis of every sentence into `best_ids`, `scores` and `lengths`."""
        best = [sentence[0] if sentence else None for sentence in hypotheses]
        longest = max((len(hypothesis.ids) for hypothesis in best if hypothesis is not None), default=0)
        rows = [(hypothesis.ids if hypothesis is not None else []) for hypothesis in best]
        best_ids = torch.tensor(
            [row + [pad_id] * (longest - len(row)) for row in rows], dtype=torch.long, device=device
        ).reshape(len(rows), longest)  # [B, L]
        scores = torch.tensor(
            [hypothesis.log_prob if hypothesis is not None else -float("inf") for hypothesis in best],
            dtype=torch.float32,
            device=device,
        )  # [B]
        lengths = torch.tensor([len(row) for row in rows], dtype=torch.long, device=device)  # [B]
        return cls(hypotheses=hypotheses, best_ids=best_ids, scores=scores, lengths=lengths)
