"""AG News (AG's News Topic Classification Dataset, version 3): read and download.

The original release (Zhang, Zhao and LeCun, 2015) is two CSV files, `train.csv`
(120,000 rows) and `test.csv` (7,600 rows), and `classes.txt` (the class names, one per
line: World, Sports, Business, Sci/Tech). Each CSV line is one article:

    "3","Fears for T N pension after talks","Unions representing workers at ..."

- no header, exactly three fields: class id (1-4), title, description;
- every field is double-quoted, and an inner `"` is written `""`;
- a line break inside a field is written with a backslash. The release's readme says
  "\\n", but the files themselves show that the backslash alone marks the break and the
  letter after it belongs to the next word: `"social\\network"`, `"big\\nose"`,
  `"said\\nothing"`, `"A second\\team of rocketeers"`. Reading `\\n` as a newline escape
  would turn "network" into "etwork", so this reader does not; it decodes
    * `\\$` as a dollar sign (`"over \\$1 billion"`),
    * any other run of backslashes (`\\`, `\\\\`) as one line break "\\n".
  (`read_ag_news_csv(..., unescape=False)` keeps the fields exactly as in the file.)
  The release also carries HTML-entity leftovers such as `#39;` for an apostrophe and
  `&lt;`; they are part of the data and are kept.

Because line breaks are escaped, one physical line is one record, so errors can name the
line. A malformed line (a field count other than 3, a class id outside 1-4, bad quoting:
an unclosed quote, a quote inside an unquoted field, text after a closing quote) raises a
ValueError naming the file, the line and what is wrong; with `skip_malformed=True` such
lines are skipped instead, counted, listed in the result and logged as a warning.
Unquoted fields without quotes inside are accepted, so the same rows re-serialised with
minimal quoting (but without a header) read the same.

Where the files are looked for: `data_dir` (or TRANSFORMER_LAB_DATA, else the default data
folder) names the data root holding `ag_news/`, or that folder itself (see
`transformer_lab.data.dataset_folder`).
The training file is `ag_news/train.csv` when present, otherwise the 12,000-row subset
`ag_news/train_subset/train_subset_12k.csv` (see `transformer_lab.data.ag_news_subset`);
any file of this format can be named explicitly.

`download_ag_news` fetches the release's files at a pinned commit (`train.csv` checked
against torchtext's published MD5, the others by sha256). Sources, counts and terms:
docs/data.md (for research and other non-commercial use, the release's readme says).
"""

from __future__ import annotations

import itertools
import logging
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from transformer_lab.data._checks import check_bool
from transformer_lab.data.dataset_folder import dataset_missing, resolve_dataset_dir
from transformer_lab.data.download import download_file
from transformer_lab.data.line_stream import stream_lines
from transformer_lab.data.parallel_text import read_lines

logger = logging.getLogger(__name__)

AG_NEWS_FOLDER = "ag_news"
AG_NEWS_CLASSES: tuple[str, ...] = ("World", "Sports", "Business", "Sci/Tech")
AG_NEWS_SPLITS: tuple[str, ...] = ("train", "test")
CLASSES_FILE = "classes.txt"
FULL_TRAIN_FILE = "train.csv"
TRAIN_SUBSET_FILE = "train_subset/train_subset_12k.csv"
TEST_FILE = "test.csv"
NUM_FIELDS = 3

README_FILE = "readme.txt"

# A copy of the release's folder at a pinned commit (its train.csv has the git blob id
# 694aa19971315410e000404523796b76349d3c1d that the release's other copies share).
AG_NEWS_URL = (
    "https://raw.githubusercontent.com/moon-hotel/TransformerClassification/"
    "34c6727cc7660d8063e9770745f64f65c89a1fa0/data/ag_news_csv"
)
# Published by torchtext; the full train.csv's sha256 is not published anywhere.
AG_NEWS_TRAIN_MD5 = "b1a00f826fdfbd249f79597b59e1dc12"
# test.csv's MD5 equals torchtext's published d52ea96a97a2d943681189a97654912d.
AG_NEWS_SHA256: dict[str, str] = {
    TEST_FILE: "521465c2428ed7f02f8d6db6ffdd4b5447c1c701962353eb2c40d548c3c85699",
    CLASSES_FILE: "612dbfa932f07a6ed837295a7d5746ce7412e7bb4bc32ba919fdb3cda3a1b9b5",
    README_FILE: "779c2e6bbf93dd810d9c7b318006daef7a4bfc34062002461d251dc10fb9f58c",
}

