"""What the tasks' Python API objects share: the texts they take, a checkpoint's decoding with a caller's settings.

Each object (``Translator``, ...) lives in its task's ``predict.py``, built from what the task's
``load`` rebuilds (its `Task`'s ``predictor``); ``transformer_lab.api`` opens each from a checkpoint.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch

from transformer_lab.decoding import DecodeConfig, decoding_model
from transformer_lab.decoding.search_settings import with_search
from transformer_lab.devices import resolve_device
from transformer_lab.hardware import resolve_inference_precision
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.setting_error import SettingError
from transformer_lab.tasks.evaluation import BEAM, BEAM_STOP, DECODE_PRECISION, LENGTH_PENALTY


def texts_of(texts: str | Sequence[str], name: str) -> list[str]:
    """``texts`` as a list (a single str: a list of one); an item that is no str is a ValueError naming ``name[i]``."""
    if isinstance(texts, str):
        return [texts]
    if isinstance(texts, (Mapping, bytes, bytearray)) or not isinstance(texts, Iterable):
        # list() of a dict is its keys, of bytes its numbers: neither is a list of texts.
        raise ValueError(f"{name}: expected a str or a sequence of str, got {type(texts).__name__}")
    texts = list(texts)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"{name}[{index}]: expected a str, got {type(text).__name__}")
    return texts


def text_of(text: object, name: str) -> str:
    """``text`` itself if it is a str; anything else is a ValueError naming ``name``."""
    if not isinstance(text, str):
        raise ValueError(f"{name}: expected a str, got {type(text).__name__}")
    return text


def is_int(value: object) -> bool:
    """Whether ``value`` is an int and not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def search_keywords(options: Mapping[str, Any]) -> dict[str, Any]:
    """The search options among ``options`` (flag -> value, ``DECODE_OPTIONS``) as the API objects' keywords.

    An option not given is None: the checkpoint's setting.
    """
    return {
        "beam": options.get(BEAM.flag),
        "precision": options.get(DECODE_PRECISION.flag),
        "length_penalty": options.get(LENGTH_PENALTY.flag),
        "beam_stop": options.get(BEAM_STOP.flag),
    }


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
    ``hardware.INFERENCE_PRECISIONS``) is resolved on ``device`` as the commands resolve
    it; "int8" decodes in fp32 around an int8 copy of the model. ``length_penalty`` is
    beam search's GNMT alpha; ``beam_stop`` one of ``decoding.beam.BEAM_STOPS``.
    """
    # The one resolution of the call: the model copy (Seq2SeqPredictor.decoding) and decode() take its result.
    precision = resolve_inference_precision(precision, decode.precision, device)
    if not is_int(nbest) or nbest < 1:
        raise SettingError("{nbest}: expected an int >= 1, got {given!r}", ("nbest",), given=nbest)
    if beam is not None:
        if not is_int(beam):
            raise SettingError("{beam}: expected an int >= 1 (1 is greedy), got {given!r}", ("beam",), given=beam)
        if beam < 1:
            raise SettingError("{beam} must be >= 1, got {given}", ("beam",), given=beam)
        if beam < nbest:
            raise SettingError(
                "{nbest} {count}: expected {beam} of at least {count}, got {beam} {given}",
                ("nbest", "beam"),
                count=nbest,
                given=beam,
            )
    # The search, its penalty, stop rule and precision as every command applies them; DecodeConfig checks each value.
    decode = with_search(decode, beam=beam, length_penalty=length_penalty, beam_stop=beam_stop, precision=precision)
    if nbest > 1:
        beam_size = max(nbest, decode.beam_size if decode.strategy == "beam" else 1)
        decode = dataclasses.replace(decode, strategy="beam", beam_size=beam_size)
    return dataclasses.replace(decode, num_return=nbest)


class Seq2SeqPredictor:
    """What `Translator` and `CoupletWriter` share: the model, its decoding settings, its lower-precision copies."""

    def __init__(self, model: Seq2SeqTransformer, decode: DecodeConfig, device: str | torch.device) -> None:
        self.model: Seq2SeqTransformer = model.to(device).eval()
        self._decode = decode  # the checkpoint's
        self._copies: dict[str, Seq2SeqTransformer] = {}

    def decode_config(
        self,
        beam: int | None = None,
        nbest: int = 1,
        precision: str | None = None,
        length_penalty: float | None = None,
        beam_stop: str | None = None,
    ) -> DecodeConfig:
        """The checkpoint's decoding with these settings (None keeps the checkpoint's); see `decode_settings`."""
        device = next(self.model.parameters()).device
        return decode_settings(self._decode, beam, nbest, precision, length_penalty, device, beam_stop)

    def decoding(
        self,
        beam: int | None = None,
        nbest: int = 1,
        precision: str | None = None,
        length_penalty: float | None = None,
        beam_stop: str | None = None,
    ) -> tuple[Seq2SeqTransformer, DecodeConfig]:
        """The model to decode with and its decoding, ``precision`` resolved once for both.

        A bf16 or int8 copy of the model is made once, then reused; fp32 runs the model itself.
        """
        decode = self.decode_config(beam, nbest, precision, length_penalty, beam_stop)
        if decode.precision not in self._copies:
            self._copies[decode.precision] = decoding_model(self.model, decode.precision)
        return self._copies[decode.precision], decode


def load_on(
    load: Callable[[str | os.PathLike[str]], tuple[Any, Any, Any]],
    checkpoint: str | os.PathLike[str],
    device: str | torch.device,
) -> tuple[Any, Any, Any, torch.device]:
    """(model, vocabulary, config, device): what ``load`` rebuilds from ``checkpoint``, and ``device`` resolved."""
    resolved = resolve_device(device)  # before the load: a device this machine lacks costs nothing
    return (*load(checkpoint), resolved)
