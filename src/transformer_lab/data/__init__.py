"""transformer_lab.data: vocabulary, synthetic tasks, collation and batching.

Everything here is batch-first and depends only on torch, numpy and the standard
library; no other part of transformer_lab is imported.
"""

from transformer_lab.data.batching import (
    balance_batches_for_shards,
    fixed_size_batches,
    padding_fraction,
    token_budget_batches,
)
from transformer_lab.data.collate import (
    ClassificationBatch,
    Seq2SeqBatch,
    collate_classification,
    collate_pairs,
    collated_lengths,
    pad_sequences,
)
from transformer_lab.data.synthetic import SYNTHETIC_TASKS, SyntheticTask, make_synthetic_pairs
from transformer_lab.data.vocabulary import (
    BOS_ID,
    BOS_TOKEN,
    EOS_ID,
    EOS_TOKEN,
    NUM_SPECIAL_TOKENS,
    PAD_ID,
    PAD_TOKEN,
    SPECIAL_TOKENS,
    UNK_ID,
    UNK_TOKEN,
    Vocabulary,
)

__all__ = [
    "BOS_ID",
    "BOS_TOKEN",
    "EOS_ID",
    "EOS_TOKEN",
    "NUM_SPECIAL_TOKENS",
    "PAD_ID",
    "PAD_TOKEN",
    "SPECIAL_TOKENS",
    "SYNTHETIC_TASKS",
    "UNK_ID",
    "UNK_TOKEN",
    "ClassificationBatch",
    "Seq2SeqBatch",
    "SyntheticTask",
    "Vocabulary",
    "balance_batches_for_shards",
    "collate_classification",
    "collate_pairs",
    "collated_lengths",
    "fixed_size_batches",
    "make_synthetic_pairs",
    "pad_sequences",
    "padding_fraction",
    "token_budget_batches",
]
