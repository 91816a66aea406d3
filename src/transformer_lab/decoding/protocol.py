"""What a model must offer to be decoded, and the checks shared by the searches.

The searches never import a model class: they talk to any object that follows
`IncrementalDecoder` (structural typing), so the real `Seq2SeqTransformer` and the
hand-built fakes of the tests are decoded by exactly the same code.

Shape legend: B batch, S source length, D d_model, V vocabulary, N rows decoded together
(B for greedy search, B*K for beam search with K beams), t prefix length (bos included).
"""

from __future__ import annotations

import numbers
from typing import Any, Protocol, Union, cast, runtime_checkable

import torch
from torch import Tensor

from transformer_lab.nn import host_reads


class PlainLogitsProcessor(Protocol):
    """step, prefix_ids [N, t], log_probs [N, V] -> log_probs [N, V] (see `LogitsProcessor`)."""

    def __call__(self, step: int, prefix_ids: Tensor, log_probs: Tensor) -> Tensor: ...


class SourceReadingLogitsProcessor(Protocol):
    """A processor that also reads each row's source, ``src_ids`` [N, S] (see `LogitsProcessor`)."""

    reads_source_ids: bool

    def __call__(self, step: int, prefix_ids: Tensor, log_probs: Tensor, *, src_ids: Tensor) -> Tensor: ...


LogitsProcessor = Union[PlainLogitsProcessor, SourceReadingLogitsProcessor]
"""A hook called on next-token log-probabilities before a search selects tokens.

It receives `step` (tokens generated so far, so `prefix_ids.size(1) == step + 1`, the
prefix starting with bos), `prefix_ids` LongTensor[N, t] and `log_probs`
FloatTensor[N, V] (float32 log-softmax output, NOT raw logits) and returns a tensor of
the same shape. Set an entry to `-inf` to forbid that token (e.g. eos before a minimum
length). The returned values are what the search adds to the scores, so they enter
`scores` / `log_prob`; the beam search's early stop assumes they stay <= 0 (only lower
log-probs, never raise them above 0).

A processor that needs each row's source (for example to make the output as long as
the input) sets the attribute `reads_source_ids = True`; it is then called as
`processor(step, prefix_ids, log_probs, src_ids=src_ids)` with `src_ids`
LongTensor[N, S], the source row of each decoded row. That is the way to keep per-row
information in step with the rows: beam search reorders rows to their parents and drops
finished sentences from the batch, greedy search drops finished rows, and both reorder
`prefix_ids` and `src_ids` with them, but neither can reorder state a processor keeps on
the side, so a processor should derive everything it needs from `prefix_ids` and
`src_ids` at every call. Rows leave the batch when the search next reads the device (see
`resolve_check_every`): until then a processor also sees rows that have finished, whose
results the search ignores.
"""


@runtime_checkable
class DecoderCache(Protocol):
    """The incremental state a model keeps between `decode_step` calls.

    A fresh cache (from `model.new_cache()`) is empty; its first use fills it with one
    row per decoded sequence.
    """

    def reorder(self, index: Tensor, include_static: bool = True) -> None:
        """Keep, in place, the rows named by `index` (index_select along the batch).

        Beam search calls it after choosing beams: row `i` of the new cache is row
        `index[i]` of the old one; rows may repeat (a beam that splits) or vanish (a
        beam or sentence that is dropped). With `include_static=False` (only when no
        sentence was dropped, so `index` maps each row to a beam of the same sentence)
        state that depends only on the source may stay as it is.

        Shape:
            index: LongTensor[N'] of row numbers in [0, N).
        """
        ...


