"""Fake models for the decoding tests: next-token log-probs are a hand-built function of
(source sentence, generated prefix), and the cache checks every use and reorder.

The fakes live here (not in a module of their own) because pytest runs with
`--import-mode=importlib`, where test files cannot import their neighbours; the tests
reach the classes through the fixtures at the bottom.

Vocabulary of every fake: 0 pad, 1 bos, 2 eos, 3.. ordinary tokens. A source row starts
with a key that selects the sentence's table (tables differ, so sentences decoded in one
batch have different best outputs); bos and pad are never predicted (-inf).
"""

from __future__ import annotations

import itertools
import math
import zlib

import pytest
import torch
from torch import Tensor

PAD, BOS, EOS = 0, 1, 2


def gnmt(length: int, alpha: float) -> float:
    """The GNMT length penalty, written independently of the library for the oracle."""
    return ((5.0 + length) / 6.0) ** alpha


class RecordingCache:
    """A cache that stores, per row, the prefix tokens it has seen (bos included).

    The fake model asserts at every cached step that these equal the given prefix minus
    its last token: that holds only if the search reordered the cache correctly.
    """

    def __init__(self) -> None:
        self.rows: list[tuple[int, ...]] | None = None
        self.reorder_sizes: list[int] = []

    def reorder(self, index: Tensor, include_static: bool = True) -> None:
        assert index.dtype == torch.long and index.dim() == 1, index
        assert self.rows is not None, "reorder called on a cache that was never filled"
        positions = index.tolist()
        assert all(0 <= position < len(self.rows) for position in positions), positions
        self.rows = [self.rows[position] for position in positions]
        self.reorder_sizes.append(len(positions))


class FakeModel:
    """Follows `IncrementalDecoder`; subclasses define `log_probs_for(key, generated)`."""

    d_model = 3

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self.bos_id, self.eos_id, self.pad_id = BOS, EOS, PAD
        self.caches: list[RecordingCache] = []
        self.step_rows: list[int] = []  # rows given to each decode_step call

    def log_probs_for(self, key: int, generated: tuple[int, ...]) -> Tensor:
        raise NotImplementedError

    def encode(self, src_ids: Tensor) -> Tensor:
        # Memory carries the source ids, so decode_step can check that each memory row
        # still belongs to its source row after the search expands and compacts them.
        return src_ids.float().unsqueeze(-1).repeat(1, 1, self.d_model)  # [B, S, D]

    def new_cache(self) -> RecordingCache:
        cache = RecordingCache()
        self.caches.append(cache)
        return cache

    def decode_step(
        self,
        tgt_prefix_ids: Tensor,
        memory: Tensor,
        src_ids: Tensor,
        cache: RecordingCache | None = None,
    ) -> Tensor:
        rows, length = tgt_prefix_ids.shape
        assert tgt_prefix_ids.dtype == torch.long
        assert src_ids.size(0) == rows and memory.shape == (rows, src_ids.size(1), self.d_model)
        assert torch.equal(memory[:, :, 0], src_ids.float()), "memory rows out of step with src_ids"
        assert bool((tgt_prefix_ids[:, 0] == BOS).all()), "prefix must start with bos"
        given = [tuple(row) for row in tgt_prefix_ids.tolist()]
        self.step_rows.append(rows)
        if cache is None:
            prefixes = given
        else:
            if cache.rows is None:
                assert length == 1, "a fresh cache must first see the bos-only prefix"
                prefixes = given
            else:
                assert len(cache.rows) == rows, (len(cache.rows), rows)
                for cached, row in zip(cache.rows, given):
                    assert cached == row[:-1], f"cache holds {cached}, prefix is {row}"
                # Like a real cached decoder: what it knows is the cache plus the last token.
                prefixes = [cached + (row[-1],) for cached, row in zip(cache.rows, given)]
            cache.rows = prefixes
        keys = src_ids[:, 0].tolist()
        return torch.stack([self.log_probs_for(key, prefix[1:]) for key, prefix in zip(keys, prefixes)])  # [N, V]

    def sequence_log_prob(self, key: int, ids: list[int]) -> float:
        """Sum of the model's log-probs of `ids` (no bos), as the searches compute it."""
        total = torch.zeros((), dtype=torch.float32)
        for position, token in enumerate(ids):
            log_probs = torch.log_softmax(self.log_probs_for(key, tuple(ids[:position])), dim=-1)
            total = total + log_probs[token]
        return float(total)

    def exhaustive_nbest(self, key: int, max_len: int, alpha: float, count: int) -> list[tuple[list[int], float]]:
        """Every sequence the search could return, ranked by normalised score (oracle)."""
        tokens = [EOS] + list(range(3, self.vocab_size))
        results = []
        for length in range(1, max_len + 1):
            for body in itertools.product(tokens[1:], repeat=length - 1):
                results.append(list(body) + [EOS])
        results.extend(list(body) for body in itertools.product(tokens[1:], repeat=max_len))
        scored = []
        for ids in results:
            log_prob = self.sequence_log_prob(key, ids)
            if math.isfinite(log_prob):
                scored.append((ids, log_prob / gnmt(len(ids), alpha)))
        scored.sort(key=lambda item: -item[1])
        return scored[:count]


