"""The decoding configuration, and `decode`, which runs the search it names.

Shape legend: B batch, S source length, L generated length.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import Tensor, nn

from transformer_lab.decoding.beam import beam_search, check_beam_stop
from transformer_lab.decoding.greedy import greedy_search
from transformer_lab.decoding.length_limits import RowLengthLimit
from transformer_lab.decoding.output import DecodeOutput, check_length_penalty
from transformer_lab.decoding.protocol import (
    IncrementalDecoder,
    LogitsProcessor,
    check_flag,
    check_positive,
    check_source_ids,
    is_integer,
    resolve_special_ids,
)
from transformer_lab.hardware import INFERENCE_PRECISIONS, autocast, resolve_inference_precision
from transformer_lab.models.bfloat16 import as_bf16
from transformer_lab.models.quantization import holds_int8, int8_for_inference

STRATEGIES = ("greedy", "beam")
MAX_BEAM_SIZE = 64


@dataclass
class DecodeConfig:
    """How to decode: the search, its width, the length limit and the length penalty."""

    # "greedy" or "beam".
    strategy: str = "beam"
    # Beams per sentence (beam search only, at most 64); 4-6 is the usual range for translation.
    beam_size: int = 5
    # Most new tokens per sentence (eos included), the hard cap whatever max_len_a/b say;
    # the searches also stop at the model's positional table (model.max_len).
    max_len: int = 128
    # When either is set, the limit is min(max_len, int(max_len_a * src_len) + max_len_b),
    # src_len being each sentence's own non-pad length (an unset one counts 0);
    # translation often uses a=1.2, b=10 so that short inputs stop early.
    max_len_a: float | None = None
    max_len_b: int | None = None
    # GNMT alpha in ((5 + length) / 6) ** alpha, in [0, 10]; 0 ranks by raw log-prob, 0.6 as in GNMT.
    length_penalty: float = 0.6
    # Hypotheses returned per sentence (n-best, beam search only); at most beam_size.
    num_return: int = 1
    # When beam search stops a sentence: "exact" when its n-best list can no longer change;
    # "finished" once beam_size of its hypotheses have ended (fairseq's and CTranslate2's
    # rule: fewer steps, not exact). See decoding/beam.py.
    beam_stop: str = "exact"
    # Decode incrementally with the key/value cache; False re-runs the whole prefix.
    use_cache: bool = True
    # "bf16" runs the search on a bf16 copy of the model (models/bfloat16.py: the products
    # read bf16 weights: faster with many rows on a CPU with bf16 instructions, slower at one
    # row, far slower on an AVX2-only CPU); log-probabilities and scores stay float32.
    # "fp32" is exact. The outputs can differ where two candidates nearly tie. "auto"
    # (the presets' choice) is bf16 where the device has fast bf16 matrix products, else
    # fp32 (transformer_lab.hardware). docs/results.md#bf16-decoding has the figures.
    # "int8" decodes an int8 copy (models/quantization.py, CPU) in fp32 arithmetic.
    precision: str = "fp32"

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Refuse a field out of its range, naming it; :func:`decode` checks again, as fields can be set later.

        A NumPy int is taken as the Python int it holds (config.json could not hold it).
        """
        for name in ("beam_size", "max_len", "num_return", "max_len_b"):
            if is_integer(getattr(self, name)):
                setattr(self, name, int(getattr(self, name)))
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy: expected one of {STRATEGIES}, given {self.strategy!r}")
        check_positive("beam_size", self.beam_size)
        if self.beam_size > MAX_BEAM_SIZE:
            # Each beam is a decoded row: 10,000 beams took 1 GB and 28 s on a tiny model.
            raise ValueError(
                f"beam_size: expected at most {MAX_BEAM_SIZE} (the field uses 4-10), given {self.beam_size}"
            )
        check_positive("max_len", self.max_len)
        check_positive("num_return", self.num_return)
        if self.num_return > self.beam_size:
            raise ValueError(f"num_return: expected at most beam_size ({self.beam_size}), " f"given {self.num_return}")
        # A range, not math.isfinite: compared exactly, an int past a float's range is refused, not an OverflowError.
        if self.max_len_a is not None and (
            not isinstance(self.max_len_a, (int, float)) or not 0 <= self.max_len_a <= sys.float_info.max
        ):
            raise ValueError(f"max_len_a: expected a finite float >= 0 or None, given {self.max_len_a!r}")
        if self.max_len_b is not None and (isinstance(self.max_len_b, bool) or not isinstance(self.max_len_b, int)):
            raise ValueError(f"max_len_b: expected an int or None, given {self.max_len_b!r}")
        check_length_penalty(self.length_penalty)
        check_beam_stop(self.beam_stop, "beam_stop")
        check_flag("use_cache", self.use_cache)
        if self.precision not in INFERENCE_PRECISIONS:
            raise ValueError(f"precision: expected one of {INFERENCE_PRECISIONS}, given {self.precision!r}")

    def max_new_tokens(self, src_len: int) -> int:
        """The most new tokens for a source of `src_len` tokens (see max_len_a/b)."""
        if self.max_len_a is None and self.max_len_b is None:
            return self.max_len
        if isinstance(src_len, bool) or not isinstance(src_len, int) or src_len < 0:
            raise ValueError(f"src_len: expected an int >= 0, given {src_len!r}")
        scaled = int((self.max_len_a or 0.0) * src_len) + (self.max_len_b or 0)
        limit = min(self.max_len, scaled)
        if limit < 1:
            raise ValueError(
                f"max_len_a/max_len_b: expected a limit >= 1 for src_len {src_len}, "
                f"given a={self.max_len_a}, b={self.max_len_b} (limit {limit})"
            )
        return limit


