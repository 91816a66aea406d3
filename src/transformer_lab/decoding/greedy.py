"""Batched greedy search: at every step each sentence takes its most likely next token.

Shape legend: B batch, S source length, L generated length (<= max_len), V vocabulary.
"""

from __future__ import annotations

import math

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


def greedy_search(
    model: IncrementalDecoder,
    src_ids: Tensor,
    max_len: int,
    *,
    bos_id: int | None = None,
    eos_id: int | None = None,
    pad_id: int | None = None,
    use_cache: bool = True,
    logits_processor: LogitsProcessor | None = None,
    length_penalty: float = 0.0,
    check_every: int | None = None,
) -> DecodeOutput:
    """Decode a batch greedily for at most `max_len` new tokens.

    All rows are decoded together; a row that has emitted eos leaves the batch (its
    output holds pad_id after the eos) and the loop stops as soon as every row has
    finished. Which rows have finished is read back every `check_every` steps (None: every
    step on the CPU, every few on an accelerator, where each read waits for the device;
    `resolve_check_every`); between two reads a finished row keeps being computed, its
    tokens ignored, so the outputs do not depend on the interval. A logits processor sees
    the rows still in the batch, with their own ``src_ids`` rows, as in beam search. With
    `use_cache=False` the whole prefix is decoded again at every step (slow; kept as the
    oracle for the cached path). The model should be in eval mode.
    Each sentence gets one hypothesis (none where a logits processor left no token possible,
    as in beam search); `length_penalty` only sets its reported `score`
    (its `log_prob` over the GNMT penalty, as beam search reports it), never the choice.

    Shape:
        src_ids: LongTensor[B, S] -> DecodeOutput(best_ids [B, L], scores [B], lengths [B]);
        a row of best_ids that finished holds its eos and then pad_id.
    """
    check_source_ids(src_ids)
    check_positive("max_len", max_len)
    check_flag("use_cache", use_cache)
    check_logits_processor(logits_processor)
    check_length_penalty(length_penalty)
    bos_id, eos_id, pad_id = resolve_special_ids(model, bos_id, eos_id, pad_id)
    max_len = clamp_to_positional_table(model, max_len)
    check_every = resolve_check_every(check_every, src_ids.device)

    # no_grad rather than inference_mode: inference tensors returned to the caller could
    # not be modified in place later, a surprising trap for such small outputs.
    with torch.no_grad():
        batch_size = src_ids.size(0)
        device = src_ids.device
        memory = model.encode(src_ids)  # [B, S, D]
        cache = model.new_cache() if use_cache else None

        # The rows in the batch, as rows of the full batch; finished rows leave the batch
        # (memory, source, prefix, cache) at the next read, so no step computes a row whose
        # sentence ended before it: on Multi30k's test set in batches of 64 sorted by length
        # that was 37 % of the row-steps (docs/results.md#ctranslate2).
        active = torch.arange(batch_size, device=device)  # [A]
        active_src_ids = src_ids  # [A, S]
        prefix_ids = torch.full((batch_size, 1), bos_id, dtype=torch.long, device=device)  # [A, t]
        finished = torch.zeros(batch_size, dtype=torch.bool, device=device)  # [A]: emitted eos already
        generated_ids = torch.full((batch_size, max_len), pad_id, dtype=torch.long, device=device)  # [B, max_len]
        scores = torch.zeros(batch_size, dtype=torch.float32, device=device)  # [B]
        lengths = torch.zeros(batch_size, dtype=torch.long, device=device)  # [B]

        for step in range(max_len):
            log_probs = next_token_log_probs(
                model, prefix_ids, memory, active_src_ids, cache, step, logits_processor
            )  # [A, V]
            next_ids = log_probs.argmax(dim=-1)  # [A]
            next_log_probs = log_probs.gather(1, next_ids.unsqueeze(1)).squeeze(1)  # [A]
            # A row whose processor left no token possible (all -inf, or NaN) ends: it has no hypothesis.
            ended = (next_ids == eos_id) | ~next_log_probs.isfinite()  # [A]
            if check_every == 1:
                # Read at every step: every row in the batch is still going.
                generated_ids[active, step] = next_ids
                scores[active] += next_log_probs
                lengths[active] += 1
                finished = ended
            else:
                # Rows finished since the last read are still here: their tokens do not count.
                generated_ids[active, step] = next_ids.masked_fill(finished, pad_id)
                scores[active] += next_log_probs.masked_fill(finished, 0.0)
                lengths[active] += ~finished
                finished = finished | ended  # [A]
            prefix_ids = torch.cat([prefix_ids, next_ids.unsqueeze(1)], dim=1)  # [A, t+1]

            if (step + 1) % check_every != 0 or step == max_len - 1:
                continue
            # The one host read of these steps.
            remaining = finished.shape[0] - int(finished.sum())
            if remaining == 0:
                break
            if remaining < finished.shape[0]:
                # A stable sort puts the unfinished rows first, in order: their indices,
                # without another read (nonzero would wait for the device again).
                keep = finished.to(torch.uint8).argsort(stable=True)[:remaining]  # [A']
                active = active.index_select(0, keep)  # [A']
                active_src_ids = active_src_ids.index_select(0, keep)  # [A', S]
                memory = memory.index_select(0, keep)  # [A', S, D]
                prefix_ids = prefix_ids.index_select(0, keep)  # [A', t+1]
                if check_every > 1:
                    finished = finished.index_select(0, keep)  # [A'], all False
                if cache is not None:
                    cache.reorder(keep)

    # As in beam search, a sentence the processor left no possible sequence has no hypothesis:
    # an empty row of best_ids, length 0 and score -inf.
    impossible = ~scores.isfinite()  # [B]
    scores = scores.masked_fill(impossible, float("-inf"))
    lengths = lengths.masked_fill(impossible, 0)
    generated_ids = generated_ids.masked_fill(impossible.unsqueeze(1), pad_id)
    length_list = lengths.tolist()
    # The steps the longest row took (bos aside); steps run past it between reads added only pad.
    generated_ids = generated_ids[:, : max(length_list)]  # [B, L]
    hypotheses = [
        [Hypothesis(ids=row[:length], score=log_prob / gnmt_length_penalty(length, length_penalty), log_prob=log_prob)]
        if math.isfinite(log_prob)
        else []
        for row, length, log_prob in zip(generated_ids.tolist(), length_list, scores.tolist())
    ]
    return DecodeOutput(hypotheses=hypotheses, best_ids=generated_ids, scores=scores, lengths=lengths)
