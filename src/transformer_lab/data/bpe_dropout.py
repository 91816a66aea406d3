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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from transformer_lab.data.subword import SubwordTokenizer
from transformer_lab.data.token_store import TokenStore
from transformer_lab.data.tokenizer_pair import TokenizerPair

__all__ = ["MergeTree", "PairSplit", "check_dropout"]

IdPair = tuple[list[int], list[int]]  # (source ids, target ids)
_CHUNK = 10_000  # pairs read from the store at a time while measuring an epoch


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

    The draw of pair ``index`` in ``epoch`` is seeded by (seed, epoch, index): an epoch's
    batches are planned on the lengths of its split pairs (:meth:`length_table`), so that a
    batch pads no more than one of unsplit pairs, and a pair read into a batch is split as
    it was measured; a resumed run splits as the uninterrupted run did. A pair whose split
    side would pass ``longest`` ids (the positional table's room) keeps its ids as they are.
    """

    source: MergeTree
    target: MergeTree
    probability: float
    seed: int
    longest: int

    @classmethod
    def of(cls, vocabulary: object, probability: float, seed: int, longest: int) -> PairSplit:
        """The split of a run whose vocabulary is ``vocabulary`` (a `TokenizerPair` of BPEs, else refused)."""
        if not isinstance(vocabulary, TokenizerPair):
            raise ValueError(f"data.bpe_dropout: expected a subword vocabulary, got {type(vocabulary).__name__}")
        source = MergeTree.of(vocabulary.source)
        target = source if vocabulary.is_joint else MergeTree.of(vocabulary.target)
        return cls(source, target, probability, seed, longest)

    def pair(self, source: Sequence[int], target: Sequence[int], epoch: int, index: int) -> IdPair:
        """The (source, target) ids of pair ``index`` in ``epoch``, split."""
        generator = np.random.default_rng((self.seed, epoch, index))
        split_source = self.source.split(np.asarray(source), self.probability, generator)
        split_target = self.target.split(np.asarray(target), self.probability, generator)
        if max(len(split_source), len(split_target)) > self.longest:
            return list(source), list(target)
        return split_source.tolist(), split_target.tolist()

    def length_table(self, store: TokenStore, epoch: int) -> np.ndarray:
        """The collated (source, target) length of every pair of ``store`` split for ``epoch``, int32 [N, 2]."""
        table = np.empty((len(store), 2), dtype=np.int32)
        for start in range(0, len(store), _CHUNK):
            indices = range(start, min(start + _CHUNK, len(store)))
            rows = zip(store.rows("source", indices), store.rows("target", indices), strict=True)
            for index, (source, target) in zip(indices, rows):
                split_source, split_target = self.pair(source, target, epoch, index)
                table[index] = (len(split_source), len(split_target) + 1)
        return table
