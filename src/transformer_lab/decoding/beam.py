"""Batched beam search with the GNMT length penalty and an exact early stop.

All sentences and all their beams are decoded as one batch of B*K rows, sentence-major
(row = sentence * K + beam). Sentences that are done are dropped from the batch (the
cache is told through `reorder`), so a long sentence does not keep short ones running.

Host reads. The choices are made on the device; what the host needs of a step (which eos
candidates were accepted, their scores and parents, the live beams' scores) is kept as
one small record per step and read every `check_every` steps, all pending records at
once, then applied step by step as if each had been read on time; a hypothesis' tokens
stay on the device until the end (token_history.py). On the CPU the default reads every
step, as reads cost nothing there; on an accelerator every read waits for the device
(nn/host_reads.py), so it reads every few steps, and a sentence done in between keeps
its rows in the batch until the read, its candidates ignored. The results do not depend
on the interval.

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
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from transformer_lab.decoding.output import DecodeOutput, Hypothesis, check_length_penalty, gnmt_length_penalty
from transformer_lab.decoding.protocol import (
    IncrementalDecoder,
    LogitsProcessor,
    check_flag,
    check_logits_processor,
    check_positive,
    check_source_ids,
    clamp_to_positional_table,
    next_token_log_probs,
    resolve_check_every,
    resolve_special_ids,
)
from transformer_lab.decoding.token_history import TokenHistory

BEAM_STOPS = ("exact", "finished")


def check_beam_stop(stop: str, name: str = "stop") -> None:
    """Raise a ValueError naming ``name`` (the caller's argument or field) unless ``stop`` names a stopping rule."""
    if stop not in BEAM_STOPS:
        raise ValueError(f"{name}: expected one of {', '.join(map(repr, BEAM_STOPS))}, got {stop!r}")


@dataclass(frozen=True)
class _Found:
    """A hypothesis as the search finds it: its tokens stay on the device until the end (token_history.py).

    Its ids are those of row ``row`` of the prefix after ``steps`` steps (bos excluded),
    then ``last_token``: eos for a hypothesis that ended, a beam's token for one cut at its
    sentence's length limit (named by its parent row, which the history holds whether or
    not the sentence leaves the batch at that step).
    """

    score: float
    log_prob: float
    steps: int
    row: int
    last_token: int

    @classmethod
    def scored(cls, log_prob: float, steps: int, row: int, last_token: int, length_penalty: float) -> _Found:
        """The hypothesis with its score: ``log_prob`` over the GNMT penalty of its length (``steps + 1``)."""
        score = log_prob / gnmt_length_penalty(steps + 1, length_penalty)
        return cls(score, log_prob, steps, row, last_token)


def _add_hypothesis(hypotheses: list[_Found], found: _Found, num_return: int) -> None:
    """Insert a hypothesis, keeping the list sorted best first and `num_return` long."""
    hypotheses.append(found)
    # A stable sort: among equal scores the hypothesis found first stays first.
    hypotheses.sort(key=lambda hypothesis: -hypothesis.score)
    del hypotheses[num_return:]


def _sentence_done(
    hypotheses: list[_Found],
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


def _replay(
    pending: list[tuple[int, Tensor]],
    active: list[int],
    found: list[list[_Found]],
    ended: list[int],
    beam_size: int,
    max_lengths: list[int],
    length_penalty: float,
    num_return: int,
    stop: str,
    eos_id: int,
) -> list[bool]:
    """Read the steps since the last check in one go and apply them in order, as if read one by one.

    Each record holds, per sentence still in the batch, the first candidates' raw scores
    where they end with eos (a finite one is a hypothesis), their parent beams, and the new
    beams' scores, parent beams and tokens (see beam_search). A sentence found done at a step ignores the steps
    after it: in a search that reads every step it would have left the batch there. At its
    last step (``max_len - 1``) the live beams become hypotheses without eos and no stopping
    rule is asked; ``max_lengths[sentence]`` is that sentence's ``max_len``. Returns, per position of
    ``active``, whether the sentence is done.

    Shape: each record ``[A, 5K]``: ending scores, parent beams, new beam scores, their parents, their tokens.
    """
    steps = [step for step, _ in pending]
    if len(pending) == 1:
        records = [pending[0][1].tolist()]  # [1, A, 5K], the one read
    else:
        records = torch.stack([record for _, record in pending]).tolist()  # [P, A, 5K], the one read
    done = [False] * len(active)
    for step, record in zip(steps, records):
        for position, row in enumerate(record):
            if done[position]:
                continue
            sentence = active[position]
            # Most rows end nothing: one max over K scores rules them out (NaN is never accepted).
            ending = row[:beam_size]
            for candidate in range(beam_size) if max(ending) != -math.inf else ():
                if math.isfinite(ending[candidate]):
                    ended[sentence] += 1
                    parent = position * beam_size + int(row[beam_size + candidate])
                    hypothesis = _Found.scored(ending[candidate], step, parent, eos_id, length_penalty)
                    _add_hypothesis(found[sentence], hypothesis, num_return)
            live = row[2 * beam_size : 3 * beam_size]  # [K], best first
            if step == max_lengths[sentence] - 1:
                # Out of length: the live beams become hypotheses without eos.
                live_parents, live_tokens = row[3 * beam_size : 4 * beam_size], row[4 * beam_size :]
                for beam, log_prob in enumerate(live):
                    if math.isfinite(log_prob):
                        parent = position * beam_size + int(live_parents[beam])
                        hypothesis = _Found.scored(log_prob, step, parent, int(live_tokens[beam]), length_penalty)
                        _add_hypothesis(found[sentence], hypothesis, num_return)
                done[position] = True
            elif _sentence_done(
                found[sentence],
                ended[sentence],
                live[0],
                step + 1,
                max_lengths[sentence],
                length_penalty,
                num_return,
                stop,
                beam_size,
            ):
                done[position] = True
    return done


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
    check_every: int | None = None,
    max_lengths: Sequence[int] | None = None,
) -> DecodeOutput:
    """Beam search over a batch of sentences for at most `max_len` new tokens.

    Each step scores the K*V continuations of every sentence's K beams, takes the best
    2K (so that K non-eos candidates remain after the eos ones are set aside), stores an
    eos candidate ranked among the first K as a finished hypothesis, keeps the best K
    non-eos candidates as the new beams and reorders the cache to their parents. See the
    module docstring for the scores and the stopping rules: `stop="exact"` stops a sentence
    only when its n-best list can no longer change, `stop="finished"` once `beam_size` of
    its hypotheses have ended (fairseq's and CTranslate2's rule). `check_every` is the
    number of steps between two host reads (None: by device, `resolve_check_every`; see
    the module docstring). `max_lengths` (one per sentence, each at most `max_len`): a
    sentence's own `max_len`, so that it is searched exactly as alone with that `max_len`
    (its beams at the limit end without eos, and its stop's bound uses it), whatever it is
    batched with. The model should be in eval mode.

    Shape:
        src_ids: LongTensor[B, S] -> DecodeOutput(hypotheses: B lists of <= num_return, best_ids [B, L]).
    """
    check_source_ids(src_ids)
    check_positive("beam_size", beam_size)
    check_positive("max_len", max_len)
    check_positive("num_return", num_return)
    check_flag("use_cache", use_cache)
    check_logits_processor(logits_processor)
    if num_return > beam_size:
        raise ValueError(f"num_return: expected at most beam_size ({beam_size}), given {num_return}")
    check_length_penalty(length_penalty)
    check_beam_stop(stop)
    bos_id, eos_id, pad_id = resolve_special_ids(model, bos_id, eos_id, pad_id)
    max_len = clamp_to_positional_table(model, max_len)
    check_every = resolve_check_every(check_every, src_ids.device)
    if max_lengths is None:
        row_limits = [max_len] * src_ids.size(0)
    else:
        if len(max_lengths) != src_ids.size(0):
            raise ValueError(
                f"max_lengths: expected one limit per sentence ({src_ids.size(0)}), given {len(max_lengths)}"
            )
        for limit in max_lengths:
            check_positive("max_lengths", limit)
        row_limits = [min(int(limit), max_len) for limit in max_lengths]
        max_len = max(row_limits)

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
        found: list[list[_Found]] = [[] for _ in range(batch_size)]
        ended = [0] * batch_size  # hypotheses seen ending per sentence (found keeps the best)
        beam_offsets = torch.arange(beam_size, device=device)  # [K]
        history = TokenHistory()
        # Each step's [A, 5K] record since the last read, with the step it belongs to.
        pending: list[tuple[int, Tensor]] = []

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
            beam_tokens = top_tokens.gather(1, order)  # [A, K]
            next_tokens = beam_tokens.reshape(-1)  # [A*K]
            row_offsets = torch.arange(active_count, device=device) * beam_size  # [A]
            flat_parents = (row_offsets.unsqueeze(1) + next_parents).reshape(-1)  # [A*K]
            next_prefix_ids = torch.cat(
                [prefix_ids.index_select(0, flat_parents), next_tokens.unsqueeze(1)], dim=1
            )  # [A*K, t+1]

            # An eos candidate counts only within the top K, as if the beam had K slots:
            # the extra K candidates exist to refill the beam, not to finish more. What the
            # host needs of this step, read with the others at the next check, is one
            # float32 record: per sentence the first K candidates' raw scores where they end
            # with eos (-inf elsewhere: a finite one is accepted), their parent beams (small
            # integers), and the new beams' scores, parents and tokens (ids below 2^24, exact in
            # float32), with which a sentence at its length limit ends its beams.
            ending_scores = top_scores[:, :beam_size].masked_fill(~top_is_eos[:, :beam_size], -math.inf)  # [A, K]
            parents = top_parents[:, :beam_size].to(top_scores.dtype)  # [A, K]
            record = torch.cat(
                [
                    ending_scores,
                    parents,
                    next_scores,
                    next_parents.to(top_scores.dtype),
                    beam_tokens.to(top_scores.dtype),
                ],
                dim=1,
            )  # [A, 5K]
            pending.append((step, record))

            last_step = step == max_len - 1
            compacted = False
            if last_step or (step + 1) % check_every == 0:
                done = _replay(
                    pending, active, found, ended, beam_size, row_limits, length_penalty, num_return, stop, eos_id
                )
                pending.clear()
                if last_step:
                    break
                keep = [position for position in range(active_count) if not done[position]]
                if not keep:
                    break
                if len(keep) < active_count:
                    compacted = True
                    keep_index = torch.tensor(keep, dtype=torch.long, device=device)  # [A']
                    keep_rows = keep_index.unsqueeze(1) * beam_size + beam_offsets  # [A', K]
                    keep_rows = keep_rows.reshape(-1)  # [A'*K]
                    flat_parents = flat_parents.index_select(0, keep_rows)  # [A'*K]
                    next_tokens = next_tokens.index_select(0, keep_rows)  # [A'*K]
                    next_prefix_ids = next_prefix_ids.index_select(0, keep_rows)  # [A'*K, t+1]
                    next_scores = next_scores.index_select(0, keep_index)  # [A', K]
                    # A sentence's K memory rows are identical, so selecting rows of kept
                    # sentences is enough; no need to follow the parents.
                    memory = memory.index_select(0, keep_rows)  # [A'*K, S, D]
                    beam_src_ids = beam_src_ids.index_select(0, keep_rows)  # [A'*K, S]
                    active = [active[position] for position in keep]

            history.append(next_tokens, flat_parents)
            if cache is not None:
                # The cache holds one row per old beam; each new beam continues its parent.
                # A parent is a beam of the same sentence, whose cross-attention keys and
                # values are the same: they need moving only when sentences were dropped.
                cache.reorder(flat_parents, include_static=compacted)
            prefix_ids = next_prefix_ids
            beam_scores = next_scores

    trace = history.read()
    hypotheses = [
        [
            Hypothesis(
                ids=trace.ids(hypothesis.steps, hypothesis.row) + [hypothesis.last_token],
                score=hypothesis.score,
                log_prob=hypothesis.log_prob,
            )
            for hypothesis in sentence
        ]
        for sentence in found
    ]
    return DecodeOutput.from_hypotheses(hypotheses, pad_id, src_ids.device)
