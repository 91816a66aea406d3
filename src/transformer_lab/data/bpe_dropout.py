"""BPE dropout on ids already encoded: a token split, with probability p, into the two its merge joined.

BPE dropout (Provilkov et al., 2020) makes a word appear in many segmentations during
training, so that a model on little data meets the pieces of its words and not only their
one fixed encoding. The paper drops merges while segmenting text; here the drop is made on
the ids a prepared corpus already holds, top down: each token that a merge made is
replaced, with probability ``p``, by the two tokens that merge joined, and each of those is
split again with probability ``p``, down to the bytes. Every result is a segmentation the
BPE's merges can build, decodes to the same text, and needs no text: a corpus of any size
keeps its memory-mapped ids. Inference encodes without dropout.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from transformer_lab.data.subword import SubwordTokenizer

__all__ = ["MergeTree", "PairSplit", "check_dropout"]

IdPair = tuple[list[int], list[int]]  # (source ids, target ids)


def check_dropout(name: str, probability: object) -> float:
    """``probability`` as a float in [0, 1); else a ValueError naming ``name``."""
    if isinstance(probability, bool) or not isinstance(probability, (int, float)) or not 0 <= probability < 1:
        raise ValueError(f"{name}: expected a probability in [0, 1) (0 = off; the paper's 0.1), got {probability!r}")
    return float(probability)


@dataclass(frozen=True)
class MergeTree:
    """For every id, the two ids its merge joined (-1 for a byte, a special or a token of no merge)."""

    left: np.ndarray  # [V] int64
    right: np.ndarray  # [V] int64

    @classmethod
    def of(cls, tokenizer: SubwordTokenizer, name: str = "data.bpe_dropout") -> MergeTree:
        """The merges of ``tokenizer``, a BPE; another model type is refused naming ``name``."""
        if tokenizer.model_type != "BPE":
            raise ValueError(
                f"{name}: expected a BPE tokenizer to split tokens by its merges, got {tokenizer.model_type}"
            )
        model = json.loads(tokenizer.tokenizer.to_str())["model"]
        vocabulary: dict[str, int] = model["vocab"]
        size = tokenizer.vocab_size
        left = np.full(size, -1, dtype=np.int64)
        right = np.full(size, -1, dtype=np.int64)
        for merge in model["merges"]:
            first, second = merge.split(" ", 1) if isinstance(merge, str) else merge
            joined = vocabulary.get(first + second)
            # The first merge that builds an entry is the one encoding applies (merges in rank order).
            if joined is not None and joined < size and left[joined] < 0:
                left[joined], right[joined] = vocabulary[first], vocabulary[second]
        return cls(left, right)

    def split(self, ids: np.ndarray, probability: float, generator: np.random.Generator) -> np.ndarray:
        """``ids`` [L] with each merged token split top down as the module docstring says; [L'] with L' >= L."""
        ids = np.asarray(ids, dtype=np.int64)
        # Only the tokens not yet drawn for (the input, then the halves of each split) draw.
        fresh = np.ones(len(ids), dtype=bool)
        while probability > 0:
            chosen = fresh & (self.left[ids] >= 0) & (generator.random(len(ids)) < probability)
            if not chosen.any():
                return ids
            widths = 1 + chosen  # [L]: two places for a split token, one for the others
            starts = np.cumsum(widths) - widths
            split_ids = np.repeat(ids, widths)
            fresh = np.zeros(len(split_ids), dtype=bool)
            for offset, halves in ((0, self.left), (1, self.right)):
                split_ids[starts[chosen] + offset] = halves[ids[chosen]]
                fresh[starts[chosen] + offset] = True
            ids = split_ids
        return ids


@dataclass(frozen=True)
class PairSplit:
    """BPE dropout for a run's training pairs: each side's merges, ``probability``, and the draw's seed.

    The draw of batch ``position`` in ``epoch`` is seeded by (seed, epoch, position), so a
    resumed run splits its batches as the uninterrupted run did. A pair whose split side
    would pass ``longest`` ids (the positional table's room) keeps its ids as they are.
    """

    source: MergeTree
    target: MergeTree
    probability: float
    seed: int
    longest: int

    def pairs(
        self, pairs: list[tuple[list[int], list[int]]], epoch: int, position: int
    ) -> list[tuple[list[int], list[int]]]:
        generator = np.random.default_rng((self.seed, epoch, position))
        split_pairs = []
        for source, target in pairs:
            split_source = self.source.split(np.asarray(source), self.probability, generator)
            split_target = self.target.split(np.asarray(target), self.probability, generator)
            fits = max(len(split_source), len(split_target)) <= self.longest
            split_pairs.append((split_source.tolist(), split_target.tolist()) if fits else (source, target))
        return split_pairs