def decode(
    model: IncrementalDecoder,
    src_ids: Tensor,
    config: DecodeConfig,
    *,
    bos_id: int | None = None,
    eos_id: int | None = None,
    pad_id: int | None = None,
    logits_processor: LogitsProcessor | None = None,
) -> DecodeOutput:
    """Run the search `config.strategy` names, with the config's settings.

    Shape:
        src_ids: LongTensor[B, S] -> DecodeOutput (best_ids [B, L], one hypothesis list
        per sentence) whatever the strategy.
    """
    check_source_ids(src_ids)
    if not isinstance(config, DecodeConfig):
        raise TypeError(f"config: expected a DecodeConfig, got {type(config).__name__}")
    # A config is a mutable dataclass: strategy = "Greedy" set after it was built ran beam search.
    config.check()
    bos_id, eos_id, pad_id = resolve_special_ids(model, bos_id, eos_id, pad_id)
    max_lengths = None
    if config.max_len_a is None and config.max_len_b is None:
        max_len = config.max_len
    else:
        lengths = (src_ids != pad_id).sum(dim=1).tolist()  # [B]
        limits = [config.max_new_tokens(int(length)) for length in lengths]
        max_len = max(limits)
        # Each row stops at its own limit, so that its output does not depend on the other
        # sentences of the batch.
        if min(limits) < max_len and config.strategy == "beam":
            # Beam search takes the limits itself: a forced eos would add its log-probability
            # and one token to the scores, and so rerank the n-best list.
            max_lengths = limits
        elif min(limits) < max_len:
            # Greedy search: eos forced at the limit (length_limits.py); the longest runs one longer.
            logits_processor = RowLengthLimit(
                config.max_len_a, config.max_len_b, config.max_len, eos_id, pad_id, logits_processor
            )
            max_len = min(max_len + 1, config.max_len)
    precision = _settled(config.precision, src_ids.device)
    if _runs_bf16_copy(model, precision, src_ids.device):
        # A bf16 copy rather than autocast, so that the decoder's single-position step
        # applies (models/bfloat16.py). Callers that decode often make the copy once
        # (decoding_model) and pass it; given a float model, each call copies it.
        assert isinstance(model, nn.Module)
        return _search(as_bf16(model), src_ids, config, max_len, bos_id, eos_id, pad_id, logits_processor, max_lengths)
    # Under autocast (a model that is no nn.Module, an int8 copy, or an autocast the caller
    # opened) autocast's own rules keep log_softmax (and so every score) in float32.
    with autocast("fp32" if precision == "int8" else precision, src_ids.device):
        return _search(model, src_ids, config, max_len, bos_id, eos_id, pad_id, logits_processor, max_lengths)


ModelType = TypeVar("ModelType", bound=nn.Module)


def decoding_model(model: ModelType, precision: str) -> ModelType:
    """The model that :func:`decode` at ``precision`` runs: a bf16 or int8 copy where it asks for one, else ``model``.

    :func:`decode` makes the bf16 copy itself at every call when given the float model; a
    caller that decodes many times (a command, a server, a loop over batches) makes it once
    here. "int8" gives an int8 copy (``models.quantization``, CPU only). A copy already
    made is returned as it is, and so is the model under an autocast the caller opened
    (decode then runs it under that autocast).
    """
    parameter = next(model.parameters(), None)
    device = parameter.device if parameter is not None else torch.device("cpu")
    precision = _settled(precision, device)
    if precision == "int8":
        return model if holds_int8(model) else int8_for_inference(model)
    return as_bf16(model) if _runs_bf16_copy(model, precision, device) else model


def _settled(precision: str, device: torch.device) -> str:
    # Callers resolve a precision once per call (hardware.resolve_inference_precision) and
    # pass the result down; only a config nobody resolved still says "auto".
    if precision not in INFERENCE_PRECISIONS:  # "BF16" or "fp16" gave the fp32 model without a word
        raise ValueError(f"precision: expected one of {INFERENCE_PRECISIONS}, given {precision!r}")
    return resolve_inference_precision(None, precision, device) if precision == "auto" else precision


def _runs_bf16_copy(model: object, precision: str, device: torch.device) -> bool:
    """Whether :func:`decode` at the resolved ``precision`` runs a bf16 copy of ``model`` rather than autocast.

    Autocast stays for a model that is no ``nn.Module``, for an int8 copy (its quantized
    layers have no bf16 form) and where the caller has opened an autocast on ``device``.
    """
    return (
        precision == "bf16"
        and isinstance(model, nn.Module)
        and not holds_int8(model)
        and not torch.is_autocast_enabled(device.type)
    )


def _search(
    model: IncrementalDecoder,
    src_ids: Tensor,
    config: DecodeConfig,
    max_len: int,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    logits_processor: LogitsProcessor | None,
    max_lengths: list[int] | None = None,
) -> DecodeOutput:
    if config.strategy == "greedy":
        return greedy_search(
            model,
            src_ids,
            max_len,
            bos_id=bos_id,
            eos_id=eos_id,
            pad_id=pad_id,
            use_cache=config.use_cache,
            logits_processor=logits_processor,
            length_penalty=config.length_penalty,
        )
    return beam_search(
        model,
        src_ids,
        config.beam_size,
        max_len,
        length_penalty=config.length_penalty,
        num_return=config.num_return,
        bos_id=bos_id,
        eos_id=eos_id,
        pad_id=pad_id,
        use_cache=config.use_cache,
        logits_processor=logits_processor,
        stop=config.beam_stop,
        max_lengths=max_lengths,
    )