# A backslash before "$" escapes the dollar sign; any other run of backslashes is a break.
_ESCAPE_PATTERN = re.compile(r"\\(\$)|\\+")


@dataclass(frozen=True)
class NewsArticle:
    """One row of an AG News file.

    Attributes:
        label: the class index from 0: the file's class id (1-4) minus 1.
        title, description: the two text fields (escapes decoded unless asked not to).
        line_number: the 1-based line of the file it came from.
    """

    label: int
    title: str
    description: str
    line_number: int

    @property
    def text(self) -> str:
        """Title and description as one text, what a classifier reads."""
        return join_title_and_description(self.title, self.description)


@dataclass
class AgNewsFile:
    """The articles read from one AG News CSV file, with what was skipped.

    Attributes:
        articles: the well-formed rows in file order.
        path: the file read.
        malformed: (1-based line number, what is wrong) of every skipped line; only ever
            non-empty with `skip_malformed=True`.
    """

    articles: list[NewsArticle]
    path: Path
    malformed: list[tuple[int, str]] = field(default_factory=list)

    @property
    def num_skipped(self) -> int:
        """How many malformed lines were skipped."""
        return len(self.malformed)

    def __len__(self) -> int:
        return len(self.articles)


def join_title_and_description(title: str, description: str) -> str:
    """The text a classifier reads: the title, a line break, the description.

    A line break (not a space) keeps where the title ends visible to the tokenizer.
    """
    return f"{title}\n{description}"


def unescape_field(raw: str) -> str:
    r"""Decode the release's backslash escapes (see the module docstring).

    The file's `over \$1 billion, a second\team` becomes "over $1 billion, a second",
    a line break, "team".
    """
    return _ESCAPE_PATTERN.sub(lambda match: "$" if match.group(1) else "\n", raw)


class _BadQuoting(ValueError):
    """A CSV quoting error at a 1-based column (private; turned into a line error)."""

    def __init__(self, column: int, message: str) -> None:
        super().__init__(f"bad quoting at column {column}: {message}")


def split_csv_line(line: str) -> list[str]:
    """Split one CSV record (RFC 4180 quoting, no line breaks inside fields) into fields.

    A field is either quoted (`"..."`, an inner quote written `""`) or plain (no quote
    inside). Raises ValueError naming the column of an unclosed quote, a quote inside a
    plain field, or anything but a comma or the line's end after a closing quote.
    """
    fields: list[str] = []
    position, length = 0, len(line)
    while True:
        if position < length and line[position] == '"':
            opening, cursor, pieces = position, position + 1, []
            while True:
                quote = line.find('"', cursor)
                if quote == -1:
                    raise _BadQuoting(opening + 1, "a quoted field that is never closed")
                if quote + 1 < length and line[quote + 1] == '"':
                    pieces.append(line[cursor : quote + 1])  # "" is one literal quote
                    cursor = quote + 2
                    continue
                pieces.append(line[cursor:quote])
                position = quote + 1
                break
            fields.append("".join(pieces))
        else:
            end = line.find(",", position)
            end = length if end == -1 else end
            plain = line[position:end]
            if '"' in plain:
                raise _BadQuoting(position + plain.index('"') + 1, "a '\"' inside an unquoted field")
            fields.append(plain)
            position = end
        if position == length:
            return fields
        if line[position] != ",":
            raise _BadQuoting(
                position + 1, f"expected ',' or the end of the line after a closing quote, got {line[position]!r}"
            )
        position += 1


