"""Chinese couplets (对联) in the wb14123 format: read, check, split, download the test set; an upper line's checks.

A split is a folder with two aligned files: `in.txt` holds the upper lines (上联) and
`out.txt` the lower lines (下联), one couplet per line, characters separated by single
spaces, every line ending with a space. A couplet's two lines have the same number of
characters. Lines are returned without the spaces, as plain strings whose characters are
the tokens (`"晚风摇树树还挺"`).

Checks (`couplet_stream`, which reads the files in bounded blocks; the readers here keep every pair):
- misaligned files (different line counts), invalid UTF-8, a missing file: always an error
  naming the file(s);
- a pair with an empty side, or whose two lines differ in length: an error naming the file
  and the 1-based line, unless `skip_invalid=True`, which skips such pairs and counts them
  (by kind, with their line numbers) in the result and in a logged warning;
- `max_length`: pairs whose upper line is longer are skipped and counted (an explicit
  limit, reported; the training set has 58 pairs over 64 characters, up to 533).

Where a split is looked for (`resolve_couplet_split_dir`): `data_dir` (or the environment
variable TRANSFORMER_LAB_DATA, else the default data folder) may be the data root holding `couplet/<split>/`, the
`couplet/` folder holding `<split>/`, or the split folder itself.

Known splits: `test` (wb14123's 4,000 test pairs), `train` (wb14123's 770,491 training
pairs, for users who have them) and `train_couplet_machine` (90,889 pairs from
ZiJianZhao/Couplet-Machine, a different collection, built by
`transformer_lab.data.couplet_machine`; docs/data.md).
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from transformer_lab.data._checks import check_integer, lone_surrogate
from transformer_lab.data.carve_error import CarveError
from transformer_lab.data.chinese import is_punctuation
from transformer_lab.data.couplet_stream import (
    COUPLET_KEYS,
    LOWER_FILE,
    UPPER_FILE,
    CoupletCount,
    CoupletFiles,
    split_characters,
    stream_couplets,
)
from transformer_lab.data.dataset_folder import data_folder_not_a_file, dataset_missing, download_hint
from transformer_lab.data.download import download_file
from transformer_lab.data.pair_stream import count_pairs
from transformer_lab.data.vocabulary import NUM_SPECIAL_TOKENS, UNK_ID, Vocabulary

__all__ = ["COUPLET_KEYS", "LOWER_FILE", "UPPER_FILE", "split_characters"]  # kept here for their readers

_LATIN_LETTERS = re.compile(r"[A-Za-zＡ-Ｚａ-ｚ]")

COUPLET_FOLDER = "couplet"
COUPLET_SPLITS: tuple[str, ...] = ("train", "test", "train_couplet_machine")
# The option of `transformer-lab download couplets` that adds wb14123's training set.
WB14123_TRAIN_OPTION = "--wb14123-train"

# The wb14123 test files, verbatim copies of the release tarball's, at a pinned commit of a
# repository that keeps them as plain files (the release itself is one 27 MB archive).
COUPLET_TEST_URL = (
    "https://raw.githubusercontent.com/moon-hotel/TransformerCouplet/"
    "4c706831565ceadce11adfc9f82c0867dae71e8a/data/couplet/test"
)
COUPLET_TEST_SHA256: dict[str, str] = {
    UPPER_FILE: "93eaba3ec04c17b62fdc9b81207ad65fd1666fc3ff39527d7e2fe9e63cd9699c",
    LOWER_FILE: "d8223fdbbd7c19357b680ee0d24557fb66264c797afe287cbf1b4f53e1467e04",
}

# wb14123's training files, at a pinned commit of a repository that keeps them as plain
# files, verbatim (their git blob ids are those of the release's copies in five
# independent repositories).
WB14123_TRAIN_URL = (
    "https://raw.githubusercontent.com/chiang9/NLP-Chinese_couplet_generation/"
    "c569433bb87db7f765f688ca8c69589aa9d26558/couplet/train"
)
WB14123_TRAIN_GIT_BLOB: dict[str, str] = {
    UPPER_FILE: "70950348b6723a78cfad7804efdad1cb9ac0309d",
    LOWER_FILE: "e5e3fd5fb8e61a45175d7c7b8851036728c3e3dc",
}


@dataclass
class CoupletCorpus:
    """The couplets of one split, with what was skipped and why.

    Attributes:
        pairs: (upper line, lower line) in file order, characters without spaces.
        upper_path, lower_path: the files read.
        skipped_empty, skipped_unequal, skipped_too_long: the 1-based line numbers of the
            pairs skipped because a side was empty, because the two lines differ in
            length (both only with `skip_invalid`), or because the upper line exceeded
            `max_length`.
    """

    pairs: list[tuple[str, str]]
    upper_path: Path
    lower_path: Path
    skipped_empty: list[int] = field(default_factory=list)
    skipped_unequal: list[int] = field(default_factory=list)
    skipped_too_long: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.pairs)

    @property
    def num_skipped(self) -> int:
        return len(self.skipped_empty) + len(self.skipped_unequal) + len(self.skipped_too_long)

    def summary(self) -> dict[str, int]:
        """Counts for logs and run summaries."""
        return CoupletCount(len(self.pairs), self.skipped_empty, self.skipped_unequal, self.skipped_too_long).summary()


def read_couplets(
    folder: str | os.PathLike[str],
    *,
    skip_invalid: bool = False,
    max_length: int | None = None,
    skip_option: str | None = "skip_invalid",
) -> CoupletCorpus:
    """Read `folder/in.txt` and `folder/out.txt` into (upper, lower) pairs; see the module docstring.

    Args:
        folder: a split folder holding in.txt and out.txt.
        skip_invalid: skip (and count) pairs with an empty side or unequal lengths instead
            of raising.
        max_length: skip (and count) pairs whose upper line has more characters; None
            keeps every length.
        skip_option: what the caller calls `skip_invalid`, which the errors advise; None where
            its user has no such option (the errors then advise fixing the file alone).

    Raises:
        FileNotFoundError: the folder or a file is missing.
        ValueError: misaligned files, invalid UTF-8, or (without `skip_invalid`) an empty
            side or unequal lengths; the message names the file and the line.
    """
    return read_couplet_source(
        CoupletFiles.of_split(folder, skip_invalid=skip_invalid, max_length=max_length, skip_option=skip_option)
    )


def read_couplet_source(source: CoupletFiles) -> CoupletCorpus:
    """Every couplet of ``source`` in one list (see `couplet_stream` for the checks), the skips logged."""
    count_pairs(source.files)  # misaligned files are refused before any line is read
    count = CoupletCount()
    pairs = [pair for chunk in stream_couplets(source, count) for pair in chunk]
    count.log(source)
    return CoupletCorpus(
        pairs, source.upper_path, source.lower_path, count.skipped_empty, count.skipped_unequal, count.skipped_too_long
    )


def check_split_name(split: object, name: str = "split", also: str = "") -> str:
    """``split`` if it names a folder (a non-empty name, no path); else a ValueError naming ``name``.

    ``also``: other names the caller takes, put before the folders in the message ("validation, ").
    """
    if not isinstance(split, str) or not split or "/" in split or split in (".", ".."):
        raise ValueError(f"{name}: expected a folder name such as {also}{', '.join(COUPLET_SPLITS)}, got {split!r}")
    return split


def resolve_couplet_split_dir(split: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder of couplet split `split` (see the module docstring for where it looks).

    Raises:
        FileNotFoundError: no candidate folder holds the split; the message lists them and
            the download that fetches it.
    """
    check_split_name(split)
    folder = data_folder_not_a_file(data_dir, COUPLET_FOLDER)
    candidates = [folder / COUPLET_FOLDER / split, folder / split, folder]
    for candidate in candidates:
        if (candidate / UPPER_FILE).is_file():
            return candidate
    tried = ", ".join(repr(str(candidate)) for candidate in candidates)
    option = WB14123_TRAIN_OPTION if split == "train" else ""
    hint = download_hint(COUPLET_FOLDER, data_dir, option) if split in COUPLET_SPLITS else ""
    raise dataset_missing(
        data_dir,
        COUPLET_FOLDER,
        f"expected the couplet split {split!r} ({UPPER_FILE} and {LOWER_FILE}) in one of {tried}; found none",
        hint,
    )


