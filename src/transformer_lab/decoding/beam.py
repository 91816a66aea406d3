"""Batched beam search with the GNMT length penalty and an exact early stop.

All sentences and all their beams are decoded as one batch of B*K rows, sentence-major
(row = sentence * K + beam). Sentences that are done are dropped from the batch (the
cache is told through `reorder`), so a long sentence does not keep short ones running.

Scores. A hypothesis' `log_prob` is the raw sum of its tokens' log-probabilities (eos
included); its `score` is `log_prob / gnmt_length_penalty(len(ids), length_penalty)`
with `len(ids)` the number of generated tokens, eos included, bos excluded. Live beams
are ranked by raw log-prob (as in GNMT and fairseq); the penalty only ranks the
finished hypotheses.

Early stop (per sentence, checked after every step). Let `g` be the number of tokens
the live beams hold, `s` the best live raw log-prob and `h` the `num_return`-th best
finished score. Every continuation of a live beam has a raw sum `r <= s` (log-probs are
<= 0; a logits processor must not push them above 0) and a length `l` with
`g + 1 <= l <= max_len`, so its score `r / lp(l)` is at most
`bound = max(s / lp(g + 1), s / lp(max_len))`: for a fixed numerator `x / lp(l)` is
monotonic in `l` (lp is monotonic in `l` for any alpha), so its maximum over the range
lies at an end. With alpha > 0 and s < 0 that is `s / lp(max_len)`, i.e. a long beam may
still overtake a short finished one, which is why the bound looks at max_len and not at
the current length. The sentence is done when it has `num_return` finished hypotheses
and `h >= bound` (the n-best list can no longer change), when no live beam has a finite
score, or when max_len tokens have been generated; at max_len the live beams are added
as hypotheses without eos.

The field's stop (``stop="finished"``). fairseq, OpenNMT and CTranslate2 (with a length
penalty) stop a sentence once `beam_size` hypotheses have ended (an eos ranked among the
first K of a step, or max_len), and return the best of those by score. That is not exact:
a live beam might still have overtaken them. It runs fewer steps: on the Multi30k test
set with beam 5 and length penalty 1.4, the exact stop decoded 1.36 rows for every row the
outputs needed (docs/results.md#ctranslate2).

Beam size 1. The search then follows greedy search token by token; when greedy emits
eos the finished hypothesis has the greedy raw score and every continuation scores
lower in raw log-prob, so with `length_penalty=0` the result is exactly greedy's. With
`length_penalty > 0` a longer continuation can have a better normalised score, and the
exact stop above will find it: the result may then be longer than greedy's.

Shape legend: B batch, S source length, K beam, V vocabulary, L longest best hypothesis.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from transformer_lab.decoding.output import DecodeOutput, Hypothesis, check_length_penalty, gnmt_length_penalty
from transformer_lab.decoding.protocol import (
    IncrementalDecoder,
    LogitsProcessor,
    check_positive,
    check_source_ids,
    clamp_to_positional_table,
    next_token_log_probs,
    resolve_special_ids,
)

BEAM_STOPS = ("exact", "finished")


def check_beam_stop(stop: str) -> None:
    """Raise a ValueError unless ``stop`` names one of the stopping rules."""
    if stop not in BEAM_STOPS:
        raise ValueError(f"stop: expected one of {BEAM_STOPS}, given {stop!r}")


def _add_hypothesis(
    hypotheses: list[Hypothesis],
    ids: list[int],
    log_prob: float,
    length_penalty: float,
    num_return: int,
) -> None:
    """Insert a hypothesis, keeping the list sorted best first and `num_return` long."""
    score = log_prob / gnmt_length_penalty(len(ids), length_penalty)
    hypotheses.append(Hypothesis(ids=ids, score=score, log_prob=log_prob))
    # A stable sort: among equal scores the hypothesis found first stays first.
    hypotheses.sort(key=lambda hypothesis: -hypothesis.score)
    del hypotheses[num_return:]


def _sentence_done(
    hypotheses: list[Hypothesis],
    ended: int,
    best_live_log_prob: float,
    generated: int,
    max_len: int,
    length_penalty: float,
    num_return: int,
    stop: str,
    beam_size: int,
) -> bool:
    """The stopping rule of the module docstring (``stop``: "exact" or "finished") for one sentence.

    ``ended`` counts the hypotheses the sentence has seen end, ``hypotheses`` keeps the best of them.
    """
    if best_live_log_prob == -math.inf:
        return True  # no live beam can produce anything any more
    if stop == "finished":
        return ended >= beam_size
    if len(hypotheses) < num_return:
        return False
    bound = max(
        best_live_log_prob / gnmt_length_penalty(generated + 1, length_penalty),
        best_live_log_prob / gnmt_length_penalty(max_len, length_penalty),
    )
    return hypotheses[num_return - 1].score >= bound


def beam_search(
    model: IncrementalDecoder,
    src_ids: Tensor,
    beam_size: int,
    max_len: int,
    *,
    length_penalty: float = 0.6,
    num_return: int = 1,
    bos_id: int | None = None,
    eos_id: int | None = None,
    pad_id: int | None = None,
    use_cache: bool = True,
    logits_processor: LogitsProcessor | None = None,
    stop: str = "exact",
) -> DecodeOutput:
    """Beam search over a batch of sentences for at most `max_len` new tokens.

    Each step scores the K*V continuations of every sentence's K beams, takes the best
    2K (so that K non-eos candidates remain after the eos ones are set aside), stores an
    eos candidate ranked among the first K as a finished hypothesis, keeps the best K
    non-eos candidates as the new beams and reorders the cache to their parents. See the
    module docstring for the scores and the stopping rules: `stop="exact"` stops a sentence
    only when its n-best list can no longer change, `stop="finished"` once `beam_size` of
    its hypotheses have ended (fairseq's and CTranslate2's rule). The model should be in
    eval mode.

    Shape:
        src_ids: LongTensor[B, S] -> DecodeOutput(hypotheses: B lists of <= num_return, best_ids [B, L]).
    """
    check_source_ids(src_ids)
    check_positive("beam_size", beam_size)
    check_positive("max_len", max_len)
    check_positive("num_return", num_return)
    if num_return > beam_size:
        raise ValueError(f"num_return: expected at most beam_size ({beam_size}), given {num_return}")
    check_length_penalty(length_penalty)
    check_beam_stop(stop)
    bos_id, eos_id, pad_id = resolve_special_ids(model, bos_id, eos_id, pad_id)
    max_len = clamp_to_positional_table(model, max_len)

    # no_grad rather than inference_mode: see greedy_search.
    with torch.no_grad():
        batch_size = src_ids.size(0)
        device = src_ids.device
        memory = model.encode(src_ids)  # [B, S, D]
        # Encode once, then give every beam its own copy of its sentence's rows.
        memory = memory.repeat_interleave(beam_size, dim=0)  # [B*K, S, D]
        beam_src_ids = src_ids.repeat_interleave(beam_size, dim=0)  # [B*K, S]
        cache = model.new_cache() if use_cache else None

        prefix_ids = torch.full((batch_size * beam_size, 1), bos_id, dtype=torch.long, device=device)  # [B*K, 1]
        # Only beam 0 is live at the start: the K beams hold the same prefix, and
        # letting all of them expand would fill the beam with K copies of each token.
        beam_scores = torch.full((batch_size, beam_size), -math.inf, dtype=torch.float32, device=device)  # [B, K]
        beam_scores[:, 0] = 0.0

        # active[a] is the original index of the a-th sentence still in the batch.
        active = list(range(batch_size))
        finished: list[list[Hypothesis]] = [[] for _ in range(batch_size)]
        ended = [0] * batch_size  # hypotheses seen ending per sentence (finished keeps the best)
        beam_offsets = torch.arange(beam_size, device=device)  # [K]

        for step in range(max_len):
            active_count = len(active)
            log_probs = next_token_log_probs(
                model, prefix_ids, memory, beam_src_ids, cache, step, logits_processor
            )  # [A*K, V]
            vocab_size = log_probs.size(1)

            candidate_scores = beam_scores.reshape(-1, 1) + log_probs  # [A*K, V]
            candidate_scores = candidate_scores.reshape(active_count, beam_size * vocab_size)  # [A, K*V]
            candidate_count = min(2 * beam_size, beam_size * vocab_size)
            # topk returns the candidates sorted best first; their rank is used below.
            top_scores, top_index = candidate_scores.topk(candidate_count, dim=1)  # [A, C]
            top_parents = torch.div(top_index, vocab_size, rounding_mode="floor")  # [A, C]
            top_tokens = top_index % vocab_size  # [A, C]
            top_is_eos = top_tokens == eos_id  # [A, C]

            # The K best candidates that do not end the hypothesis become the new beams.
            live_scores = top_scores.masked_fill(top_is_eos, -math.inf)  # [A, C]
            next_scores, order = live_scores.topk(beam_size, dim=1)  # [A, K]
            next_parents = top_parents.gather(1, order)  # [A, K]
            next_tokens = top_tokens.gather(1, order)  # [A, K]
            row_offsets = torch.arange(active_count, device=device) * beam_size  # [A]
            flat_parents = (row_offsets.unsqueeze(1) + next_parents).reshape(-1)  # [A*K]
            next_prefix_ids = torch.cat(
                [prefix_ids.index_select(0, flat_parents), next_tokens.reshape(-1, 1)], dim=1
            )  # [A*K, t+1]

            # An eos candidate counts only within the top K, as if the beam had K slots:
            # the extra K candidates exist to refill the beam, not to finish more.
            candidate_ranks = torch.arange(candidate_count, device=device)  # [C]
            accepted = top_is_eos & (candidate_ranks < beam_size).unsqueeze(0) & torch.isfinite(top_scores)  # [A, C]
            positions = accepted.nonzero()  # [M, 2]
            if positions.numel() > 0:
                sentence_positions = positions[:, 0]  # [M]
                candidate_positions = positions[:, 1]  # [M]
                rows = row_offsets[sentence_positions] + top_parents[sentence_positions, candidate_positions]  # [M]
                token_lists = prefix_ids.index_select(0, rows)[:, 1:].tolist()
                log_prob_list = top_scores[sentence_positions, candidate_positions].tolist()
                for position, tokens, log_prob in zip(sentence_positions.tolist(), token_lists, log_prob_list):
                    ended[active[position]] += 1
                    _add_hypothesis(
                        finished[active[position]],
                        tokens + [eos_id],
                        log_prob,
                        length_penalty,
                        num_return,
                    )

            if step == max_len - 1:
                # Out of length: the live beams become hypotheses without eos.
                token_lists = next_prefix_ids[:, 1:].tolist()
                log_prob_list = next_scores.reshape(-1).tolist()
                for row, (tokens, log_prob) in enumerate(zip(token_lists, log_prob_list)):
                    if math.isfinite(log_prob):
                        _add_hypothesis(
                            finished[active[row // beam_size]],
                            tokens,
                            log_prob,
                            length_penalty,
                            num_return,
                        )
                break

            best_live = next_scores[:, 0].tolist()  # scores are sorted, beam 0 is best
            keep = [
                position
                for position, sentence in enumerate(active)
                if not _sentence_done(
                    finished[sentence],
                    ended[sentence],
                    best_live[position],
                    step + 1,
                    max_len,
                    length_penalty,
                    num_return,
                    stop,
                    beam_size,
                )
            ]
            if not keep:
                break
            if len(keep) < active_count:
                keep_index = torch.tensor(keep, dtype=torch.long, device=device)  # [A']
                keep_rows = keep_index.unsqueeze(1) * beam_size + beam_offsets  # [A', K]
                keep_rows = keep_rows.reshape(-1)  # [A'*K]
                flat_parents = flat_parents.index_select(0, keep_rows)  # [A'*K]
                next_prefix_ids = next_prefix_ids.index_select(0, keep_rows)  # [A'*K, t+1]
                next_scores = next_scores.index_select(0, keep_index)  # [A', K]
                # A sentence's K memory rows are identical, so selecting rows of kept
                # sentences is enough; no need to follow the parents.
                memory = memory.index_select(0, keep_rows)  # [A'*K, S, D]
                beam_src_ids = beam_src_ids.index_select(0, keep_rows)  # [A'*K, S]
                active = [active[position] for position in keep]

            if cache is not None:
                # The cache holds one row per old beam; each new beam continues its parent.
                # A parent is a beam of the same sentence, whose cross-attention keys and
                # values are the same: they need moving only when sentences were dropped.
                cache.reorder(flat_parents, include_static=len(keep) < active_count)
            prefix_ids = next_prefix_ids
            beam_scores = next_scores

    return DecodeOutput.from_hypotheses(finished, pad_id, src_ids.device)
