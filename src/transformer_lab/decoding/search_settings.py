"""A checkpoint's decoding with a caller's changes: the search, its precision, and the name reports give it.

The Python API, the commands and the evaluations apply what they were asked (a beam, a length
penalty, a stop rule, a precision) through here, so that one setting means the same everywhere.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import sys
from typing import Any, TypedDict

import torch

from transformer_lab.data._checks import is_integer
from transformer_lab.decoding.config import MAX_BEAM_SIZE, DecodeConfig
from transformer_lab.devices import resolve_device
from transformer_lab.hardware import resolve_inference_precision
from transformer_lab.setting_error import SettingError


class SearchKeywords(TypedDict, total=False):
    """The search keywords of the sequence-to-sequence predictors; None (or absent) keeps the checkpoint's."""

    beam: int | None
    precision: str | None
    length_penalty: float | None
    beam_stop: str | None


def resolved_search(
    decode_config: DecodeConfig,
    device: str | torch.device,
    *,
    beam: int | None = None,
    length_penalty: float | None = None,
    beam_stop: str | None = None,
    precision: str | None = None,
    precision_name: str = "precision",
) -> DecodeConfig:
    """`with_search` with ``precision`` (None: the checkpoint's) resolved on ``device``, its errors naming
    ``precision_name``; the model copy (``decoding_model``) takes the result's precision."""
    precision = resolve_inference_precision(precision, decode_config.precision, device, name=precision_name)
    return with_search(
        decode_config, beam=beam, length_penalty=length_penalty, beam_stop=beam_stop, precision=precision
    )


def check_no_beam_settings(greedy: bool, beam: object, length_penalty: object, beam_stop: object) -> None:
    """A `SettingError` naming ``length_penalty`` or ``beam_stop`` where one is given (not None) to a ``greedy`` search.

    They steer beam search only: with a greedy search they would be accepted and never used.
    ``beam`` is the one asked (None: the checkpoint's search), for the message. The API, the
    server's predictors and every command check here, so that all refuse the same way.
    """
    if not greedy:
        return
    for name, value in (("length_penalty", length_penalty), ("beam_stop", beam_stop)):
        if value is not None:
            search = "{beam} 1" if beam is not None else "the checkpoint's, no {beam} given"
            raise SettingError(
                "{%s}: expected beam search, which it steers, got a greedy search (%s); "
                "give {beam} N (N >= 2) or leave {%s} out" % (name, search, name),
                (name, "beam"),
            )


def check_candidate_count(count: Any, name: str) -> int:
    """The count of candidates (``nbest``, ``num_candidates``): an int in [1, MAX_BEAM_SIZE]; else a SettingError.

    The error names ``name``. Checked here, so that a count too large is not told as the beam_size it widens the search
    to. A NumPy integer (``np.arange``'s) is returned as the Python int DecodeConfig's fields take; a bool is refused.
    """
    if not is_integer(count) or count < 1:
        raise SettingError("{%s}: expected an int >= 1, got {given!r}" % name, (name,), given=count)
    count = int(count)
    if count > MAX_BEAM_SIZE:
        raise SettingError(
            "{%s}: expected at most {limit} (each candidate is a beam), got {given}" % name,
            (name,),
            limit=MAX_BEAM_SIZE,
            given=count,
        )
    return count


def decode_settings(
    decode: DecodeConfig,
    beam: int | None = None,
    nbest: int = 1,
    precision: str | None = None,
    length_penalty: float | None = None,
    device: str | torch.device = "cpu",
    beam_stop: str | None = None,
) -> DecodeConfig:
    """``decode`` (a checkpoint's) with a search of ``beam`` (1: greedy) returning ``nbest``; None keeps a field.

    ``nbest`` > 1 needs beam search with at least as many beams: a ``beam`` below it is a
    `SettingError`; with ``beam`` None the beam is widened to ``nbest``. ``precision`` (one of
    ``hardware.INFERENCE_PRECISIONS``) is resolved on ``device``; "int8" decodes in fp32 around
    an int8 copy of the model. ``beam_stop`` is one of ``decoding.beam.BEAM_STOPS``. ``device`` is
    read as the API's ``device=`` is (``devices.resolve_device``: "auto", "cpu", "cuda", "cuda:N").
    """
    if not isinstance(decode, DecodeConfig):
        raise TypeError(f"decode: expected a DecodeConfig (a checkpoint's config.decode), got {type(decode).__name__}")
    if not isinstance(device, torch.device):
        # Else torch's errors from deep inside: "auto", "gpu" a RuntimeError, "cuda" without CUDA an AssertionError.
        device = resolve_device(device)
    nbest = check_candidate_count(nbest, "nbest")
    if beam is not None:
        beam = _checked_beam(beam)
        if beam < nbest:
            raise SettingError(
                "{nbest} {count}: expected {beam} of at least {count}, got {beam} {given}",
                ("nbest", "beam"),
                count=nbest,
                given=beam,
            )
    decode = resolved_search(
        decode, device, beam=beam, length_penalty=length_penalty, beam_stop=beam_stop, precision=precision
    )
    if nbest > 1:
        beam_size = max(nbest, decode.beam_size if decode.strategy == "beam" else 1)
        decode = dataclasses.replace(decode, strategy="beam", beam_size=beam_size)
    check_no_beam_settings(decode.strategy == "greedy", beam, length_penalty, beam_stop)
    return dataclasses.replace(decode, num_return=nbest)


