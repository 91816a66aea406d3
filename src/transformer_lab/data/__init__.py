"""transformer_lab.data: vocabulary, subword tokenizer, corpus readers, collation and batching.

Everything here is batch-first and depends only on torch, numpy, Hugging Face
`tokenizers` (the subword tokenizer) and the standard library; no other part of
transformer_lab is imported.
"""

from transformer_lab.data.ag_news import (
    AG_NEWS_CLASSES,
    NewsArticle,
    ag_news_path,
    join_title_and_description,
    read_ag_news_csv,
    resolve_ag_news_dir,
)
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
from transformer_lab.data.datasets import download_dataset
from transformer_lab.data.download import download_file
from transformer_lab.data.labelled_text import (
    LABELLED_TEXT_FORMATS,
    LabelledText,
    LabelledTextFile,
    labelled_text_format,
    read_labelled_text,
    sorted_class_names,
)
from transformer_lab.data.multi30k import (
    MULTI30K_SPLITS,
    download_multi30k,
    load_multi30k,
    read_multi30k,
    resolve_multi30k_dir,
)
from transformer_lab.data.parallel_text import decode_lines, read_lines, read_parallel_text
from transformer_lab.data.subword import SubwordTokenizer
from transformer_lab.data.synthetic import SYNTHETIC_TASKS, make_synthetic_pairs
from transformer_lab.data.tokenizer_pair import TokenizerPair
from transformer_lab.data.vocabulary import (
    BOS_ID,
    EOS_ID,
    NUM_SPECIAL_TOKENS,
    PAD_ID,
    UNK_ID,
    Vocabulary,
)

__all__ = [
    "AG_NEWS_CLASSES",
    "NewsArticle",
    "ag_news_path",
    "join_title_and_description",
    "read_ag_news_csv",
    "resolve_ag_news_dir",
    "BOS_ID",
    "EOS_ID",
    "MULTI30K_SPLITS",
    "NUM_SPECIAL_TOKENS",
    "PAD_ID",
    "SYNTHETIC_TASKS",
    "UNK_ID",
    "ClassificationBatch",
    "Seq2SeqBatch",
    "SubwordTokenizer",
    "TokenizerPair",
    "Vocabulary",
    "balance_batches_for_shards",
    "collate_classification",
    "collate_pairs",
    "collated_lengths",
    "decode_lines",
    "download_dataset",
    "download_file",
    "download_multi30k",
    "fixed_size_batches",
    "load_multi30k",
    "make_synthetic_pairs",
    "pad_sequences",
    "padding_fraction",
    "read_lines",
    "read_multi30k",
    "read_parallel_text",
    "resolve_multi30k_dir",
    "token_budget_batches",
    "LABELLED_TEXT_FORMATS",
    "LabelledText",
    "LabelledTextFile",
    "labelled_text_format",
    "read_labelled_text",
    "sorted_class_names",
]
