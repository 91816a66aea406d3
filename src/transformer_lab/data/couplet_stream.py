"""Couplets read from their files in bounded chunks and checked: equal lengths, bad pairs skipped and counted.

The files are those of `pair_stream` (two aligned line files, one TSV file, JSON Lines, with
the keys "upper" and "lower") read block by block; each pair is then checked as a couplet:
its two lines, without their separating spaces, must be equally long (an error naming the
lower file and the line, or skipped and counted with ``skip_invalid``), and a pair whose
upper line is longer than ``max_length`` is skipped and counted. In two line files an
empty side is an error, or skipped and counted with ``skip_invalid``; in the one-file forms
it is always an error. `CoupletCount` keeps what a pass kept and skipped (the lines of the
skipped pairs), so that a corpus can be counted in one pass and read again in the next
without ever being held whole.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from transformer_lab.data import pair_stream
from transformer_lab.data._checks import check_bool, check_integer
from transformer_lab.data.pair_stream import PairFiles, chunked, count_pairs, numbered_pairs
from transformer_lab.data.parallel_text import log_empty_pairs, non_empty_pair

logger = logging.getLogger(__name__)

UPPER_FILE = "in.txt"
LOWER_FILE = "out.txt"
# The JSON keys (and TSV header) of the user's own couplet files.
COUPLET_KEYS = ("upper", "lower")
# A TSV first line naming the columns in Chinese is a header too, not a couplet to learn.
COUPLET_HEADERS = (("上联", "下联"),)


def split_characters(line: str) -> str:
    """A couplet line as its characters, without the separating spaces.

    Works for the files' form (`"晚 风 摇 "`) and for typed input (`"晚风摇"`) alike.
    """
    return "".join(line.split())


@dataclass(frozen=True)
class CoupletFiles:
    """Where couplets are read from (`PairFiles` with the keys "upper" and "lower") and how strictly."""

    files: PairFiles
    skip_invalid: bool = False
    max_length: int | None = None  # skip (and count) pairs whose upper line is longer; None keeps every length
    where: Path | None = None  # what the skip warnings name: a split's folder (None: the upper file)
    # What the caller calls `skip_invalid`, for the errors' advice; None where its user has no such option.
    skip_option: str | None = "skip_invalid"

    def __post_init__(self) -> None:
        _check_options(self.skip_invalid, self.max_length)

    @classmethod
    def of_split(
        cls,
        folder: str | os.PathLike[str],
        *,
        skip_invalid: bool = False,
        max_length: int | None = None,
        skip_option: str | None = "skip_invalid",
    ) -> CoupletFiles:
        """The split folder ``folder`` (its `in.txt` and `out.txt`); a missing file is a FileNotFoundError naming it."""
        _check_options(skip_invalid, max_length)
        folder = Path(folder)
        paths = (folder / UPPER_FILE, folder / LOWER_FILE)
        for path in paths:
            if not path.is_file():
                raise FileNotFoundError(
                    f"expected the couplet file {str(path)!r}, which does not exist; a couplet split "
                    f"folder holds {UPPER_FILE} (upper lines) and {LOWER_FILE} (lower lines)"
                )
        return cls(PairFiles(paths, "lines", *COUPLET_KEYS), skip_invalid, max_length, folder, skip_option)

    @classmethod
    def of_files(
        cls,
        paths: Sequence[str | os.PathLike[str]],
        file_format: str = "",
        *,
        skip_invalid: bool = False,
        max_length: int | None = None,
        name: str = "couplet files",
        skip_option: str | None = "skip_invalid",
    ) -> CoupletFiles:
        """The user's couplet files in any form of `pair_files` (the form from ``file_format`` or the files).

        ``name`` is what the caller calls ``paths`` (``--train``), for errors about the list itself.
        """
        _check_options(skip_invalid, max_length)
        stems = [Path(path).stem.lower() for path in paths]
        if len(stems) == 2 and stems in (["out", "in"], ["lower", "upper"]):
            # The data folder's names, in.txt the upper lines: read as given, the run would train lower -> upper.
            raise ValueError(
                f"{name}: expected the upper lines' file first, got {str(paths[0])!r} then {str(paths[1])!r}, whose "
                "names say lower then upper; swap them (data.add_reversed_pairs trains both directions)"
            )
        return cls(
            PairFiles.of(paths, *COUPLET_KEYS, file_format, name=name, sides=COUPLET_KEYS, headers=COUPLET_HEADERS),
            skip_invalid,
            max_length,
            skip_option=skip_option,
        )

    @property
    def upper_path(self) -> Path:
        return self.files.paths[0]

    @property
    def lower_path(self) -> Path:
        return self.files.paths[-1]


def _check_options(skip_invalid: object, max_length: object) -> None:
    check_bool("skip_invalid", skip_invalid)
    if max_length is not None:
        check_integer("max_length", max_length, minimum=1)


@dataclass
class CoupletCount:
    """What a pass over couplet files kept (a count) and skipped (the 1-based lines, by why)."""

    pairs: int = 0
    skipped_empty: list[int] = field(default_factory=list)
    skipped_unequal: list[int] = field(default_factory=list)
    skipped_too_long: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        """Counts for logs and run summaries."""
        return {
            "pairs": self.pairs,
            "skipped_empty": len(self.skipped_empty),
            "skipped_unequal_length": len(self.skipped_unequal),
            "skipped_too_long": len(self.skipped_too_long),
        }

    def log(self, source: CoupletFiles) -> None:
        """One warning per kind of pair skipped (none when nothing was)."""
        where = source.upper_path if source.where is None else source.where
        log_empty_pairs(self.skipped_empty, source.upper_path, source.lower_path)
        for kind, numbers in (
            ("lines of unequal length", self.skipped_unequal),
            (f"upper lines over max_length={source.max_length} characters", self.skipped_too_long),
        ):
            if numbers:
                logger.warning(
                    "skipped %d pair(s) with %s in %s (first at line %d)", len(numbers), kind, where, numbers[0]
                )


def stream_couplets(source: CoupletFiles, count: CoupletCount | None = None) -> Iterator[list[tuple[str, str]]]:
    """The kept (upper, lower) couplets of ``source`` in file order, characters without spaces, in bounded lists.

    ``count`` (a fresh `CoupletCount`) is told every pair kept and skipped. A bad pair that
    may not be skipped is a ValueError naming the file and the line.
    """
    count = CoupletCount() if count is None else count
    upper_path, lower_path = source.upper_path, source.lower_path

    def check_lines(paths: tuple[Path, Path], number: int, upper: str, lower: str) -> tuple[str, str] | None:
        return non_empty_pair(paths, number, upper, lower, source.skip_invalid, source.skip_option)

    def couplets() -> Iterator[tuple[str, str]]:
        for number, pair in numbered_pairs(source.files, check_lines=check_lines):
            if pair is None:
                count.skipped_empty.append(number)
                continue
            upper, lower = split_characters(pair[0]), split_characters(pair[1])
            if len(upper) != len(lower):
                if not source.skip_invalid:
                    option = source.skip_option
                    advice = f", or pass {option}=True to skip (and count) such pairs" if option else ""
                    raise ValueError(
                        f"{lower_path}: line {number}: expected a lower line of {len(upper)} characters, "
                        f"as long as line {number} of {upper_path} ({upper!r}), got {len(lower)} ({lower!r}); "
                        f"fix the file{advice}"
                    )
                count.skipped_unequal.append(number)
            elif source.max_length is not None and len(upper) > source.max_length:
                count.skipped_too_long.append(number)
            else:
                count.pairs += 1
                yield upper, lower

    return chunked(couplets(), pair_stream.CHUNK_PAIRS)


def count_couplets(source: CoupletFiles) -> CoupletCount:
    """One pass over ``source``: what it keeps and skips (the skips logged).

    Misaligned line files are refused before any line is read, as a whole read refuses them.
    """
    count_pairs(source.files)
    count = CoupletCount()
    for _ in stream_couplets(source, count):
        pass
    count.log(source)
    return count
