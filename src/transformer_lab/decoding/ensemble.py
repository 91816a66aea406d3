"""Decoding with several models at once: the average of their next-token probabilities.

An ensemble of models trained apart (other seeds, other settings) on the same vocabulary
ranks continuations better than any one of them; averaging probabilities, not
log-probabilities, is fairseq's rule. `Ensemble` follows `IncrementalDecoder`, so greedy and
beam search decode it as they decode one model, with every member's key/value cache.

Shape legend: B batch, S source length, D_i member i's d_model, N decoded rows, t prefix length,
V target vocabulary, M members.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import torch
from torch import Tensor, nn

from transformer_lab.data import TokenizerPair
from transformer_lab.decoding.protocol import DecoderCache, IncrementalDecoder

# What every member must share: the searches read them from the ensemble as from one model.
SHARED_ATTRIBUTES = ("bos_id", "eos_id", "pad_id", "tgt_vocab_size")


class EnsembleCache:
    """One cache per member, reordered together: a beam's rows stay in step across the members."""

    def __init__(self, caches: list[DecoderCache]) -> None:
        self.caches = caches

    def reorder(self, index: Tensor, include_static: bool = True) -> None:
        for cache in self.caches:
            cache.reorder(index, include_static)


class Ensemble(nn.Module):
    """Models decoded as one: next-token log-probabilities are the log of the members' mean probability.

    The members must share the special ids and the target vocabulary size (a ValueError names the
    member and the attribute that differs); their sources must be encoded with one vocabulary, which
    the caller checks (the models do not know their tokenizers). ``max_len`` is the shortest member's.
    """

    def __init__(self, members: Sequence[nn.Module]) -> None:
        super().__init__()
        if len(members) < 2:
            raise ValueError(f"members: expected at least 2 models to ensemble, given {len(members)}")
        first = members[0]
        for number, member in enumerate(members):
            if not isinstance(member, IncrementalDecoder):
                raise ValueError(
                    f"members[{number}]: expected a model with encode, new_cache and decode_step, "
                    f"given a {type(member).__name__}"
                )
            for name in SHARED_ATTRIBUTES:
                if getattr(member, name, None) != getattr(first, name, None):
                    raise ValueError(
                        f"members[{number}].{name}: expected {getattr(first, name, None)!r} as members[0] has, "
                        f"given {getattr(member, name, None)!r}"
                    )
        self.members = nn.ModuleList(members)
        decoder = cast(IncrementalDecoder, first)
        self.bos_id: int = decoder.bos_id
        self.eos_id: int = decoder.eos_id
        self.pad_id: int = decoder.pad_id
        self.tgt_vocab_size: int | None = getattr(first, "tgt_vocab_size", None)
        # The positions every member can read (clamp_to_positional_table); a model without the
        # attribute (the tests' fakes) has no limit.
        limits = [getattr(member, "max_len", None) for member in members]
        if all(isinstance(limit, int) for limit in limits):
            self.max_len = min(cast(list[int], limits))
        # Each member's share of the joint memory's last dimension, set by encode().
        self._widths: list[int] = []

    def encode(self, src_ids: Tensor) -> Tensor:
        """The members' memories side by side: the searches select and repeat rows only.

        Shape: src_ids [B, S] -> memory [B, S, D_1 + ... + D_M].
        """
        memories = [member.encode(src_ids) for member in self._decoders()]  # M x [B, S, D_i]
        self._widths = [memory.size(-1) for memory in memories]
        return torch.cat(memories, dim=-1)

    def new_cache(self) -> EnsembleCache:
        return EnsembleCache([member.new_cache() for member in self._decoders()])

    def _decoders(self) -> list[IncrementalDecoder]:
        return [cast(IncrementalDecoder, member) for member in self.members]

    def decode_step(self, tgt_prefix_ids: Tensor, memory: Tensor, src_ids: Tensor, cache: Any = None) -> Tensor:
        """log(mean of the members' probabilities), in float32; already normalised, so a log-softmax keeps it.

        Shape: tgt_prefix_ids [N, t], memory [N, S, sum D_i], src_ids [N, S] -> [N, V].
        """
        if sum(self._widths) != memory.size(-1):
            raise ValueError(
                f"memory: expected the ensemble's own encoding ({sum(self._widths)} features), "
                f"given {memory.size(-1)}: call encode first"
            )
        log_probs = []
        for number, (member, member_memory) in enumerate(zip(self._decoders(), memory.split(self._widths, dim=-1))):
            member_cache = None if cache is None else cache.caches[number]
            logits = member.decode_step(tgt_prefix_ids, member_memory, src_ids, cache=member_cache)  # [N, V]
            log_probs.append(torch.log_softmax(logits.float(), dim=-1))
        stacked = torch.stack(log_probs)  # [M, N, V]
        return torch.logsumexp(stacked, dim=0) - math.log(len(log_probs))  # [N, V]


