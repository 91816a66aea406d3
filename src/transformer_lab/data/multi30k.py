"""Multi30k task 1 (image descriptions, German <-> English): read and download.

Layout: a folder `multi30k/` holding `<split>.<language>` files, one sentence per line,
line i of `train.de` aligned with line i of `train.en`. The splits are `train` (29,000
pairs), `val` (1,014) and `test_2016_flickr` (1,000), the ones this team's machines hold,
and the later official test sets `test_2017_flickr` (1,000), `test_2017_mscoco` (461,
the "ambiguous COCO" set) and `test_2018_flickr`, which a user with a network fetches
with `download_multi30k(cache_dir, splits=[...])`; they are never downloaded unasked.

Where the data is looked for: `data_dir`, or when it is None the environment variable
`TRANSFORMER_LAB_DATA`, else the default data folder that `transformer-lab download
multi30k` fills (`transformer_lab.data.dataset_folder`). Any of them may name

- the data root that *contains* a `multi30k/` folder (for example `~/data`, the
  same root the other readers use), or
- the `multi30k/` folder itself (for example `~/data/multi30k`).

The rule is: if `<folder>/multi30k` is a directory it is used, otherwise `<folder>` must
hold the files. Errors name the paths they tried.

The files are read strictly by `read_parallel_text` (misaligned files, empty lines,
invalid UTF-8 and missing files are errors naming the file and the line); see
`transformer_lab.data.parallel_text`.

`download_multi30k` fetches the official gzip files of the `multi30k/dataset` repository
on GitHub (`data/task1/raw/<split>.<language>.gz`, pinned to one commit), decompresses
them into a cache folder and checks the sha256 of each decompressed file against
`MULTI30K_SHA256`. Source and terms: the data README (Elliott et al., 2016, "Multi30K:
Multilingual English-German Image Descriptions"; for non-commercial research and
education).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from transformer_lab.data._checks import check_bool

# DATA_ENVIRONMENT_VARIABLE is re-exported here, where callers found it before AG News shared it.
from transformer_lab.data.dataset_folder import (  # noqa: F401
    DATA_ENVIRONMENT_VARIABLE,
    dataset_missing,
    download_hint,
    resolve_dataset_dir,
)
from transformer_lab.data.download import download_file
from transformer_lab.data.parallel_text import ParallelText, read_parallel_text

logger = logging.getLogger(__name__)

MULTI30K_FOLDER = "multi30k"
# What `download_multi30k` fetches when no splits are named: the data every task trains
# and scores on. The later test sets are opt-in, so that no caller downloads more than it did.
MULTI30K_DEFAULT_SPLITS: tuple[str, ...] = ("train", "val", "test_2016_flickr")
MULTI30K_EXTRA_TEST_SPLITS: tuple[str, ...] = ("test_2017_flickr", "test_2017_mscoco", "test_2018_flickr")
MULTI30K_SPLITS: tuple[str, ...] = MULTI30K_DEFAULT_SPLITS + MULTI30K_EXTRA_TEST_SPLITS
MULTI30K_LANGUAGES: tuple[str, ...] = ("de", "en")

# The raw files of the official repository at the commit the shared copy was compared with.
MULTI30K_URL = (
    "https://raw.githubusercontent.com/multi30k/dataset/" "a3d2e0d26b56f3846f66a952536ffed4e401d05a/data/task1/raw"
)

# sha256 of the *decompressed* files (the official repository publishes no checksums;
# these were taken from files byte-identical to its .gz contents).
MULTI30K_SHA256: dict[str, str] = {
    "train.de": "2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72",
    "train.en": "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6",
    "val.de": "660e09eb7e1da2f856ea13ee5ad3cf6d36b3d5b0b733c857e94c5747a3dfc660",
    "val.en": "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227",
    "test_2016_flickr.de": "4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16",
    "test_2016_flickr.en": "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182",
    # The later test sets: hashes as published with the files (not recomputed here; a
    # download that disagrees is deleted and reported).
    "test_2017_flickr.de": "c3078bc3b36808bf9d20eb2347ed6137016179ef59ec0d2b9b8ecc3fb2880081",
    "test_2017_flickr.en": "ce1450ddc5ab0834502579d77a170849952e15a2938b34cc503bdc25ebb4fb98",
    "test_2017_mscoco.de": "58277df3c75f92f7145a11b910b553d1cf82c439249d4dc237c899609eafac22",
    "test_2017_mscoco.en": "43051fdfa86fd5395182e718a94ca67b1b227b9f7c79596ff0f6b813216981d2",
    "test_2018_flickr.de": "39fcc8b3331d76fb42d648d019c6898b0d5e58baac87bc2a0bb93f44ec8db207",
    "test_2018_flickr.en": "4e585c2dd525911a6ea7730e9d0b516239af3f1b1ffae6a2130223cfb639f25e",
}

# Above the largest file (train.de, 2.1 MB) with room: a gzip body that expands past it is not Multi30k.
MULTI30K_MAX_BYTES = 64 << 20

_LANGUAGE_PATTERN = re.compile(r"[a-z]{2,3}")


def _check_split(split: object) -> str:
    if split not in MULTI30K_SPLITS:
        raise ValueError(f"split must be one of {', '.join(MULTI30K_SPLITS)}, got {split!r}")
    return str(split)


def _check_language(name: str, language: object) -> str:
    if not isinstance(language, str) or not _LANGUAGE_PATTERN.fullmatch(language):
        raise ValueError(f"{name} must be a lowercase language code such as 'de' or 'en', got {language!r}")
    return language


def resolve_multi30k_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder that holds the Multi30k files (see the module docstring for the rule).

    Args:
        data_dir: the data root containing `multi30k/`, or the `multi30k/` folder itself;
            None reads TRANSFORMER_LAB_DATA, else takes the default data folder.

    Raises:
        FileNotFoundError: the folder does not exist.
    """
    return resolve_dataset_dir(data_dir, MULTI30K_FOLDER)


