"""The couplet reader: alignment, unequal lengths, skip mode, length limit, validation split; tones."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tasks.couplet_whole_read import with_reversed_pairs
from transformer_lab.data.chinese import is_han, is_level_tone, is_punctuation, last_han_character, mandarin_tone
from transformer_lab.data.couplet import (
    load_couplets,
    read_couplets,
    resolve_couplet_split_dir,
    split_characters,
    split_validation,
)

DATA_DIR = Path(__file__).resolve().parents[3] / "shared" / "data"


def write_split(folder: Path, uppers: list[str], lowers: list[str]) -> Path:
    """Write a split in the wb14123 form: characters separated by spaces, a trailing space."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, lines in (("in.txt", uppers), ("out.txt", lowers)):
        text = "".join(" ".join(line) + " \n" if line else "\n" for line in lines)
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_reads_pairs_without_the_separating_spaces(tmp_path: Path) -> None:
    folder = write_split(tmp_path, ["晚风摇树", "一江春水，向东流"], ["晨露润花", "两岸青山，对面开"])
    corpus = read_couplets(folder)
    assert corpus.pairs == [("晚风摇树", "晨露润花"), ("一江春水，向东流", "两岸青山，对面开")]
    assert corpus.num_skipped == 0
    assert split_characters("晚 风 摇 ") == "晚风摇" == split_characters("晚风摇")


def test_misaligned_files_are_an_error_naming_both_files(tmp_path: Path) -> None:
    folder = write_split(tmp_path, ["晚风", "春水"], ["晨露"])
    with pytest.raises(ValueError, match=r"2 line\(s\) in .*in\.txt and 1 line\(s\) in .*out\.txt"):
        read_couplets(folder)
    # Skipping cannot repair a shifted file: it is an error whatever the option.
    with pytest.raises(ValueError, match="same number of lines"):
        read_couplets(folder, skip_invalid=True)


def test_unequal_lengths_are_an_error_naming_file_and_line(tmp_path: Path) -> None:
    folder = write_split(tmp_path, ["晚风", "春水长", "山高"], ["晨露", "秋月", "水长"])
    with pytest.raises(ValueError, match=r"out\.txt: line 2: expected a lower line of 3 characters.*got 2"):
        read_couplets(folder)


def test_skip_mode_skips_and_counts_each_kind(tmp_path: Path) -> None:
    folder = write_split(
        tmp_path, ["晚风", "春水长", "", "山高", "一二三四五"], ["晨露", "秋月", "雨", "水长", "六七八九十"]
    )
    corpus = read_couplets(folder, skip_invalid=True, max_length=4)
    assert corpus.pairs == [("晚风", "晨露"), ("山高", "水长")]
    assert corpus.skipped_unequal == [2]
    assert corpus.skipped_empty == [3]
    assert corpus.skipped_too_long == [5]
    assert corpus.summary() == {"pairs": 2, "skipped_empty": 1, "skipped_unequal_length": 1, "skipped_too_long": 1}


def test_empty_side_is_an_error_without_skip_mode(tmp_path: Path) -> None:
    folder = write_split(tmp_path, ["晚风", ""], ["晨露", "雨"])
    with pytest.raises(ValueError, match=r"in\.txt: line 2: expected a non-empty sentence"):
        read_couplets(folder)


def test_missing_files_and_folders_are_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="in.txt"):
        read_couplets(tmp_path)
    with pytest.raises(FileNotFoundError, match="couplet split 'test'"):
        resolve_couplet_split_dir("test", tmp_path)


def test_split_folder_is_found_from_the_data_root_the_couplet_folder_or_itself(tmp_path: Path) -> None:
    split = write_split(tmp_path / "couplet" / "test", ["晚风"], ["晨露"])
    for data_dir in (tmp_path, tmp_path / "couplet", split):
        assert resolve_couplet_split_dir("test", data_dir) == split
    assert load_couplets("test", tmp_path).pairs == [("晚风", "晨露")]


def test_validation_split_is_seeded_disjoint_and_drops_punctuation_variants_from_training() -> None:
    pairs = [(f"春{chr(0x4E00 + index)}", f"秋{chr(0x4E00 + index)}") for index in range(50)]
    pairs.append(("春一，", "秋一，"))  # the same upper line as pairs[0] with punctuation
    train, validation, dropped = split_validation(pairs, 10, seed=7)
    again = split_validation(pairs, 10, seed=7)
    assert (train, validation, dropped) == again
    assert len(validation) == 10 and not set(train) & set(validation)
    held_out = {upper.rstrip("，") for upper, _ in validation}
    assert not any(upper.rstrip("，") in held_out for upper, _ in train)
    assert len(train) + len(validation) + dropped == len(pairs)
    assert split_validation(pairs, 10, seed=8)[1] != validation
    with pytest.raises(ValueError, match="num_validation"):
        split_validation(pairs, len(pairs), seed=0)


def test_reversed_pairs_follow_the_forward_ones_and_leave_validation_unseen() -> None:
    train = [("风起", "云飞"), ("山高", "水长"), ("花开", "月落，")]
    validation = [("月落", "星沉")]  # the third pair's lower line, read backwards, is this upper line
    pairs, dropped = with_reversed_pairs(train, validation)
    assert pairs == train + [("云飞", "风起"), ("水长", "山高")]
    assert dropped == 1
    assert with_reversed_pairs(train, []) == (train + [(lower, upper) for upper, lower in train], 0)
    assert with_reversed_pairs([], validation) == ([], 0)


def test_character_classes_and_tones() -> None:
    assert is_punctuation("，") and is_punctuation("？") and is_punctuation("-") and is_punctuation("《")
    assert not is_punctuation("□") and not is_punctuation("春") and not is_punctuation("a")
    assert is_han("春") and not is_han("，") and not is_han("a")
    # 风 fēng (1), 羊 yáng (2), 挺 tǐng (3), 树 shù (4): level, level, oblique, oblique.
    assert [mandarin_tone(character) for character in "风羊挺树"] == [1, 2, 3, 4]
    assert [is_level_tone(character) for character in "风羊挺树，"] == [True, True, False, False, False]
    assert last_han_character("春风？") == "风" and last_han_character("，？") is None


@pytest.mark.skipif(not (DATA_DIR / "couplet" / "test" / "in.txt").is_file(), reason=f"no couplet data in {DATA_DIR}")
def test_the_shared_test_split_reads_whole() -> None:
    corpus = load_couplets("test", DATA_DIR)
    assert len(corpus) == 4000 and corpus.num_skipped == 0
    assert corpus.pairs[1] == ("风弦未拨心先乱", "夜幕已沉梦更闲")
