"""The Python API: a checkpoint as an object that translates or classifies lists of texts.

    from transformer_lab import Translator
    translator = Translator("runs/de-en")            # a checkpoint folder, or a run folder (its best/)
    translator.translate(["Ein Hund läuft.", "Zwei Männer."], beam=5)
    translator.translate("Ein Hund läuft.", nbest=3)  # [Candidate(text, ids, score, log_prob), ...]

    from transformer_lab import Classifier
    Classifier("runs/news").classify(["Stocks rallied after the Fed cut rates"])[0].label_name

    from transformer_lab import CoupletWriter
    CoupletWriter("runs/couplet").write("晚风摇树树还挺").candidates[0].text

Each call batches its texts by length, as the command line does, and uses the library's
own functions (``tasks.translation``, ``tasks.classification``, ``tasks.couplet``); the settings not given
are the checkpoint's (its ``decode`` section, its precision). A single str gives a single
result, a list a list.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any, overload

import torch

from transformer_lab.data import TokenizerPair
from transformer_lab.decoding import DecodeConfig, decoding_model, with_precision
from transformer_lab.hardware import resolve_inference_precision
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.tasks import classification, couplet, translation
from transformer_lab.tasks.classification import Prediction
from transformer_lab.tasks.couplet import CoupletResult
from transformer_lab.tasks.seq2seq import Candidate


def _texts(texts: str | Sequence[str], name: str) -> list[str]:
    if isinstance(texts, str):
        return [texts]
    texts = list(texts)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"{name}[{index}]: expected a str, got {type(text).__name__}")
    return texts


def decode_settings(
    decode: DecodeConfig,
    beam: int | None = None,
    nbest: int = 1,
    precision: str | None = None,
    length_penalty: float | None = None,
    device: str | torch.device = "cpu",
) -> DecodeConfig:
    """``decode`` (a checkpoint's) with a search of ``beam`` (1: greedy) returning ``nbest``; None keeps a field.

    ``nbest`` > 1 needs beam search with at least as many beams: a ``beam`` below it is a
    ValueError; with ``beam`` None the beam is widened to ``nbest``. ``precision`` (one of
    ``hardware.INFERENCE_PRECISIONS``) is resolved on ``device`` as the commands resolve
    it; "int8" decodes in fp32 around an int8 copy of the model.
    """
    if precision is not None:
        precision = resolve_inference_precision(precision, decode.precision, device)
    if not isinstance(nbest, int) or isinstance(nbest, bool) or nbest < 1:
        raise ValueError(f"nbest: expected an int >= 1, got {nbest!r}")
    if beam is not None:
        if not isinstance(beam, int) or isinstance(beam, bool) or beam < 1:
            raise ValueError(f"beam: expected an int >= 1 (1 is greedy), got {beam!r}")
        if beam < nbest:
            raise ValueError(f"beam: expected at least nbest={nbest}, got {beam}")
        decode = dataclasses.replace(decode, strategy="greedy" if beam == 1 else "beam", beam_size=beam)
    if nbest > 1:
        beam_size = max(nbest, decode.beam_size if decode.strategy == "beam" else 1)
        decode = dataclasses.replace(decode, strategy="beam", beam_size=beam_size)
    changes: dict[str, Any] = {"num_return": nbest}
    if length_penalty is not None:
        changes["length_penalty"] = length_penalty  # DecodeConfig checks it and names the field
    decode = dataclasses.replace(decode, **changes)
    return decode if precision is None else with_precision(decode, precision)


def _model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


class Translator:
    """A translation checkpoint, ready to translate (see the module docstring).

    Attributes: ``model`` (in eval mode on ``device``), ``tokenizers``, ``config`` (the
    checkpoint's, whose ``decode`` section gives the defaults).
    """

    def __init__(self, checkpoint: str | os.PathLike[str], device: str | torch.device = "cpu") -> None:
        model, tokenizers, config = translation.load_translator(checkpoint)
        self.model: Seq2SeqTransformer = model.to(device).eval()
        self.tokenizers: TokenizerPair = tokenizers
        self.config = config
        self._int8: Seq2SeqTransformer | None = None

    @property
    def languages(self) -> tuple[str, str]:
        """(source language, target language) as recorded in the checkpoint."""
        return self.config.data.source_language, self.config.data.target_language

    def decode_config(
        self, beam: int | None = None, nbest: int = 1, precision: str | None = None, length_penalty: float | None = None
    ) -> DecodeConfig:
        """The checkpoint's decoding with these settings applied (None keeps the checkpoint's)."""
        return decode_settings(self.config.decode, beam, nbest, precision, length_penalty, _model_device(self.model))

    def _model(self, precision: str) -> Seq2SeqTransformer:
        """The model to decode with at the resolved ``precision``; the int8 copy is made once."""
        if precision != "int8":
            return decoding_model(self.model, precision)
        if self._int8 is None:
            self._int8 = decoding_model(self.model, precision)
        return self._int8

    @overload
    def translate(
        self,
        sentences: str,
        *,
        beam: int | None = ...,
        nbest: int = ...,
        precision: str | None = ...,
        length_penalty: float | None = ...,
        batch_size: int = ...,
    ) -> Any: ...

    @overload
    def translate(
        self,
        sentences: Sequence[str],
        *,
        beam: int | None = ...,
        nbest: int = ...,
        precision: str | None = ...,
        length_penalty: float | None = ...,
        batch_size: int = ...,
    ) -> list[Any]: ...

    def translate(
        self,
        sentences: str | Sequence[str],
        *,
        beam: int | None = None,
        nbest: int = 1,
        precision: str | None = None,
        length_penalty: float | None = None,
        batch_size: int = 64,
    ) -> Any:
        """The translation of each sentence (``nbest`` 1: a str; more: a list of `Candidate`, best first).

        ``beam`` 1 is greedy search; ``precision`` "fp32", "bf16", "auto" (bf16 where this
        machine runs it fast) or "int8" (CPU). A blank sentence gives "" (no candidates);
        one longer than the model's positional table is a ValueError naming its index.
        """
        texts = _texts(sentences, "sentences")
        resolved = resolve_inference_precision(precision, self.config.decode.precision, _model_device(self.model))
        decode = self.decode_config(beam, nbest, resolved, length_penalty)
        model = self._model(resolved)
        if nbest == 1:
            results: list[Any] = translation.translate_sentences(model, self.tokenizers, texts, decode, batch_size)
        else:
            results = [
                translation.translate_nbest(model, self.tokenizers, text, decode) if text.strip() else []
                for text in texts
            ]
        return results[0] if isinstance(sentences, str) else results


class Classifier:
    """A classification checkpoint, ready to classify (see the module docstring).

    Attributes: ``model`` (in eval mode on ``device``), ``tokenizer``, ``config``, and
    ``class_names`` in the model's order.
    """

    def __init__(self, checkpoint: str | os.PathLike[str], device: str | torch.device = "cpu") -> None:
        model, tokenizer, config = classification.load_classifier(checkpoint)
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.config = config
        self.class_names: tuple[str, ...] = tuple(config.class_names)

    @overload
    def classify(  # type: ignore[overload-overlap]  # a str is a Sequence[str]; it matches first
        self, texts: str, *, precision: str | None = ..., truncate: bool = ...
    ) -> Prediction: ...

    @overload
    def classify(
        self, texts: Sequence[str], *, precision: str | None = ..., truncate: bool = ...
    ) -> list[Prediction]: ...

    def classify(
        self, texts: str | Sequence[str], *, precision: str | None = None, truncate: bool = False
    ) -> Prediction | list[Prediction]:
        """The `Prediction` of each text: its class, class name and every class's probability.

        ``precision`` "fp32", "bf16" or "auto" (None: fp32); ``truncate`` reads only the
        first ``max_len`` tokens of a longer text (else it is a ValueError naming its index).
        """
        resolved = resolve_inference_precision(precision, "fp32", _model_device(self.model), int8=False)
        batch = _texts(texts, "texts")
        results = classification.predict_each(
            self.model, self.tokenizer, self.class_names, batch, truncate=truncate, precision=resolved
        )
        predictions = []
        for index, result in enumerate(results):
            if isinstance(result, str):
                raise ValueError(f"texts[{index}]: {result}")
            predictions.append(result)
        return predictions[0] if isinstance(texts, str) else predictions


class CoupletWriter:
    """A couplet checkpoint (对联), ready to answer upper lines with lower lines.

    ``write`` applies the checkpoint's decoding and form constraints (same length,
    punctuation in place, tones where the checkpoint asks for them), as the ``couplet``
    command does. Attributes: ``model``, ``vocabulary``, ``config``.
    """

    def __init__(self, checkpoint: str | os.PathLike[str], device: str | torch.device = "cpu") -> None:
        model, vocabulary, config = couplet.load(checkpoint)
        self.model: Seq2SeqTransformer = model.to(device).eval()
        self.vocabulary = vocabulary
        self.config = config

    @overload
    def write(  # type: ignore[overload-overlap]  # a str is a Sequence[str]; it matches first
        self, uppers: str, *, beam: int | None = ..., num_candidates: int = ..., precision: str | None = ...
    ) -> CoupletResult: ...

    @overload
    def write(
        self,
        uppers: Sequence[str],
        *,
        beam: int | None = ...,
        num_candidates: int = ...,
        precision: str | None = ...,
    ) -> list[CoupletResult]: ...

    def write(
        self,
        uppers: str | Sequence[str],
        *,
        beam: int | None = None,
        num_candidates: int = 1,
        precision: str | None = None,
    ) -> CoupletResult | list[CoupletResult]:
        """The `CoupletResult` of each upper line: its candidates best first, or ``error`` saying why there are none.

        A line the model cannot answer (empty, Latin letters, too long) gets ``error`` and no
        candidates, not an exception, so that one bad line does not cost the others.
        """
        lines = _texts(uppers, "uppers")
        device = _model_device(self.model)
        resolved = resolve_inference_precision(precision, self.config.decode.precision, device)
        decode = decode_settings(self.config.decode, beam, num_candidates, resolved, device=device)
        model = decoding_model(self.model, resolved)
        results = couplet.generate(
            model, self.vocabulary, lines, decode, self.config.constraints, num_candidates=num_candidates
        )
        return results[0] if isinstance(uppers, str) else results


__all__ = ["Candidate", "Classifier", "CoupletResult", "CoupletWriter", "Prediction", "Translator", "decode_settings"]
