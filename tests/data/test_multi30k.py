"""Tests for transformer_lab.data.multi30k and transformer_lab.data.parallel_text."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from transformer_lab.data.dataset_folder import default_data_dir
from transformer_lab.data.download import sha256_of_file
from transformer_lab.data.line_stream import stream_lines
from transformer_lab.data.multi30k import (
    DATA_ENVIRONMENT_VARIABLE,
    MULTI30K_DEFAULT_SPLITS,
    MULTI30K_EXTRA_TEST_SPLITS,
    MULTI30K_SHA256,
    MULTI30K_SPLITS,
    load_multi30k,
    read_multi30k,
    resolve_multi30k_dir,
)
from transformer_lab.data.parallel_text import decode_lines, read_lines, read_parallel_text

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
SHARED_MULTI30K = SHARED_DATA / "multi30k"
needs_shared_multi30k = pytest.mark.skipif(
    not SHARED_MULTI30K.is_dir(), reason=f"real Multi30k data not found at {SHARED_MULTI30K}"
)

# Sentences per file, from the statistics of the official README at the pinned commit.
# test_2018_flickr is absent: that README gives no figure for it.
MULTI30K_LINE_COUNTS: dict[str, int] = {
    "train": 29000,
    "val": 1014,
    "test_2016_flickr": 1000,
    "test_2017_flickr": 1000,
    "test_2017_mscoco": 461,
}

GERMAN = ["Ein Mann fährt Fahrrad.", "Zwei Hunde  spielen im Schnee. ", "Eine Frau liest."]
ENGLISH = ["A man rides a bike.", "Two dogs play in the snow.", "A woman reads."]


def write_split(folder: Path, split: str, german: list[str], english: list[str], ending: str = "\n") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for language, lines in (("de", german), ("en", english)):
        (folder / f"{split}.{language}").write_bytes("".join(line + ending for line in lines).encode("utf-8"))


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    """A data root holding multi30k/ with a tiny train split."""
    write_split(tmp_path / "multi30k", "train", GERMAN, ENGLISH)
    return tmp_path


def test_reads_aligned_pairs_exactly(data_root: Path) -> None:
    pairs = load_multi30k("train", data_dir=data_root)
    assert pairs == list(zip(GERMAN, ENGLISH))
    # Inner and trailing spaces are data, not noise: they are kept.
    assert pairs[1][0] == "Zwei Hunde  spielen im Schnee. "


def test_data_dir_may_be_the_root_or_the_multi30k_folder(data_root: Path) -> None:
    assert resolve_multi30k_dir(data_root) == data_root / "multi30k"
    assert resolve_multi30k_dir(data_root / "multi30k") == data_root / "multi30k"
    assert load_multi30k("train", data_dir=data_root / "multi30k") == load_multi30k("train", data_dir=data_root)


def test_environment_variable_then_the_default_data_folder(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DATA_ENVIRONMENT_VARIABLE, str(data_root))
    assert load_multi30k("train") == list(zip(GERMAN, ENGLISH))
    monkeypatch.delenv(DATA_ENVIRONMENT_VARIABLE)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    default = tmp_path / "user-cache" / "transformer_lab" / "data"
    assert default_data_dir() == default
    # Nothing there yet: one line naming the folder and the one command that fills it.
    with pytest.raises(FileNotFoundError) as error:
        load_multi30k("train")
    message = str(error.value)
    assert str(default) in message and "run `transformer-lab download multi30k`" in message and "\n" not in message
    (default / "multi30k").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"train\.de.*run `transformer-lab download multi30k` to fetch it"):
        load_multi30k("train")
    for name in ("train.de", "train.en"):
        (default / "multi30k" / name).write_bytes((data_root / "multi30k" / name).read_bytes())
    assert load_multi30k("train") == list(zip(GERMAN, ENGLISH))
    # A folder named explicitly gets the command with --to.
    with pytest.raises(FileNotFoundError, match=r"no_such_folder.*download multi30k --to .*no_such_folder"):
        load_multi30k("train", data_dir=data_root / "no_such_folder")


def test_swapped_languages(data_root: Path) -> None:
    assert load_multi30k("train", data_root, source_language="en", target_language="de") == list(zip(ENGLISH, GERMAN))


def test_crlf_bom_and_missing_final_newline(tmp_path: Path) -> None:
    write_split(tmp_path, "val", GERMAN, ENGLISH, ending="\r\n")
    assert load_multi30k("val", data_dir=tmp_path) == list(zip(GERMAN, ENGLISH))
    path = tmp_path / "plain.txt"
    path.write_bytes(b"\xef\xbb\xbfone\r\ntwo")
    assert read_lines(path) == ["one", "two"]


def test_a_carriage_return_inside_a_line_is_refused_naming_the_line_not_read_as_one_text(tmp_path: Path) -> None:
    mac = tmp_path / "mac.txt"
    mac.write_bytes(b"hello world\rsecond text\rthird\r")  # classic Mac line ends: one "line" of three texts
    with pytest.raises(ValueError, match=r"mac\.txt: line 1: .*carriage return \(\\r\) inside the line at column 12"):
        read_lines(mac)
    # Deep in a streamed file, in a later block, the line is still the file's own line number.
    deep = tmp_path / "deep.txt"
    deep.write_bytes(b"".join(b"line %d\r\n" % number for number in range(1, 500)) + b"odd\rone\n")
    with pytest.raises(ValueError, match=r"deep\.txt: line 500: .*at column 4"):
        for _ in stream_lines(deep, block_bytes=256):
            pass
    windows = tmp_path / "windows.txt"
    windows.write_bytes(b"a\r\nb\r\n")
    assert read_lines(windows) == ["a", "b"]


def test_a_byte_order_mark_past_the_start_of_a_file_is_refused_naming_the_line_not_read_into_its_word(
    tmp_path: Path,
) -> None:
    # Two files saved with a mark each, joined by cat: the second mark was read as the start of "drei".
    first, second = "\ufeffein hund\nzwei katzen\n", "\ufeffdrei mäuse\nvier vögel\n"
    joined = tmp_path / "joined.de"
    joined.write_text(first + second, encoding="utf-8")
    message = (
        "line 3: expected a byte-order mark (U+FEFF) only at the start of the file, got one at column 1, as where "
        "files were joined (cat); remove it, e.g. sed 's/\\xEF\\xBB\\xBF//g'"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(f'{joined}: {message}')}$"):
        read_lines(joined)
    with pytest.raises(ValueError, match=f"^{re.escape(f'stdin: {message}')}$"):
        decode_lines((first + second).encode("utf-8"), "stdin")
    # Streamed, in a later block that the mark starts: the file's own line number, not the block's.
    deep = tmp_path / "deep.txt"
    deep.write_text("".join(f"zeile {number}\n" for number in range(1, 500)) + "\ufeffmitten\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"deep\.txt: line 500: expected a byte-order mark .* at column 1"):
        for _ in stream_lines(deep, block_bytes=len("".join(f"zeile {number}\n" for number in range(1, 500)))):
            pass
    inside = tmp_path / "inside.txt"
    inside.write_text("ein\ufeffwort\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"inside\.txt: line 1: .* at column 4"):
        read_lines(inside)
    # The file's own mark, at its start, is still read as no part of the text, whole or streamed.
    one = tmp_path / "one.de"
    one.write_text(first, encoding="utf-8")
    assert read_lines(one) == [line for lines in stream_lines(one, block_bytes=4) for line in lines]
    assert read_lines(one) == ["ein hund", "zwei katzen"]


def test_misaligned_files_name_both_files_and_counts(tmp_path: Path) -> None:
    write_split(tmp_path, "train", GERMAN, ENGLISH[:2])
    with pytest.raises(ValueError) as error:
        load_multi30k("train", data_dir=tmp_path)
    message = str(error.value)
    assert str(tmp_path / "train.de") in message and str(tmp_path / "train.en") in message
    assert "3 line(s)" in message and "2 line(s)" in message


@pytest.mark.parametrize("side", ["de", "en"])
@pytest.mark.parametrize("blank", ["", "   "])
def test_empty_line_names_file_and_line(tmp_path: Path, side: str, blank: str) -> None:
    german, english = list(GERMAN), list(ENGLISH)
    (german if side == "de" else english)[1] = blank
    write_split(tmp_path, "train", german, english)
    with pytest.raises(ValueError, match=rf"train\.{side}: line 2: expected a non-empty sentence"):
        load_multi30k("train", data_dir=tmp_path)


def test_skip_empty_drops_counts_and_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    german, english = list(GERMAN), list(ENGLISH)
    german[0] = ""
    english[2] = " "
    write_split(tmp_path, "train", german, english)
    with caplog.at_level(logging.WARNING):
        result = read_multi30k("train", data_dir=tmp_path, skip_empty=True)
    assert result.pairs == [(GERMAN[1], ENGLISH[1])]
    assert result.num_skipped == 2 and result.skipped_line_numbers == [1, 3]
    assert "skipped 2 pair(s)" in caplog.text
    assert load_multi30k("train", data_dir=tmp_path, skip_empty=True) == result.pairs


def test_missing_file_is_named(tmp_path: Path) -> None:
    write_split(tmp_path, "train", GERMAN, ENGLISH)
    (tmp_path / "train.en").unlink()
    with pytest.raises(FileNotFoundError, match=r"train\.en"):
        load_multi30k("train", data_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match=r"val\.de"):
        load_multi30k("val", data_dir=tmp_path)


def test_the_later_test_sets_are_named_splits(tmp_path: Path) -> None:
    assert MULTI30K_DEFAULT_SPLITS == ("train", "val", "test_2016_flickr")
    assert MULTI30K_EXTRA_TEST_SPLITS == ("test_2017_flickr", "test_2017_mscoco", "test_2018_flickr")
    assert MULTI30K_SPLITS == MULTI30K_DEFAULT_SPLITS + MULTI30K_EXTRA_TEST_SPLITS
    # Counts from the official README's statistics; it gives none for test_2018_flickr.
    assert MULTI30K_LINE_COUNTS["test_2017_flickr"] == 1000
    assert MULTI30K_LINE_COUNTS["test_2017_mscoco"] == 461
    assert "test_2018_flickr" not in MULTI30K_LINE_COUNTS
    for split in MULTI30K_EXTRA_TEST_SPLITS:
        write_split(tmp_path, split, GERMAN, ENGLISH)
        assert load_multi30k(split, data_dir=tmp_path) == list(zip(GERMAN, ENGLISH))
        assert load_multi30k(split, tmp_path, source_language="en", target_language="de") == list(zip(ENGLISH, GERMAN))


@pytest.mark.parametrize("split", MULTI30K_SPLITS)
def test_a_missing_split_says_how_to_download_it(tmp_path: Path, split: str) -> None:
    write_split(tmp_path / "multi30k", "train" if split != "train" else "val", GERMAN, ENGLISH)
    if split in MULTI30K_DEFAULT_SPLITS:  # the command that fetches them, into the folder looked in
        hint = f"run `transformer-lab download multi30k --to {tmp_path}"
    else:
        hint = f"download_multi30k(cache_dir, splits=['{split}']) fetches it"
    with pytest.raises(FileNotFoundError) as error:
        load_multi30k(split, data_dir=tmp_path)
    assert hint in str(error.value)
    assert str(tmp_path / "multi30k" / f"{split}.de") in str(error.value)
    # Also when the data folder itself does not exist yet.
    with pytest.raises(FileNotFoundError) as error:
        read_multi30k(split, data_dir=tmp_path / "not_downloaded_yet")
    assert "not_downloaded_yet" in str(error.value) and hint.replace(str(tmp_path), "") in str(error.value)


def test_only_one_side_present_names_the_missing_file(tmp_path: Path) -> None:
    write_split(tmp_path, "test_2018_flickr", GERMAN, ENGLISH)
    (tmp_path / "test_2018_flickr.de").unlink()
    with pytest.raises(FileNotFoundError, match=r"test_2018_flickr\.de'.*splits=\['test_2018_flickr'\]"):
        load_multi30k("test_2018_flickr", data_dir=tmp_path)


def test_invalid_utf8_names_file_and_line(tmp_path: Path) -> None:
    write_split(tmp_path, "train", GERMAN, ENGLISH)
    (tmp_path / "train.de").write_bytes(b"gut\nschl\xe4gt\n\xc3\xa4\n")
    with pytest.raises(ValueError, match=r"train\.de: line 2: expected UTF-8 text.*byte column 5"):
        load_multi30k("train", data_dir=tmp_path)


def test_empty_files_are_an_error(tmp_path: Path) -> None:
    write_split(tmp_path, "train", [], [])
    with pytest.raises(ValueError, match="expected at least one line"):
        read_parallel_text(tmp_path / "train.de", tmp_path / "train.en")


def test_bad_arguments(data_root: Path) -> None:
    with pytest.raises(ValueError, match="split must be one of"):
        load_multi30k("test", data_dir=data_root)
    with pytest.raises(ValueError, match="must differ"):
        load_multi30k("train", data_dir=data_root, source_language="de", target_language="de")
    with pytest.raises(ValueError, match="source_language"):
        load_multi30k("train", data_dir=data_root, source_language="DE")
    with pytest.raises(ValueError, match="skip_empty must be a bool"):
        load_multi30k("train", data_dir=data_root, skip_empty=1)  # type: ignore[arg-type]


@needs_shared_multi30k
def test_real_data_counts_and_checksums() -> None:
    # The default splits must be in the shared copy; the later test sets are checked
    # where someone has downloaded them into it (this team's copy does not hold them).
    present = [
        split
        for split in MULTI30K_SPLITS
        if split in MULTI30K_DEFAULT_SPLITS
        or all((SHARED_MULTI30K / f"{split}.{language}").is_file() for language in ("de", "en"))
    ]
    assert set(MULTI30K_DEFAULT_SPLITS) <= set(present)
    for split in present:
        for language in ("de", "en"):
            name = f"{split}.{language}"
            assert sha256_of_file(SHARED_MULTI30K / name) == MULTI30K_SHA256[name], name
        pairs = load_multi30k(split, data_dir=SHARED_DATA)
        if split in MULTI30K_LINE_COUNTS:
            assert len(pairs) == MULTI30K_LINE_COUNTS[split]
        assert all(source.strip() and target.strip() for source, target in pairs)
    assert load_multi30k("val", data_dir=SHARED_MULTI30K)[0][0].startswith("Eine Gruppe von Männern")
