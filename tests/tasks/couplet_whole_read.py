"""The oracle of the streamed couplet corpus: the training couplets read whole in memory, split, widened, encoded."""

from __future__ import annotations

from transformer_lab.data import Vocabulary
from transformer_lab.data.couplet import load_couplets, without_validation_uppers
from transformer_lab.tasks.couplet import data as couplet_data


def with_reversed_pairs(
    train: list[tuple[str, str]], validation: list[tuple[str, str]]
) -> tuple[list[tuple[str, str]], int]:
    """The training pairs followed by each of them read backwards (lower line -> upper line).

    A backwards pair whose new upper line equals a validation upper line (punctuation
    removed) is left out, as `split_validation` does for the forward pairs.

    Returns:
        (forward then backward pairs, backward pairs left out as validation duplicates).
    """
    backward, dropped = without_validation_uppers([(lower, upper) for upper, lower in train], validation)
    return train + backward, dropped


def _extra_training_pairs(
    config: couplet_data.CoupletDataConfig, validation_pairs: list[tuple[str, str]]
) -> tuple[list[tuple[str, str]], int]:
    """The pairs of ``config.extra_train_splits`` in order, less those repeating a validation upper line."""
    pairs: list[tuple[str, str]] = []
    for split in config.extra_train_splits:
        corpus = load_couplets(split, config.data_dir, skip_invalid=config.skip_invalid, max_length=config.max_length)
        pairs += corpus.pairs
    return without_validation_uppers(pairs, validation_pairs)


def read_corpus(
    config: couplet_data.CoupletDataConfig, vocabulary: Vocabulary | None = None
) -> couplet_data.CoupletData:
    """The corpus read whole: the training split, validation carved, the vocabulary built (unless given), encoded.

    What the streamed preparation (`build_data`, `corpus_kind(...).prepare`) must give, with the text kept.
    """
    corpus, (train_pairs, validation_pairs, dropped) = couplet_data._read_and_split(config, config.data_dir)
    if config.num_train:
        train_pairs = train_pairs[: config.num_train]
    extra_pairs, extra_dropped = _extra_training_pairs(config, validation_pairs)
    train_pairs = train_pairs + extra_pairs
    reversed_dropped = 0
    if config.add_reversed_pairs:
        train_pairs, reversed_dropped = with_reversed_pairs(train_pairs, validation_pairs)
    given_vocabulary = vocabulary is not None
    if vocabulary is None:
        vocabulary = Vocabulary.build(
            (list(line) for pair in train_pairs for line in pair), min_frequency=config.min_frequency
        )
    train_ids = [(vocabulary.encode(list(upper)), vocabulary.encode(list(lower))) for upper, lower in train_pairs]
    # A given (fine-tuned or resumed run's) vocabulary may lack characters of these files: counted, as preparing does.
    unknown = sum(ids.count(vocabulary.unk_id) for pair in train_ids for ids in pair)
    report = {
        **corpus.summary(),
        "validation_pairs": len(validation_pairs),
        "train_dropped_as_validation_duplicates": dropped,
        **(
            {"extra_train_pairs": len(extra_pairs), "extra_dropped_as_validation_duplicates": extra_dropped}
            if config.extra_train_splits
            else {}
        ),
        **({"reversed_dropped_as_validation_duplicates": reversed_dropped} if config.add_reversed_pairs else {}),
        "train_pairs": len(train_pairs),
        **({"train_unknown_characters": unknown} if given_vocabulary else {}),
    }
    return couplet_data.CoupletData.in_memory(vocabulary, train_pairs, validation_pairs, train_ids, report)
