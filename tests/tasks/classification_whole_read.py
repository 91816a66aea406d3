"""The oracle of the streamed classification corpus: the training file read whole in memory, then encoded."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from transformer_lab.data import SubwordTokenizer
from transformer_lab.data.prepared_labelled import LabelledRow
from transformer_lab.data.token_store import TokenStore
from transformer_lab.tasks.classification import data as classification_data


@dataclass
class WholeRead:
    """The corpus as ``ClassificationData``, with the training rows' text that the store leaves in the file."""

    data: classification_data.ClassificationData
    train_rows: list[LabelledRow]


def read_whole(
    config: classification_data.ClassificationDataConfig,
    tokenizer: SubwordTokenizer | None = None,
    class_names: Sequence[str] | None = None,
) -> WholeRead:
    """Validation taken (its own file, or carved), the BPE learned from the rest unless given, the rest encoded.

    A given ``tokenizer`` and ``class_names`` are kept; a training label outside the classes
    is the ValueError the streamed preparation raises too.
    """
    spec = classification_data.corpus_spec(config)
    train_rows, validation_rows, classes, num_skipped = spec.read(class_names)
    if tokenizer is None:
        tokenizer = spec.learn_tokenizer(train_rows)
    ids = tokenizer.encode_batch([row.text for row in train_rows])
    data = classification_data.ClassificationData(
        tokenizer=tokenizer,
        class_names=classes,
        train_file=spec.train_file,
        validation_articles=validation_rows,
        train_store=TokenStore.from_sequences({"tokens": ids}, [row.label for row in train_rows]),
        train_line_numbers=np.asarray([row.line_number for row in train_rows], dtype=np.int64),
        num_skipped=num_skipped,
        validation_file=spec.valid_file,
    )
    return WholeRead(data, train_rows)