def load_couplets(
    split: str,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    skip_invalid: bool = False,
    max_length: int | None = None,
    skip_option: str | None = "skip_invalid",
) -> CoupletCorpus:
    """Read couplet split `split` from `data_dir` (see `read_couplets` and `resolve_couplet_split_dir`)."""
    folder = resolve_couplet_split_dir(split, data_dir)
    return read_couplets(folder, skip_invalid=skip_invalid, max_length=max_length, skip_option=skip_option)


def punctuation_free(line: str) -> str:
    """``line`` without its punctuation marks (the form in which couplet lines are compared)."""
    if line.isalnum():  # letters and digits only (most lines): no mark to take out, and no per-character check
        return line
    return "".join(character for character in line if not is_punctuation(character))


# How a run's data config sets the count (validation_positions' ``name``).
CARVED_SETTING = "data.num_validation"


def split_validation(
    pairs: list[tuple[str, str]], num_validation: int, seed: int, *, name: str = "num_validation"
) -> tuple[list[tuple[str, str]], list[tuple[str, str]], int]:
    """Carve a seeded random validation set out of training pairs (``name``: see `validation_positions`).

    The couplet collections hold the same couplet more than once, with and without
    punctuation; so that validation measures unseen couplets, training pairs whose upper
    line equals a validation upper line once punctuation is removed are dropped from
    training (and counted).

    Returns:
        (training pairs, validation pairs, training pairs dropped as validation
        duplicates); both lists keep the file order.
    """
    chosen = validation_positions(len(pairs), num_validation, seed, name=name)
    validation = [pair for index, pair in enumerate(pairs) if index in chosen]
    rest = [pair for index, pair in enumerate(pairs) if index not in chosen]
    train, dropped = without_validation_uppers(rest, validation)
    return train, validation, dropped


