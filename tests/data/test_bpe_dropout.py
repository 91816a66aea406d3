"""BPE dropout on encoded ids: splits that decode to the same text, drawn reproducibly, used in training."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.torch import load_file

from transformer_lab.cli import main
from transformer_lab.data import SubwordTokenizer
from transformer_lab.data.bpe_dropout import MergeTree, PairSplit
from transformer_lab.data.lazy_batches import epoch_pair_batches, pair_length_table
from transformer_lab.data.token_store import TokenStore
from transformer_lab.tasks.translation.data import TranslationDataConfig

SENTENCES = [
    "Ein Mann mit einem orangefarbenen Hut starrt auf etwas.",
    "Zwei junge Männer spielen Fußball auf einer grünen Wiese.",
    "Eine Frau in einem blauen Kleid geht über die Straße.",
    "Kinder spielen im Park mit einem roten Ball.",
    "Ein schwarzer Hund rennt durch den tiefen Schnee.",
] * 4


@pytest.fixture(scope="module")
def tokenizer() -> SubwordTokenizer:
    return SubwordTokenizer.train(SENTENCES, vocab_size=400, min_frequency=1)


def test_each_merged_token_is_the_two_tokens_its_merge_joined(tokenizer: SubwordTokenizer) -> None:
    tree = MergeTree.of(tokenizer)
    merged = np.flatnonzero(tree.left >= 0)
    # Every entry beyond the 4 specials and 256 bytes is a merge.
    assert merged.tolist() == list(range(260, tokenizer.vocab_size)) and tokenizer.vocab_size > 300
    for token_id in merged:
        joined = tokenizer.id_to_token(int(tree.left[token_id])) + tokenizer.id_to_token(int(tree.right[token_id]))
        assert joined == tokenizer.id_to_token(int(token_id))
    for special in range(4):  # <pad> <unk> <bos> <eos> are never split
        assert tree.left[special] == -1


def test_splits_decode_to_the_same_text_and_follow_the_probability(tokenizer: SubwordTokenizer) -> None:
    tree = MergeTree.of(tokenizer)
    generator = np.random.default_rng(0)
    encoded = [np.array(tokenizer.encode(sentence)) for sentence in SENTENCES]
    for sentence, ids in zip(SENTENCES, encoded):
        assert np.array_equal(tree.split(ids, 0.0, generator), ids)
        for probability in (0.1, 0.5):
            split = tree.split(ids, probability, generator)
            assert tokenizer.decode(split.tolist()) == sentence
        # Everything split: bytes only.
        assert (tree.left[tree.split(ids, 0.999999, generator)] == -1).all()
    # A merged token stays whole with probability 1 - p (4,000 draws: 0.70 +- 0.007); its
    # halves, shorter, are other ids.
    token = int(np.flatnonzero(tree.left >= 0)[-1])
    split = tree.split(np.full(4000, token), 0.3, generator)
    assert 0.66 < float((split == token).sum()) / 4000 < 0.74


def test_the_draw_is_the_same_for_the_same_pair_and_epoch_and_differs_across_epochs(
    tokenizer: SubwordTokenizer,
) -> None:
    tree = MergeTree.of(tokenizer)
    source, target = tokenizer.encode(SENTENCES[0]), tokenizer.encode(SENTENCES[1])
    split = PairSplit(tree, tree, 0.3, seed=7, longest=1000)
    assert split.pair(source, target, epoch=3, index=5) == split.pair(source, target, epoch=3, index=5)
    assert split.pair(source, target, epoch=3, index=5) != split.pair(source, target, epoch=4, index=5)
    # A pair whose split would not fit the positional table keeps its ids.
    tight = PairSplit(tree, tree, 0.999999, seed=7, longest=max(len(source), len(target)))
    assert tight.pair(source, target, epoch=0, index=0) == (source, target)


def test_an_epoch_is_planned_on_its_split_lengths_and_its_batches_collate_those_pairs(
    tokenizer: SubwordTokenizer,
) -> None:
    tree = MergeTree.of(tokenizer)
    pairs = [(tokenizer.encode(a), tokenizer.encode(b)) for a, b in zip(SENTENCES, SENTENCES[1:])]
    store = TokenStore.from_sequences({"source": [a for a, _ in pairs], "target": [b for _, b in pairs]})
    split = PairSplit(tree, tree, 0.3, seed=1, longest=1000)
    plain_lengths = pair_length_table(store)
    lengths = split.length_table(store, epoch=2)
    assert (lengths >= plain_lengths).all() and (lengths > plain_lengths).any()
    batches = epoch_pair_batches(store, plain_lengths, 200, seed=0, epoch=2, split=split)
    for position in range(len(batches)):
        batch, indices = batches[position], batches.indices(position)
        expected = [split.pair(*pairs[index], 2, index) for index in indices]
        assert batch.src_ids.shape[1] == max(len(source) for source, _ in expected)
        for row, (source, target) in enumerate(expected):
            assert batch.src_ids[row, : len(source)].tolist() == source
            assert batch.tgt_out_ids[row, : len(target) + 1].tolist() == [*target, 3]
        # Planned on the split lengths: the batch holds the budget's tokens of split pairs.
        assert len(indices) * int(lengths[indices].max()) <= 200


@pytest.mark.parametrize("value", [1.0, -0.1, True, "0.1"])
def test_a_probability_out_of_range_is_refused_naming_the_setting(value: object) -> None:
    with pytest.raises(ValueError, match=r"^data\.bpe_dropout: expected a probability in \[0, 1\)"):
        TranslationDataConfig(bpe_dropout=value)  # type: ignore[arg-type]


TINY = [
    *("--set", "data.vocab_size=300", "--set", "data.min_frequency=1", "--set", "data.max_tokens=256"),
    *("--set", "model.d_model=16", "--set", "model.nhead=2", "--set", "model.num_encoder_layers=1"),
    *("--set", "model.num_decoder_layers=1", "--set", "model.dim_feedforward=32", "--set", "model.max_len=64"),
    *("--set", "train.warmup_steps=1", "--set", "train.cooldown_steps=0", "--set", "data.bpe_dropout=0.2"),
    *("--set", "train.progress_bar=false", "--set", "decode.max_len=8", "--set", "data.num_carved_validation=4"),
    *("--set", "train.precision=fp32", "--set", "train.eval_every_steps=2"),
]


def test_a_run_with_bpe_dropout_resumes_to_the_same_weights(tmp_path: Path) -> None:
    source, target = tmp_path / "train.de", tmp_path / "train.en"
    source.write_text("".join(f"{line}\n" for line in SENTENCES * 3), encoding="utf-8")
    target.write_text("".join(f"{line}\n" for line in SENTENCES[1:] + SENTENCES[:1]) * 3, encoding="utf-8")
    files = ["--train", str(source), str(target)]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert main(["train", "translation", "--out", str(whole), *files, *TINY, "--set", "train.max_steps=6"]) == 0
    assert main(["train", "translation", "--out", str(cut), *files, *TINY, "--set", "train.max_steps=2"]) == 0
    resumed = ["train", "translation", "--out", str(cut), "--resume", *files, *TINY, "--set", "train.max_steps=6"]
    assert main(resumed) == 0
    expected, actual = load_file(whole / "last" / "model.safetensors"), load_file(cut / "last" / "model.safetensors")
    assert expected.keys() == actual.keys()
    for name in expected:
        assert (expected[name] == actual[name]).all(), name