def read_multi30k(
    split: str,
    data_dir: str | os.PathLike[str] | None = None,
    source_language: str = "de",
    target_language: str = "en",
    skip_empty: bool = False,
    *,
    skip_option: str | None = "skip_empty",
) -> ParallelText:
    """Read one Multi30k split with the full report (pairs, files, skipped lines).

    Same arguments as `load_multi30k`; use this form when the number of pairs dropped by
    `skip_empty` matters to the caller (it is also logged as a warning). ``skip_option``:
    how the caller's user asks for `skip_empty`, named in an empty line's error (None: they
    cannot; see `read_parallel_text`).
    """
    split = _check_split(split)
    source_language = _check_language("source_language", source_language)
    target_language = _check_language("target_language", target_language)
    if source_language == target_language:
        raise ValueError(f"source_language and target_language must differ, got {source_language!r} for both")
    check_bool("skip_empty", skip_empty)
    if split in MULTI30K_DEFAULT_SPLITS:
        fetch = download_hint(MULTI30K_FOLDER, data_dir)
    else:
        fetch = f"download_multi30k(cache_dir, splits=[{split!r}]) fetches it into <cache_dir>/{MULTI30K_FOLDER}/"
    try:
        folder = resolve_multi30k_dir(data_dir)
    except FileNotFoundError as error:
        if split in MULTI30K_DEFAULT_SPLITS:
            raise  # its message names the download already
        raise FileNotFoundError(f"{error}; Multi30k split {split!r}: {fetch}") from None
    paths = [folder / f"{split}.{language}" for language in (source_language, target_language)]
    for path in paths:
        if not path.is_file():
            raise dataset_missing(
                data_dir,
                MULTI30K_FOLDER,
                f"expected the Multi30k file {str(path)!r}, which does not exist; the data folder must hold "
                f"{MULTI30K_FOLDER}/ or be that folder itself "
                f"(looked in {str(folder)!r}); split {split!r} is missing there",
                fetch,
            )
    return read_parallel_text(paths[0], paths[1], skip_empty=skip_empty, skip_option=skip_option)


