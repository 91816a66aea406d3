"""AG News's 12,000-row training subset, rebuilt byte for byte from its public source.

The classification preset's documented figures were trained on these rows: 12,000 rows
of the release's 120,000-row `train.csv`, in a random order, published as the validation
split of the repository `yxhong-tw/AG-News-Exercise` in Kaggle's re-serialisation (a
header `Class Index,Title,Description`, minimal quoting). `build_ag_news_subset` writes
them back in the release's form (no header, every field quoted, LF), the form
`read_ag_news_csv` reads; the same rewriting of the release's `test.csv` gives back its
MD5 exactly, so nothing is lost. The result's sha256 is pinned (`AG_NEWS_SUBSET_SHA256`).

Three rows carry a Kaggle/Excel artefact: a title that began with "-" became "#NAME?";
their descriptions are intact. None of the rows is in `test.csv`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
from pathlib import Path

from transformer_lab.atomic_files import write_through_temporary
from transformer_lab.data.download import download_file, sha256_of_file

SUBSET_FOLDER = "train_subset"
KAGGLE_FILE = "validation_12k_kaggle_format.csv"
SUBSET_FILE = "train_subset_12k.csv"
KAGGLE_HEADER = ["Class Index", "Title", "Description"]

AG_NEWS_SUBSET_URL = (
    "https://raw.githubusercontent.com/yxhong-tw/AG-News-Exercise/"
    "0d786f2fd76ecfe0989a7ad3eaf9089e63890b12/data/formal/validation.csv"
)
KAGGLE_SHA256 = "0aaa67e1447e9d9cbc09b3470c2e30568ea7cc253d8ce4405d0e60954e2c74f7"
AG_NEWS_SUBSET_SHA256 = "cb926ad2bbcc29d1f4e51a62fe15442ff03cf789b91178530594540e48672e50"


def rewrite_kaggle_rows(kaggle_path: str | os.PathLike[str]) -> bytes:
    """The rows of a Kaggle-format AG News file in the release's serialisation.

    Raises:
        ValueError: the header is not Kaggle's, or a row has other than 3 fields; the
            message names the file and the line.
    """
    with open(kaggle_path, encoding="utf-8", newline="") as file:
        reader = csv.reader(file, strict=True)
        header = next(reader, None)
        if header != KAGGLE_HEADER:
            raise ValueError(f"{kaggle_path}: line 1: expected the header {','.join(KAGGLE_HEADER)}, got {header!r}")
        out = io.StringIO()
        writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
        for row in reader:
            if len(row) != len(KAGGLE_HEADER):
                raise ValueError(f"{kaggle_path}: line {reader.line_num}: expected 3 fields, got {len(row)}")
            writer.writerow(row)
    return out.getvalue().encode("utf-8")


def build_ag_news_subset(
    kaggle_path: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    expected_sha256: str = AG_NEWS_SUBSET_SHA256,
) -> Path:
    """Write the subset of `kaggle_path` to `destination` atomically, checked by sha256.

    A result whose sha256 differs is not written (ValueError naming both hashes).
    """
    destination = Path(destination)
    data = rewrite_kaggle_rows(kaggle_path)
    actual = hashlib.sha256(data).hexdigest()  # checked before a byte is written
    if actual != expected_sha256:
        raise ValueError(
            f"{destination}: sha256 mismatch: expected {expected_sha256}, got {actual} after rewriting "
            f"{kaggle_path}; nothing was written"
        )
    # A temporary name of its own: two builds at once renamed away each other's fixed-name partial.
    write_through_temporary(destination, lambda file: file.write(data))
    return destination


def download_ag_news_subset(
    ag_news_dir: str | os.PathLike[str],
    url: str = AG_NEWS_SUBSET_URL,
    timeout: float = 60.0,
    progress: bool = True,
    expected_sha256: tuple[str, str] = (KAGGLE_SHA256, AG_NEWS_SUBSET_SHA256),
) -> Path:
    """Fetch the Kaggle-format source into `<ag_news_dir>/train_subset/` and build the subset beside it.

    `expected_sha256` holds the source's and the subset's sha256. A subset already present
    with its hash is kept without any network access.

    Returns:
        the subset file, `<ag_news_dir>/train_subset/train_subset_12k.csv`.
    """
    folder = Path(ag_news_dir) / SUBSET_FOLDER
    destination = folder / SUBSET_FILE
    source_sha256, subset_sha256 = expected_sha256
    if destination.is_file() and sha256_of_file(destination) == subset_sha256:
        return destination
    source = download_file(url, folder / KAGGLE_FILE, source_sha256, timeout=timeout, progress=progress)
    return build_ag_news_subset(source, destination, subset_sha256)