@runtime_checkable
class IncrementalDecoder(Protocol):
    """An encoder-decoder that predicts the next target token, batch-first.

    Attributes `bos_id`, `eos_id`, `pad_id` are the defaults the searches use when no
    explicit id is passed. An optional attribute `max_len` (the positions the model can
    read) caps the number of new tokens: see `clamp_to_positional_table`.
    """

    bos_id: int
    eos_id: int
    pad_id: int

    def encode(self, src_ids: Tensor) -> Tensor:
        """Encode a padded batch of source sentences.

        Shape:
            src_ids: LongTensor[B, S] -> memory: Tensor[B, S, D].
        """
        ...

    def new_cache(self) -> DecoderCache:
        """Return an empty cache for one decoding run."""
        ...

    def decode_step(
        self,
        tgt_prefix_ids: Tensor,
        memory: Tensor,
        src_ids: Tensor,
        cache: Any = None,
    ) -> Tensor:
        """Return the logits of the token that follows each prefix.

        With `cache=None` the whole prefix is decoded again. With a cache only the last
        prefix token is processed and its keys/values are appended to the cache; the
        caller still passes the full prefix.

        Shape:
            tgt_prefix_ids: LongTensor[N, t], memory: Tensor[N, S, D],
            src_ids: LongTensor[N, S] -> logits: Tensor[N, V].
        """
        ...


def resolve_special_ids(
    model: IncrementalDecoder,
    bos_id: int | None,
    eos_id: int | None,
    pad_id: int | None,
) -> tuple[int, int, int]:
    """Return (bos_id, eos_id, pad_id): the explicit value, else the model's attribute.

    Each is a token id: >= 0, and below the model's ``tgt_vocab_size`` where it has one. An eos
    the model cannot emit would never end a search, a pad it never holds would hide no padding.
    """
    size = getattr(model, "tgt_vocab_size", None)
    vocab_size = size if isinstance(size, int) and not isinstance(size, bool) else None
    resolved = []
    for name, explicit in (("bos_id", bos_id), ("eos_id", eos_id), ("pad_id", pad_id)):
        value = explicit if explicit is not None else getattr(model, name, None)
        if value is None:
            raise ValueError(
                f"{name}: expected an int, passed explicitly or as model.{name}; "
                f"given None and the model has no attribute {name!r}"
            )
        if not is_integer(value):
            raise ValueError(f"{name}: expected an int, given {value!r}")
        if value < 0 or (vocab_size is not None and value >= vocab_size):
            bound = ">= 0" if vocab_size is None else f"[0, {vocab_size}) (the model's tgt_vocab_size)"
            raise ValueError(f"{name}: expected a token id in {bound}, given {value}")
        resolved.append(int(value))
    return resolved[0], resolved[1], resolved[2]


def clamp_to_positional_table(model: IncrementalDecoder, max_len: int) -> int:
    """`max_len` new tokens, or fewer if the model's positional table (`model.max_len`) ends first.

    The one place that owns the limit. At step t the decoder reads bos plus t tokens,
    positions 0..t, so `model.max_len` new tokens fit exactly: the last one is chosen
    from position `model.max_len - 1` and never fed back. A model without the attribute
    (the tests' fakes) is not capped.
    """
    positions = getattr(model, "max_len", None)
    if isinstance(positions, int) and not isinstance(positions, bool) and positions >= 1:
        return min(max_len, positions)
    return max_len


def check_source_ids(src_ids: Tensor) -> None:
    """Raise a ValueError unless `src_ids` is a non-empty LongTensor[B, S]."""
    if not isinstance(src_ids, Tensor):
        raise ValueError(f"src_ids: expected a LongTensor[B, S], given {type(src_ids).__name__}")
    if src_ids.dim() != 2 or src_ids.dtype != torch.long:
        raise ValueError(
            "src_ids: expected a LongTensor[B, S] (2-D, torch.long), "
            f"given {src_ids.dtype} of shape {tuple(src_ids.shape)}"
        )
    if src_ids.size(0) == 0 or src_ids.size(1) == 0:
        raise ValueError(f"src_ids: expected B >= 1 and S >= 1, given shape {tuple(src_ids.shape)}")


# Steps between two reads of a search's progress on a device whose reads wait for it
# (nn/host_reads.py): each read drains the device's queue, and a row that finished
# meanwhile costs only its share of a batched step until the next read drops it. Not yet
# measured against other values on a GPU.
ACCELERATOR_CHECK_EVERY = 4