def validation_positions(count: int, num_validation: int, seed: int, *, name: str = "num_validation") -> set[int]:
    """Which of ``count`` training pairs (0-based, in file order) `split_validation` holds out for validation.

    ``name``: what the caller calls ``num_validation`` in errors; a run's config
    (:data:`CARVED_SETTING`) is also told how to set it or where validation couplets go, in a
    `CarveError`, which a command says in the names its user gave.
    """
    num_validation = check_integer(name, num_validation, minimum=0)
    if num_validation >= count:
        expected = "expected fewer than the {count} training pairs (the validation pairs are carved out of them)"
        if name == CARVED_SETTING:
            raise CarveError(
                "{num_validation}: " + expected + ", got {given}; set a smaller one (--set " + CARVED_SETTING + "=N) "
                "or give validation couplets ({valid_files})",
                ("num_validation", "valid_files"),
                count=count,
                given=num_validation,
            )
        raise ValueError(f"{name}: {expected.format(count=count)}, got {num_validation}")
    return set(random.Random(seed).sample(range(count), num_validation))


def validation_upper_lines(validation: Iterable[tuple[str, str]]) -> set[str]:
    """The validation upper lines as a training upper line must not repeat them: without punctuation."""
    return {punctuation_free(upper) for upper, _ in validation}


def without_validation_uppers(
    pairs: list[tuple[str, str]], validation: list[tuple[str, str]]
) -> tuple[list[tuple[str, str]], int]:
    """The pairs whose upper line, punctuation removed, is no validation upper line; and how many were left out.

    The one rule that keeps validation unseen, for every source of training pairs (the
    split, the backwards pairs, extra splits). The kept pairs keep their order.
    """
    held_out = validation_upper_lines(validation)
    kept = [pair for pair in pairs if punctuation_free(pair[0]) not in held_out]
    return kept, len(pairs) - len(kept)


def download_couplet_test(
    cache_dir: str | os.PathLike[str], base_url: str = COUPLET_TEST_URL, timeout: float = 60.0, progress: bool = True
) -> Path:
    """Download wb14123's test split into `<cache_dir>/couplet/test/`, checked by sha256.

    Files already present with the right hash are not fetched again; a mismatch deletes
    the download and raises a ValueError naming the file and both hashes. Afterwards
    `load_couplets("test", cache_dir)` reads it.
    """
    folder = Path(cache_dir) / COUPLET_FOLDER / "test"
    base_url = base_url.rstrip("/")
    for name, sha256 in COUPLET_TEST_SHA256.items():
        download_file(f"{base_url}/{name}", folder / name, sha256, timeout=timeout, progress=progress)
    return folder