def check_same_tokens(
    name: str, first: tuple[TokenizerPair, tuple[str, str]], member: tuple[TokenizerPair, tuple[str, str]]
) -> None:
    """Refuse a member whose (tokenizers, (source language, target language)) are not the first model's.

    Token ids mean the same only under the same vocabulary; the error starts with ``name``.
    """
    (tokenizers, languages), (member_tokenizers, member_languages) = first, member
    if member_languages != languages:
        raise ValueError(
            f"{name}: expected a model translating {'->'.join(languages)} as the first model does, "
            f"given one translating {'->'.join(member_languages)}"
        )
    for side in ("source", "target"):
        if getattr(member_tokenizers, side).to_json() != getattr(tokenizers, side).to_json():
            raise ValueError(
                f"{name}: expected the first model's {side} vocabulary (the models must share their token ids), "
                "given another one"
            )


def member_paths(checkpoints: object, name: str) -> list[Any]:
    """The checkpoints (or run folders) to add to a model as a list of one or more; else an error naming ``name``.

    One path (a str, bytes or a ``Path``) is refused, not read as the folders its characters name.
    """
    if isinstance(checkpoints, (str, bytes, os.PathLike)):
        raise ValueError(f"{name}: expected a list of one checkpoint or more, got {checkpoints!r}")
    if isinstance(checkpoints, Mapping) or not isinstance(checkpoints, Iterable):  # a dict's keys or its values?
        raise TypeError(
            f"{name}: expected a list of checkpoint paths, got {type(checkpoints).__name__} {checkpoints!r}"
        )
    paths = list(checkpoints)
    if not paths:
        raise ValueError(f"{name}: expected a list of one checkpoint or more, got {checkpoints!r}")
    return paths


def distinct_members(members: Sequence[nn.Module], paths: Sequence[Any], name: str) -> Sequence[nn.Module]:
    """``members`` (a model, then the model of each of ``paths``), refused where one has an earlier one's weights.

    The same folder twice, a run folder and its best/, a copy: a model ensembled with itself
    decodes as it does alone, and one given twice weighs twice in the average. The error
    starts with ``name`` and the path.
    """
    names = ["the checkpoint it joins", *(f"{name} {path}" for path in paths)]
    for number, member in enumerate(members):
        twin = next((earlier for earlier in range(number) if _same_weights(members[earlier], member)), None)
        if twin is not None:
            why = (
                "ensembled with itself, a model decodes as it does alone"
                if twin == 0
                else "given twice, a model weighs twice in the average"
            )
            raise ValueError(
                f"{names[number]}: expected a model other than {names[twin]}, got the same weights ({why})"
            )
    return members


def _same_weights(first: nn.Module, second: nn.Module) -> bool:
    """Whether two models hold equal tensors under the same names (shapes first: other sizes differ at once)."""
    tensors, others = first.state_dict(), second.state_dict()
    if tensors.keys() != others.keys():
        return False
    return all(tensors[key].shape == others[key].shape and torch.equal(tensors[key], others[key]) for key in tensors)