def parse_ag_news_line(line: str, unescape: bool = True) -> tuple[int, str, str]:
    """(label from 0, title, description) of one CSV line; ValueError says what is wrong."""
    fields = split_csv_line(line)
    if len(fields) != NUM_FIELDS:
        shown = "an empty line" if line == "" else f"{line[:60]!r}"
        raise ValueError(f"expected {NUM_FIELDS} fields (class, title, description), got {len(fields)} in {shown}")
    class_id, title, description = fields
    valid_ids = [str(number) for number in range(1, len(AG_NEWS_CLASSES) + 1)]
    if class_id not in valid_ids:
        raise ValueError(f"expected a class id in {', '.join(valid_ids)}, got {class_id[:40]!r}")
    if unescape:
        title, description = unescape_field(title), unescape_field(description)
    return int(class_id) - 1, title, description


def read_ag_news_csv(path: str | os.PathLike[str], skip_malformed: bool = False, unescape: bool = True) -> AgNewsFile:
    """Read one AG News CSV file of the original format (see the module docstring).

    Args:
        path: the CSV file (e.g. `test.csv`, `train.csv` or the 12k training subset).
        skip_malformed: skip malformed lines (counted, listed in the result and logged)
            instead of raising.
        unescape: decode the backslash escapes; False keeps the fields as in the file.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a folder instead of a file, a malformed line (without
            `skip_malformed`), invalid UTF-8, or a file without any article; the message
            names the file and the line.
    """
    malformed: list[tuple[int, str]] = []
    try:
        articles = list(stream_ag_news_csv(path, skip_malformed, unescape, malformed))
    finally:
        log_malformed(path, malformed)
    return AgNewsFile(articles, Path(path), malformed)


def log_malformed(path: str | os.PathLike[str], malformed: list[tuple[int, str]]) -> None:
    """The warning for the malformed lines skipped in ``path`` (line, what is wrong), if any."""
    if malformed:
        logger.warning(
            "%s: skipped %d malformed line(s), the first at line %d: %s",
            path,
            len(malformed),
            malformed[0][0],
            malformed[0][1],
        )


def stream_ag_news_csv(
    path: str | os.PathLike[str],
    skip_malformed: bool = False,
    unescape: bool = True,
    malformed: list[tuple[int, str]] | None = None,
) -> Iterator[NewsArticle]:
    """The articles of `read_ag_news_csv`, one at a time, the file read in bounded blocks (same checks, errors).

    ``malformed`` (a list) receives (line, what is wrong) of every line skipped
    (`log_malformed` tells of them).
    """
    check_bool("skip_malformed", skip_malformed)
    check_bool("unescape", unescape)
    path = Path(path)
    if not path.exists():  # a folder is stream_lines' ValueError ("which is a folder"), not "does not exist"
        raise FileNotFoundError(f"path: expected an AG News CSV file, got {str(path)!r}, which does not exist")
    malformed = [] if malformed is None else malformed
    found = 0
    for line_number, line in enumerate(itertools.chain.from_iterable(stream_lines(path)), start=1):
        try:
            label, title, description = parse_ag_news_line(line, unescape=unescape)
        except ValueError as error:
            if not skip_malformed:
                raise ValueError(
                    f"{path}: line {line_number}: {error} (pass skip_malformed=True to skip such lines)"
                ) from None
            malformed.append((line_number, str(error)))
            continue
        found += 1
        yield NewsArticle(label, title, description, line_number)
    if not found:
        raise ValueError(f"{path}: expected at least one article, got none ({len(malformed)} malformed line(s))")