def load_multi30k(
    split: str,
    data_dir: str | os.PathLike[str] | None = None,
    source_language: str = "de",
    target_language: str = "en",
    skip_empty: bool = False,
) -> list[tuple[str, str]]:
    """Read one Multi30k task-1 split as (source sentence, target sentence) pairs.

    Args:
        split: one of MULTI30K_SPLITS: "train", "val", "test_2016_flickr", or a later
            test set ("test_2017_flickr", "test_2017_mscoco", "test_2018_flickr"), which
            must first be fetched with `download_multi30k(cache_dir, splits=[...])`.
        data_dir: a folder containing `multi30k/`, or the `multi30k/` folder itself;
            None reads TRANSFORMER_LAB_DATA, else takes the default data folder.
        source_language, target_language: the file suffixes, "de" and "en" by default
            (swap them for English -> German).
        skip_empty: drop pairs with an empty side instead of raising; the number dropped
            is logged as a warning (and returned by `read_multi30k`).

    Returns:
        the pairs in file order, lines exactly as in the files (no stripping).

    Raises:
        FileNotFoundError: the folder or a file is missing.
        ValueError: misaligned files, an empty line (without
            `skip_empty`), invalid UTF-8; the message names the file and the line.
    """
    return read_multi30k(split, data_dir, source_language, target_language, skip_empty).pairs


def download_multi30k(
    cache_dir: str | os.PathLike[str],
    base_url: str = MULTI30K_URL,
    splits: Sequence[str] = MULTI30K_DEFAULT_SPLITS,
    languages: Sequence[str] = MULTI30K_LANGUAGES,
    expected_sha256: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    progress: bool = True,
) -> Path:
    """Download Multi30k task 1 into `<cache_dir>/multi30k/`, checked by sha256.

    For every split and language, `<base_url>/<split>.<language>.gz` is fetched,
    decompressed to `<cache_dir>/multi30k/<split>.<language>` and its sha256 compared
    with `expected_sha256[f"{split}.{language}"]`; files already present with the right
    hash are not fetched again. Each file is written atomically: a mismatch deletes the
    download and raises a ValueError naming the file, the expected and the actual hash.
    Afterwards `load_multi30k(split, data_dir=cache_dir)` reads the data.

    Args:
        cache_dir: where to put the `multi30k/` folder (created if needed).
        base_url: the folder URL of the gzip files; the official one by default.
        splits: which splits (a subset of MULTI30K_SPLITS); by default the three of
            MULTI30K_DEFAULT_SPLITS. The later test sets are fetched only when named, e.g.
            `splits=["test_2017_flickr", "test_2017_mscoco", "test_2018_flickr"]`.
        languages: which languages; German and English by default.
        expected_sha256: file name -> sha256 of the decompressed file; None uses
            MULTI30K_SHA256. Every requested file must have an entry.
        timeout: seconds to wait on each connection.
        progress: show a progress bar per file (on a terminal only).

    Returns:
        the `multi30k/` folder.
    """
    if isinstance(splits, str) or isinstance(languages, str):
        raise ValueError(f"splits and languages must be sequences of names, got {splits!r} and {languages!r}")
    splits = [_check_split(split) for split in splits]
    languages = [_check_language("languages item", language) for language in languages]
    if not splits or not languages:
        raise ValueError(f"splits and languages must be non-empty, got {splits!r} and {languages!r}")
    hashes = MULTI30K_SHA256 if expected_sha256 is None else dict(expected_sha256)
    names = [f"{split}.{language}" for split in splits for language in languages]
    unknown = [name for name in names if name not in hashes]
    if unknown:
        raise ValueError(
            f"expected_sha256 must hold a sha256 for every file to download, got none for "
            f"{', '.join(unknown)}; nothing is downloaded unverified"
        )
    if not isinstance(base_url, str):
        raise ValueError(f"base_url must be a str, got {base_url!r} ({type(base_url).__name__})")
    folder = Path(cache_dir) / MULTI30K_FOLDER
    base_url = base_url.rstrip("/")
    for name in names:
        download_file(
            f"{base_url}/{name}.gz",
            folder / name,
            hashes[name],
            gunzip=True,
            timeout=timeout,
            progress=progress,
            max_bytes=MULTI30K_MAX_BYTES,
        )
    logger.info("Multi30k files %s are in %s", ", ".join(names), folder)
    return folder
