"""What the sequence-to-sequence predictors (`Translator`, `CoupletWriter`) and their server panes share.

A predictor holds a checkpoint's model and config; it decodes with the checkpoint's settings
changed by a caller's (`search_settings.decode_settings`) and reads the attention of what it wrote.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, cast

import torch

from transformer_lab.decoding.config import DecodeConfig, decoding_model
from transformer_lab.decoding.ensemble import Ensemble
from transformer_lab.decoding.search_settings import decode_settings
from transformer_lab.decoding.sources import DecodedModel
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.models.attention_maps import AttentionMap, last_layer_map

# What a task's predictor tells about the output it writes for one input (see Seq2SeqPredictor._written):
# source ids, the ids written, the source labels, the written labels, the figure title's start.
Written = tuple[Sequence[int], Sequence[int], list[str], list[str], str]


class Seq2SeqPredictor:
    """A checkpoint's model (in eval mode on ``device``) and ``config``, whose ``decode`` gives the defaults.

    The model may be an `Ensemble` of several checkpoints' models, decoded as one.
    """

    def __init__(self, model: DecodedModel, config: Any, device: str | torch.device) -> None:
        self.model: DecodedModel = model.to(device).eval()
        self.config = config
        # precision -> (the model's weights when copied, the copy); see `decoding`.
        self._copies: dict[str, tuple[tuple[object, ...], DecodedModel]] = {}

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
        return decode_settings(self.config.decode, beam, nbest, precision, length_penalty, device, beam_stop)

    def decoding(
        self,
        beam: int | None = None,
        nbest: int = 1,
        precision: str | None = None,
        length_penalty: float | None = None,
        beam_stop: str | None = None,
    ) -> tuple[DecodedModel, DecodeConfig]:
        """The model to decode with and its decoding, ``precision`` resolved once for both.

        A bf16 or int8 copy of the model is made once, then reused while ``model`` keeps its
        weights; fp32 runs the model itself.
        """
        decode = self.decode_config(beam, nbest, precision, length_penalty, beam_stop)
        weights = _weights_state(self.model)
        cached = self._copies.get(decode.precision)
        if cached is None or cached[0] != weights:
            # Weights loaded into ``model`` (load_state_dict, a training step) or a model put in its place
            # would otherwise still be answered by the copy of the old ones.
            cached = (weights, decoding_model(self.model, decode.precision))
            self._copies[decode.precision] = cached
        return cached[1], decode

    def attention_map(
        self,
        text: str,
        *,
        name: str | None = None,
        beam: int | None = None,
        precision: str | None = None,
        length_penalty: float | None = None,
        beam_stop: str | None = None,
    ) -> AttentionMap:
        """Answer ``text``, then read its last decoder layer's cross-attention (mean of heads).

        The rows are the ids the model generated with these settings (not its answer encoded
        again, which can split differently); an input the task refuses is a ValueError naming
        it as ``name`` (a command's "input 1" or "F: line 3"; None: as the task's keyword). An
        ensemble's map is the mean of its members' maps over the ids it wrote together.
        """
        text = self._plotted(text, name)
        model, decode = self.decoding(beam, 1, precision, length_penalty, beam_stop)
        source_ids, target_ids, columns, rows, title = self._written(model, decode, text, name)
        members = list(model.members) if isinstance(model, Ensemble) else [model]
        maps = [
            last_layer_map(cast(Seq2SeqTransformer, member), source_ids, target_ids, columns, rows, title)
            for member in members
        ]
        if len(maps) == 1:
            return maps[0]
        weights = torch.stack([each.weights for each in maps]).mean(dim=0)  # [T, S]
        return dataclasses.replace(maps[0], weights=weights, title=f"{maps[0].title}, mean of {len(maps)} models")

    def _plotted(self, text: object, name: str | None) -> str:
        """``text`` checked before any decoding, named ``name`` (None: as the task's keyword)."""
        raise NotImplementedError

    def _written(self, model: DecodedModel, decode: DecodeConfig, text: str, name: str | None) -> Written:
        """What ``model`` writes for ``text`` with ``decode``, labelled (see `Written`); a refusal names ``name``."""
        raise NotImplementedError


def _weights_state(model: torch.nn.Module) -> tuple[object, ...]:
    """What changes when ``model``'s weights do: each tensor's identity, storage and in-place write count.

    ``Tensor._version`` counts in-place writes (``copy_`` in ``load_state_dict``, an optimizer's step);
    reading it costs no device synchronisation. An inference tensor keeps no count: a new object
    stands for it, equal to nothing, so such a model is copied at every call.
    """
    tensors = [*model.parameters(), *model.buffers()]
    writes = [object() if tensor.is_inference() else tensor._version for tensor in tensors]
    return (id(model), *((id(tensor), tensor.data_ptr(), count) for tensor, count in zip(tensors, writes)))


class Seq2SeqHandler:
    """A server pane over a `Seq2SeqPredictor`, decoding with the checkpoint's settings."""

    def __init__(self, predictor: Seq2SeqPredictor) -> None:
        self.predictor = predictor
        # The model copy the checkpoint's decoding runs (made once) and that decoding, its precision resolved.
        model, self._decode = predictor.decoding()
        if not isinstance(model, Seq2SeqTransformer):  # the panes draw one model's attention
            raise ValueError(f"predictor: expected one checkpoint's model to serve, got a {type(model).__name__}")
        self._model: Seq2SeqTransformer = model

    def describe(self) -> dict[str, Any]:
        model = self.predictor.config.model
        return {"layers": model.num_decoder_layers, "heads": model.nhead}