def resolve_check_every(check_every: int | None, device: torch.device) -> int:
    """Steps between the search's reads of which rows or sentences are done: ``check_every``, else by device.

    None gives 1 where reads are free (the CPU: finished rows leave the batch at once, the
    least work) and :data:`ACCELERATOR_CHECK_EVERY` where they wait for the device. The
    results are the same whatever the interval: rows done between two reads keep being
    computed, and their outputs are ignored.
    """
    if check_every is None:
        return ACCELERATOR_CHECK_EVERY if host_reads.host_reads_wait(device) else 1
    check_positive("check_every", check_every)
    return check_every


def check_flag(name: str, value: object) -> None:
    """Raise a ValueError unless `value` is a bool ("no" and None would be read as true and false)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name}: expected True or False, given {value!r}")


def check_logits_processor(logits_processor: object) -> None:
    """Raise a TypeError unless ``logits_processor`` is None or callable (checked once, before the first step)."""
    if logits_processor is not None and not callable(logits_processor):
        raise TypeError(
            "logits_processor: expected a callable (step, prefix_ids, log_probs[, src_ids]) -> log_probs, "
            f"given {type(logits_processor).__name__}"
        )


def is_integer(value: object) -> bool:
    """Whether ``value`` is an int of Python or NumPy (``np.int64(3)`` from a sweep over ``np.arange``), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_positive(name: str, value: int) -> None:
    """Raise a ValueError unless `value` is an int (Python's or NumPy's) >= 1."""
    if not is_integer(value) or value < 1:
        raise ValueError(f"{name}: expected an int >= 1, given {value!r}")


def next_token_log_probs(
    model: IncrementalDecoder,
    prefix_ids: Tensor,
    memory: Tensor,
    src_ids: Tensor,
    cache: Any,
    step: int,
    logits_processor: LogitsProcessor | None,
) -> Tensor:
    """Run one decoder step and return float32 next-token log-probs (processor applied).

    Shape:
        prefix_ids: LongTensor[N, t], memory: Tensor[N, S, D], src_ids: LongTensor[N, S]
        -> log_probs: FloatTensor[N, V].
    """
    rows = prefix_ids.size(0)
    logits = model.decode_step(prefix_ids, memory, src_ids, cache=cache)  # [N, V]
    if logits.dim() != 2 or logits.size(0) != rows:
        raise ValueError(f"model.decode_step: expected logits of shape [{rows}, V], " f"given {tuple(logits.shape)}")
    # float32 so that half-precision models do not lose the small differences that
    # decide between beams, and so that scores accumulate without overflow.
    log_probs = torch.log_softmax(logits.float(), dim=-1)  # [N, V]
    if logits_processor is not None:
        processed = apply_logits_processor(logits_processor, step, prefix_ids, log_probs, src_ids)  # [N, V]
        if not isinstance(processed, Tensor) or processed.shape != log_probs.shape:
            given = tuple(processed.shape) if isinstance(processed, Tensor) else type(processed).__name__
            raise ValueError(
                f"logits_processor: expected a tensor of shape {tuple(log_probs.shape)}, " f"given {given}"
            )
        log_probs = processed.float()  # [N, V]
    return log_probs


def apply_logits_processor(
    processor: LogitsProcessor, step: int, prefix_ids: Tensor, log_probs: Tensor, src_ids: Tensor
) -> Tensor:
    """Call ``processor`` the way it asks to be called: with ``src_ids=`` when it sets ``reads_source_ids``.

    Shape: prefix_ids [N, t], log_probs [N, V], src_ids [N, S] -> [N, V].
    """
    if getattr(processor, "reads_source_ids", False):
        # The attribute is the processor's own declaration of the keyword form.
        return cast(SourceReadingLogitsProcessor, processor)(step, prefix_ids, log_probs, src_ids=src_ids)
    return cast(PlainLogitsProcessor, processor)(step, prefix_ids, log_probs)
