"""The streamed preparation of couplets gives what the corpus read whole gives, under every rule at once:
skipped rows, the carve, `num_train`, duplicates of validation upper lines, extra splits, backwards pairs,
the user's own validation file and a given vocabulary."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.tasks import couplet_whole_read
from tests.tasks.couplet_fixture import made_up_couplets, write_split
from transformer_lab.data import Vocabulary
from transformer_lab.tasks.couplet import data as couplet_data


def assert_prepared_equals_whole(
    config: couplet_data.CoupletDataConfig, out: Path, vocabulary: Vocabulary | None = None
) -> couplet_data.CoupletData:
    whole = couplet_whole_read.read_corpus(config, vocabulary)
    assert whole.train_pairs is not None
    prepared = couplet_data.corpus_kind(config, vocabulary).prepare(out)
    assert prepared.vocabulary.tokens == whole.vocabulary.tokens
    assert prepared.validation_pairs == whole.validation_pairs
    assert prepared.report == whole.report
    assert len(prepared.store) == len(whole.train_pairs)
    for index, (upper, lower) in enumerate(whole.train_pairs):
        assert prepared.store.ids("source", index).tolist() == whole.vocabulary.encode(list(upper))
        assert prepared.store.ids("target", index).tolist() == whole.vocabulary.encode(list(lower))
    return whole


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A training split with every kind of skipped row and validation duplicates, and one extra split."""
    pairs = made_up_couplets(300, seed=11)
    # Punctuation variants of earlier upper lines: whichever lands in validation drops the other.
    pairs += [(upper.replace("，", ""), lower.replace("，", "")) for upper, lower in pairs[:40] if "，" in upper]
    root = tmp_path / "data"
    write_split(root / "couplet" / "train_couplet_machine", pairs)
    upper_file = root / "couplet" / "train_couplet_machine" / "in.txt"
    lower_file = root / "couplet" / "train_couplet_machine" / "out.txt"
    # An empty side, an unequal pair, a line over max_length.
    uppers = upper_file.read_text(encoding="utf-8").splitlines(keepends=True)
    lowers = lower_file.read_text(encoding="utf-8").splitlines(keepends=True)
    uppers[5], lowers[9], uppers[20], lowers[20] = " \n", "春 \n", "春 " * 9 + "\n", "秋 " * 9 + "\n"
    upper_file.write_text("".join(uppers), encoding="utf-8")
    lower_file.write_text("".join(lowers), encoding="utf-8")
    write_split(root / "couplet" / "more", made_up_couplets(60, seed=12) + pairs[100:130])
    return root


def test_carved_validation_with_every_rule(data_dir: Path, tmp_path: Path) -> None:
    config = couplet_data.CoupletDataConfig(
        data_dir=str(data_dir),
        num_validation=30,
        max_length=8,
        num_train=150,
        extra_train_splits=("more",),
        add_reversed_pairs=True,
        min_frequency=2,
        seed=5,
    )
    whole = assert_prepared_equals_whole(config, tmp_path / "carved")
    report = whole.report
    assert report["skipped_empty"] == report["skipped_unequal_length"] == report["skipped_too_long"] == 1
    assert report["train_dropped_as_validation_duplicates"] > 0
    assert report["extra_dropped_as_validation_duplicates"] > 0 and report["extra_train_pairs"] > 0
    # Without the cut, and with the checkpoint's vocabulary (a resume): the same again.
    uncut = dataclasses.replace(config, num_train=0)
    assert_prepared_equals_whole(uncut, tmp_path / "given", whole.vocabulary)


def test_the_users_files_with_their_own_validation(tmp_path: Path) -> None:
    pairs, valid = made_up_couplets(200, seed=13), made_up_couplets(15, seed=14)
    train_file, valid_file = tmp_path / "train.tsv", tmp_path / "valid.jsonl"
    train_file.write_text("upper\tlower\n" + "".join(f"{u}\t{w}\n" for u, w in pairs), encoding="utf-8")
    valid_file.write_text(
        "".join(json.dumps({"upper": u, "lower": w}, ensure_ascii=False) + "\n" for u, w in valid), encoding="utf-8"
    )
    config = couplet_data.CoupletDataConfig(
        train_files=(str(train_file),), valid_files=(str(valid_file),), add_reversed_pairs=True
    )
    whole = assert_prepared_equals_whole(config, tmp_path / "prepared")
    # The user's validation leaves the training pairs whole (only the backwards ones are filtered).
    assert whole.report["train_dropped_as_validation_duplicates"] == 0
    assert whole.validation_pairs == valid


def test_a_bad_row_is_one_error_naming_the_file_and_the_line(data_dir: Path, tmp_path: Path) -> None:
    config = couplet_data.CoupletDataConfig(data_dir=str(data_dir), num_validation=30, skip_invalid=False)
    with pytest.raises(ValueError, match=r"in\.txt: line 6: expected a non-empty sentence"):
        couplet_data.corpus_kind(config).prepare(tmp_path / "prepared")
    assert not (tmp_path / "prepared").exists()