def with_search(
    decode_config: DecodeConfig,
    *,
    beam: int | None = None,
    length_penalty: float | None = None,
    beam_stop: str | None = None,
    precision: str | None = None,
) -> DecodeConfig:
    """``decode_config`` with a beam (1: greedy), length penalty, stop rule and precision applied (None keeps it).

    ``precision`` is best ``hardware.resolve_inference_precision``'s, resolved once for the model copy too.
    """
    decode_config = with_beam(decode_config, beam)
    if isinstance(length_penalty, numbers.Real) and not isinstance(length_penalty, bool):
        # A NumPy float32 as the float it holds (DecodeConfig takes Python's); an int past a float's range as
        # infinity, which DecodeConfig refuses naming the field (float() raised OverflowError).
        too_large = isinstance(length_penalty, int) and abs(length_penalty) > sys.float_info.max
        length_penalty = math.inf if too_large else float(length_penalty)
    # DecodeConfig checks each value and names the field.
    if precision is not None:
        decode_config = dataclasses.replace(decode_config, precision=precision)
    if length_penalty is not None:
        decode_config = _with_setting(decode_config, "length_penalty", length_penalty)
    if beam_stop is not None:
        decode_config = _with_setting(decode_config, "beam_stop", beam_stop)
    return decode_config


def _with_setting(decode_config: DecodeConfig, setting: str, value: Any) -> DecodeConfig:
    """``decode_config`` with ``setting`` replaced; a value it refuses is a `SettingError` naming the keyword.

    So the command line names the option typed (``--length-penalty``), the API the keyword.
    """
    try:
        return dataclasses.replace(decode_config, **{setting: value})
    except ValueError as error:
        reason = str(error).removeprefix(f"{setting}: ").replace("{", "{{").replace("}", "}}")
        raise SettingError(f"{{{setting}}}: {reason}", (setting,)) from None


def with_beam(decode_config: DecodeConfig, beam: int | None) -> DecodeConfig:
    """``decode_config`` with the search ``--beam`` asks for (None keeps it; 1 is greedy)."""
    if beam is None:
        return decode_config
    beam = _checked_beam(beam)
    if beam > MAX_BEAM_SIZE:  # here, so the command line names --beam and the API beam, not the field beam_size
        raise SettingError("{beam}: expected at most {limit}, got {given}", ("beam",), limit=MAX_BEAM_SIZE, given=beam)
    return dataclasses.replace(decode_config, strategy="greedy" if beam == 1 else "beam", beam_size=beam, num_return=1)


def _checked_beam(beam: object) -> int:
    """``beam`` as a Python int (a NumPy integer taken too), or a `SettingError` unless it is >= 1.

    One message for every value refused; a bool is one (True is no beam of 1).
    """
    if not is_integer(beam) or beam < 1:
        raise SettingError("{beam}: expected an int >= 1 (1 is greedy), got {given!r}", ("beam",), given=beam)
    return int(beam)


def search_name(decode_config: DecodeConfig, precision: str) -> str:
    """The search's name for reports and file names: "greedy" or "beam K", then " bf16" or " int8" where not fp32.

    ``precision`` is ``hardware.resolve_inference_precision``'s, already resolved.
    """
    name = "greedy" if decode_config.strategy == "greedy" else f"beam {decode_config.beam_size}"
    return name if precision == "fp32" else f"{name} {precision}"