def download_wb14123_train(
    cache_dir: str | os.PathLike[str], base_url: str = WB14123_TRAIN_URL, timeout: float = 60.0, progress: bool = True
) -> Path:
    """Download wb14123's 770,491 training pairs into `<cache_dir>/couplet/train/` (about 60 MB).

    Checked by their git blob ids (`WB14123_TRAIN_GIT_BLOB`; no sha256 of them is
    published); `load_couplets("train", cache_dir)` reads them, and
    `--set data.train_split=train` trains the couplet task on them.
    """
    folder = Path(cache_dir) / COUPLET_FOLDER / "train"
    base_url = base_url.rstrip("/")
    for name, blob in WB14123_TRAIN_GIT_BLOB.items():
        download_file(f"{base_url}/{name}", folder / name, expected_git_blob=blob, timeout=timeout, progress=progress)
    return folder


def _printable(characters: Sequence[str]) -> str:
    """The characters as text a terminal shows as they are: control, format and zero-width ones escaped (\\u200b)."""
    return "".join(character if character.isprintable() else f"\\u{ord(character):04x}" for character in characters)


def check_upper_line(
    upper: str, vocabulary: Vocabulary, max_len: int, given: str | None = None
) -> tuple[str | None, str | None]:
    """(error, note) for one upper line (already without spaces); both None when it is fine.

    ``given``: the line as the user typed it (spaces and all), which an error quotes.
    """
    shown = upper if given is None else given
    if not upper:
        return "empty upper line: expected Chinese characters, got nothing", None
    if given is not None and "\t" in given:
        # Spaces between characters are ignored, but a tab is a table's: the pair's two lines read as one.
        tab = f"upper line {shown!r} holds a tab: expected one upper line (a file of pairs? give its upper lines)"
        return tab, None
    surrogate = lone_surrogate(upper)
    if surrogate is not None:
        # Undecodable input bytes smuggled in by surrogateescape: no character to answer, and
        # no UTF-8 form to print.
        return f"upper line has {surrogate}: expected valid Unicode text (undecodable input bytes?)", None
    latin = sorted(set(_LATIN_LETTERS.findall(upper)))
    if latin:
        return (
            f"upper line {shown!r} contains Latin letters {''.join(latin)!r}: expected a line of Chinese characters",
            None,
        )
    if len(upper) >= max_len:
        return f"upper line of {len(upper)} characters: expected at most {max_len - 1} (the model's max_len - 1)", None
    if all(is_punctuation(character) for character in upper):
        return f"upper line {shown!r} is only punctuation: expected Chinese characters", None
    unseen = sorted({character for character in upper if character not in vocabulary})
    if unseen:
        return None, f"characters never seen in training, read as <unk>: {_printable(unseen)}"
    return None, None


def punctuation_stand_in(vocabulary: Vocabulary) -> int | None:
    """The id that an unseen punctuation mark of an upper line is read as: '，' if known, else any known mark.

    Read as <unk> the mark would count as a character position, and the lower line would
    get a character under it.
    """
    if "，" in vocabulary:
        return vocabulary.token_to_id("，")
    marks = [
        index for index, token in enumerate(vocabulary.tokens) if index >= NUM_SPECIAL_TOKENS and is_punctuation(token)
    ]
    return marks[0] if marks else None


def encode_upper(upper: str, vocabulary: Vocabulary, stand_in: int | None) -> list[int]:
    """The ids of ``upper``'s characters, an unseen punctuation mark read as ``stand_in`` (`punctuation_stand_in`)."""
    ids = vocabulary.encode(list(upper))
    if stand_in is None:
        return ids
    return [
        stand_in if token_id == UNK_ID and is_punctuation(character) else token_id
        for character, token_id in zip(upper, ids)
    ]


def restore_marks(upper: str, lower: list[str], punctuation_mode: str) -> str:
    """In "copy" mode, the upper line's own marks under its marks (an unseen mark was decoded as a stand-in)."""
    if punctuation_mode != "copy" or len(lower) != len(upper):
        return "".join(lower)
    return "".join(mark if is_punctuation(mark) else character for mark, character in zip(upper, lower))