class TableModel(FakeModel):
    """Probabilities from hand-written tables: tables[key][generated prefix] maps tokens
    to probabilities; tokens a table row does not list share the rest of the mass
    equally (bos and pad excluded); prefixes not listed use defaults[key]."""

    def __init__(
        self,
        vocab_size: int,
        tables: dict[int, dict[tuple[int, ...], dict[int, float]]],
        defaults: dict[int, dict[int, float]],
    ) -> None:
        super().__init__(vocab_size)
        self.tables = tables
        self.defaults = defaults

    def log_probs_for(self, key: int, generated: tuple[int, ...]) -> Tensor:
        listed = self.tables[key].get(generated, self.defaults[key])
        probs = torch.zeros(self.vocab_size, dtype=torch.float64)
        for token, probability in listed.items():
            probs[token] = probability
        free = [t for t in range(self.vocab_size) if t not in listed and t not in (PAD, BOS)]
        rest = 1.0 - sum(listed.values())
        if free:
            probs[free] = max(rest, 1e-6) / len(free)
        return probs.log().float()  # [V]; log 0 = -inf for bos and pad


class RandomModel(FakeModel):
    """Pseudo-random but deterministic log-probs, seeded by (seed, key, prefix)."""

    def __init__(self, vocab_size: int, seed: int, eos_bias: float = 0.5) -> None:
        super().__init__(vocab_size)
        self.seed = seed
        self.eos_bias = eos_bias

    def log_probs_for(self, key: int, generated: tuple[int, ...]) -> Tensor:
        generator = torch.Generator().manual_seed(zlib.crc32(repr((self.seed, key, generated)).encode()))
        logits = 2.0 * torch.randn(self.vocab_size, generator=generator)  # [V]
        logits[EOS] += self.eos_bias
        logits[PAD] = -math.inf
        logits[BOS] = -math.inf
        return torch.log_softmax(logits, dim=-1)  # [V]


# Tokens of the hand-built tables.
A, B, C, D = 3, 4, 5, 6

TABLES: dict[int, dict[tuple[int, ...], dict[int, float]]] = {
    # 0, the greedy trap: greedy takes A (0.5) and then meets a flat distribution,
    # a c eos = ln .5 + ln .32 + ln .9 = -1.938; beam finds b eos = ln .4 + ln .95 = -0.968.
    0: {
        (): {A: 0.5, B: 0.4},
        (A,): {C: 0.32, D: 0.3, EOS: 0.28},
        (A, C): {EOS: 0.9},
        (B,): {EOS: 0.95},
    },
    # 1, short against long: a eos = ln .5 + ln .74 = -0.9943 (best raw);
    # b c d eos = ln .45 + ln .8 + ln .9 + ln .95 = -1.1783, better once divided by the
    # penalty with alpha = 1: -0.9943 / (7/6) = -0.8522 < -1.1783 / (9/6) = -0.7855.
    1: {
        (): {A: 0.5, B: 0.45},
        (A,): {EOS: 0.74},
        (B,): {C: 0.8},
        (B, C): {D: 0.9},
        (B, C, D): {EOS: 0.95},
    },
    # 2, where beam size 1 leaves greedy once alpha > 0: greedy a eos = -0.7985, raw best;
    # a b eos = ln .9 + ln .49 + ln .99 = -0.8288, and -0.8288 / (8/6) = -0.6216 beats
    # -0.7985 / (7/6) = -0.6844 with alpha = 1.
    2: {
        (): {A: 0.9},
        (A,): {EOS: 0.5, B: 0.49},
        (A, B): {EOS: 0.99},
    },
    # 3, never ends: a is always 0.9 likely (its default row, below), eos 0.025.
    3: {},
    # 4, eos is the best first token; without it, a then b then eos.
    4: {
        (): {EOS: 0.6, A: 0.3},
        (A,): {EOS: 0.5, B: 0.4},
        (A, B): {EOS: 0.8},
    },
    # 5, a slow burner: a eos = ln .6 + ln .9 = -0.6162 (score -0.5282 with alpha = 1)
    # finishes first; b c d c d eos = ln .4 + 5 ln .999 = -0.9213 wins with alpha = 1
    # (-0.9213 / (11/6) = -0.5025), but only a stop that looks ahead to max_len waits
    # for it: right after a eos, b c's -0.9173 / lp(3) = -0.688 looks hopeless.
    5: {
        (): {A: 0.6, B: 0.4},
        (A,): {EOS: 0.9},
        (B,): {C: 0.999},
        (B, C): {D: 0.999},
        (B, C, D): {C: 0.999},
        (B, C, D, C): {D: 0.999},
        (B, C, D, C, D): {EOS: 0.999},
    },
}
# Prefixes a table does not list: end now, mostly; table 3 keeps going instead.
END_ROW = {EOS: 0.9}
DEFAULTS = {0: END_ROW, 1: END_ROW, 2: END_ROW, 3: {A: 0.9}, 4: END_ROW, 5: END_ROW}


def source(key: int, length: int = 4) -> list[int]:
    """A source row whose first token selects the table; the rest is filler."""
    return [key] + [7 + (key + position) % 3 for position in range(length - 1)]


@pytest.fixture
def table_model() -> TableModel:
    return TableModel(vocab_size=7, tables=TABLES, defaults=DEFAULTS)


@pytest.fixture
def make_random_model():
    return RandomModel


@pytest.fixture
def sources():
    """Build src_ids: LongTensor[B, S] from keys, right-padded with pad like real batches."""

    def build(keys: list[int], lengths: list[int] | None = None) -> Tensor:
        lengths = lengths or [4] * len(keys)
        rows = [source(key, length) for key, length in zip(keys, lengths)]
        width = max(len(row) for row in rows)
        return torch.tensor([row + [PAD] * (width - len(row)) for row in rows], dtype=torch.long)

    return build


@pytest.fixture
def oracle_length_penalty():
    return gnmt