def resolve_ag_news_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder that holds the AG News files: `<data_dir>/ag_news` or `data_dir` itself."""
    return resolve_dataset_dir(data_dir, AG_NEWS_FOLDER)


def ag_news_path(
    split: str, data_dir: str | os.PathLike[str] | None = None, train_file: str | os.PathLike[str] = ""
) -> Path:
    """The CSV file of `split` ("train" or "test").

    Args:
        split: "train" or "test".
        data_dir: see `resolve_ag_news_dir`; None reads TRANSFORMER_LAB_DATA, else the default folder.
        train_file: for "train", a file name relative to the AG News folder or an
            absolute path; "" takes `train.csv` when present, else the 12k subset.

    Raises:
        FileNotFoundError: the file (or none of the candidates) exists; the message lists
            the paths tried.
    """
    if split not in AG_NEWS_SPLITS:
        raise ValueError(f"split must be one of {', '.join(AG_NEWS_SPLITS)}, got {split!r}")
    folder = resolve_ag_news_dir(data_dir)
    if split == "test":
        candidates = [folder / TEST_FILE]
    elif str(train_file):
        candidates = [folder / train_file]  # an absolute train_file replaces the folder
    else:
        candidates = [folder / FULL_TRAIN_FILE, folder / TRAIN_SUBSET_FILE]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise dataset_missing(
        data_dir,
        AG_NEWS_FOLDER,
        f"expected the AG News {split} file at {' or '.join(repr(str(path)) for path in candidates)}, "
        f"found none; the data folder must hold {AG_NEWS_FOLDER}/ or be that folder itself",
    )


def read_classes_file(path: Path) -> tuple[str, ...]:
    """The class names of the `classes.txt` at ``path``, one a line, or AG_NEWS_CLASSES when there is none.

    Raises ValueError naming the file if it does not hold exactly 4 non-empty, distinct names.
    """
    if not path.is_file():
        return AG_NEWS_CLASSES
    names = tuple(read_lines(path))
    if len(names) != len(AG_NEWS_CLASSES) or any(not name.strip() for name in names):
        raise ValueError(
            f"{path}: expected {len(AG_NEWS_CLASSES)} non-empty class names, one a line, got {list(names)!r}"
        )
    for line, name in enumerate(names, start=1):
        if name in names[: line - 1]:
            # Two classes under one name would merge in every output that goes by name.
            raise ValueError(
                f"{path}: line {line}: expected distinct class names, got {name!r} again "
                f"(line {names.index(name) + 1})"
            )
    return names


def download_ag_news(
    cache_dir: str | os.PathLike[str],
    base_url: str = AG_NEWS_URL,
    splits: Sequence[str] = AG_NEWS_SPLITS,
    timeout: float = 60.0,
    progress: bool = True,
) -> Path:
    """Download the AG News release into `<cache_dir>/ag_news/`, every file checked by hash.

    The CSV files of `splits` (`train.csv` checked against torchtext's published MD5,
    `test.csv` by sha256), then `classes.txt` and the release's `readme.txt` (sha256);
    files already present with the right hash are not fetched again, and a mismatch
    deletes the download and raises a ValueError. Afterwards
    `read_ag_news_csv(ag_news_path(split, cache_dir))` reads the data.

    Returns:
        the `ag_news/` folder.
    """
    if isinstance(splits, str) or not splits:
        raise ValueError(f"splits must be a non-empty sequence of split names, got {splits!r}")
    unknown = [split for split in splits if split not in AG_NEWS_SPLITS]
    if unknown:
        raise ValueError(f"splits must hold only {', '.join(AG_NEWS_SPLITS)}, got {unknown!r}")
    if not isinstance(base_url, str):
        raise ValueError(f"base_url must be a str, got {base_url!r} ({type(base_url).__name__})")
    folder = Path(cache_dir) / AG_NEWS_FOLDER
    base_url = base_url.rstrip("/")
    for split in splits:
        name = FULL_TRAIN_FILE if split == "train" else TEST_FILE
        # The train file is pinned by MD5 and the test file by sha256; the other stays None.
        download_file(
            f"{base_url}/{name}",
            folder / name,
            timeout=timeout,
            expected_md5=AG_NEWS_TRAIN_MD5 if split == "train" else None,
            expected_sha256=None if split == "train" else AG_NEWS_SHA256[name],
            progress=progress,
        )
    for name in (CLASSES_FILE, README_FILE):
        download_file(f"{base_url}/{name}", folder / name, AG_NEWS_SHA256[name], timeout=timeout, progress=progress)
    logger.info("AG News files for %s are in %s", ", ".join(splits), folder)
    return folder
