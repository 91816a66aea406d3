"""Couplets from regulated verse (律诗): the two antithetical couplets of each poem, as couplet pairs.

A regulated verse has eight lines of five or seven characters, read as four two-line
couplets; by the rules of the form the middle two, the 颔联 (lines 3-4) and the 颈联
(lines 5-6), are antithetical (对仗), so each such poem gives two (upper line, lower line)
pairs of the kind the couplet task learns. The first couplet (首联) and the last (尾联)
need not be antithetical and are not used.

The poems come from the npm package ``chinese-poetry`` (MIT licence; upstream GitHub
chinese-poetry/chinese-poetry): its ``dist/quantangshi/poet.tang.*.json`` (全唐诗) and
``poet.song.*.json`` (全宋诗) files, each a JSON list of poems whose ``"paragraphs"`` hold
the text in traditional characters. They are converted to simplified characters with
OpenCC's ``t2s`` conversion (the ``data`` extra), the form of the couplet corpora.

Which poem counts is decided by form alone (see `antithetical_couplets`): the tones
(平仄) are not checked, so an eight-line ancient-style poem (古体) of equal lines counts too.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import tarfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from transformer_lab import strict_json
from transformer_lab.data.chinese import is_han
from transformer_lab.data.couplet import LOWER_FILE, UPPER_FILE
from transformer_lab.data.download import download_file
from transformer_lab.extras import require_extra
from transformer_lab.folders import check_new_folder, write_folder

logger = logging.getLogger(__name__)

# The marks that end a verse line in chinese-poetry's paragraphs: nearly always ，and 。,
# sometimes ？！；、, rarely their ASCII forms. The colon is not among them: in the data it
# introduces notes (詩題：..., 一作：...), and a line holding one is rejected as not pure verse.
LINE_BREAKS = frozenset("，。！？；、,.!?;")
REGULATED_LINE_COUNT = 8
REGULATED_LINE_LENGTHS = (5, 7)

# Collection name -> the glob, under the package's dist/, of its JSON files.
CHINESE_POETRY_COLLECTIONS: dict[str, str] = {
    "tang": "quantangshi/poet.tang.*.json",  # 全唐诗, 57,607 poems
    "song": "quantangshi/poet.song.*.json",  # 全宋诗, 254,248 poems
}
DEFAULT_COLLECTIONS: tuple[str, ...] = ("tang", "song")

CHINESE_POETRY_VERSION = "2.0.1"
CHINESE_POETRY_URL = "https://registry.npmjs.org/chinese-poetry/-/chinese-poetry-{version}.tgz"
# The sha256 of the registry's tarball; its sha512 matches the registry's `dist.integrity`.
CHINESE_POETRY_SHA256: dict[str, str] = {
    "2.0.1": "25b549e46919c3a0569db6b68ddc96956b04a484ea4518ad2bbd4f137e307e86",
}
# npm tarballs hold one top folder, whatever the package's name.
_NPM_TOP_FOLDER = "package"


def verse_lines(paragraphs: Sequence[str]) -> list[str]:
    """The lines of a poem: each paragraph cut at the marks of `LINE_BREAKS`, marks and empty pieces dropped.

    Each paragraph is cut on its own (a paragraph without a final mark still ends a line);
    surrounding whitespace is stripped, anything else stays, so a line can still hold
    brackets, notes or damage markers (□) for the caller to judge.
    """
    if isinstance(paragraphs, str):
        raise ValueError(f"paragraphs: expected a sequence of strings, got one string {paragraphs[:20]!r}")
    lines: list[str] = []
    for index, paragraph in enumerate(paragraphs):
        if not isinstance(paragraph, str):
            raise ValueError(f"paragraphs[{index}]: expected a string, got {type(paragraph).__name__}")
        piece: list[str] = []
        for character in paragraph + "。":
            if character in LINE_BREAKS:
                line = "".join(piece).strip()
                if line:
                    lines.append(line)
                piece = []
            else:
                piece.append(character)
    return lines


def antithetical_couplets(paragraphs: Sequence[str]) -> list[tuple[str, str]]:
    """The 颔联 and 颈联 of a regulated verse as (upper, lower) pairs without punctuation; [] for any other poem.

    The rule, by form: the paragraphs cut into lines (`verse_lines`) give exactly 8 lines,
    all of one length, 5 or 7 characters, and every character of every line a Han
    ideograph (`chinese.is_han`). Anything else gives []: quatrains (4 lines), longer or
    shorter poems, mixed line lengths, and any line still holding a non-Han character after
    the line marks are removed: notes and variant readings in brackets (（一作…）「」〔〕),
    damage markers for lost or unreadable characters (□ ● …), characters written as
    component descriptions ({…}, ⿰), private-use code points, Latin letters, digits.

    Returns:
        [(line 3, line 4), (line 5, line 6)] (1-based line numbers), or [].
    """
    lines = verse_lines(paragraphs)
    if len(lines) != REGULATED_LINE_COUNT:
        return []
    length = len(lines[0])
    if length not in REGULATED_LINE_LENGTHS or any(len(line) != length for line in lines):
        return []
    if not all(is_han(character) for line in lines for character in line):
        return []
    return [(lines[2], lines[3]), (lines[4], lines[5])]


@functools.lru_cache(maxsize=1)
def _t2s_converter() -> Callable[[str], str]:
    opencc = require_extra("opencc", "converting chinese-poetry's traditional characters to simplified")
    converter = opencc.OpenCC("t2s")
    convert: Callable[[str], str] = converter.convert
    return convert


def to_simplified(text: str) -> str:
    """`text` in simplified characters, by OpenCC's Traditional→Simplified (`t2s`) conversion (國→国)."""
    return _t2s_converter()(text)


@dataclass
class RegulatedVerse:
    """The couplet pairs of a chinese-poetry package's regulated verse, with the counts of each stage.

    Attributes:
        pairs: (upper, lower) in simplified characters, exact duplicates removed (the first
            kept), in file order (files sorted by name within a collection, collections in
            the order asked, poems and couplets in their order).
        files: the JSON files read, in that order.
        poems_read: every poem of those files.
        regulated_poems: the poems that are regulated verse by form (after conversion).
        pairs_found: their pairs before duplicates were removed (2 a poem).
        changed_form_in_conversion: poems regulated in traditional characters but not after
            conversion to simplified (a conversion that changed a line's length); dropped.
    """

    pairs: list[tuple[str, str]]
    files: list[Path] = field(default_factory=list)
    poems_read: int = 0
    regulated_poems: int = 0
    pairs_found: int = 0
    changed_form_in_conversion: int = 0

    def summary(self) -> dict[str, int]:
        """Counts for logs and reports."""
        return {
            "files": len(self.files),
            "poems_read": self.poems_read,
            "regulated_poems": self.regulated_poems,
            "pairs_found": self.pairs_found,
            "pairs_after_dedup": len(self.pairs),
            "changed_form_in_conversion": self.changed_form_in_conversion,
        }


def collection_files(
    package_dir: str | os.PathLike[str], collections: Sequence[str] = DEFAULT_COLLECTIONS
) -> list[Path]:
    """The JSON files of `collections` in the extracted package `package_dir` (holding dist/), sorted by name.

    Raises:
        ValueError: an unknown collection name, or none given.
        FileNotFoundError: no dist/ folder, or a collection with no file.
    """
    if isinstance(collections, str) or not collections:
        raise ValueError(
            f"collections: expected a non-empty sequence of names out of "
            f"{', '.join(CHINESE_POETRY_COLLECTIONS)}, got {collections!r}"
        )
    unknown = [name for name in collections if name not in CHINESE_POETRY_COLLECTIONS]
    if unknown:
        raise ValueError(f"collections: expected names out of {', '.join(CHINESE_POETRY_COLLECTIONS)}, got {unknown!r}")
    dist = Path(package_dir) / "dist"
    if not dist.is_dir():
        raise FileNotFoundError(
            f"package_dir: expected the extracted chinese-poetry package, a folder holding dist/, "
            f"got {str(package_dir)!r} where {str(dist)!r} does not exist"
        )
    files: list[Path] = []
    for name in collections:
        pattern = CHINESE_POETRY_COLLECTIONS[name]
        found = sorted(dist.glob(pattern), key=lambda path: path.name)
        if not found:
            raise FileNotFoundError(f"collection {name!r}: expected files {str(dist / pattern)!r}, found none")
        files.extend(found)
    return files


def _poem_paragraphs(path: Path) -> Iterable[list[str]]:
    """The "paragraphs" of each poem of one JSON file, in file order; a malformed file is a ValueError naming it."""
    try:
        poems = strict_json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:  # bytes not UTF-8, bad JSON, a key twice
        raise ValueError(f"{path}: expected a UTF-8 JSON list of poems, got unreadable data ({error})") from None
    if not isinstance(poems, list):
        raise ValueError(f"{path}: expected a JSON list of poems, got a {type(poems).__name__}")
    for index, poem in enumerate(poems):
        paragraphs = poem.get("paragraphs") if isinstance(poem, dict) else None
        if not isinstance(paragraphs, list) or not all(isinstance(item, str) for item in paragraphs):
            raise ValueError(f'{path}: poem {index}: expected an object whose "paragraphs" is a list of strings')
        yield paragraphs


def read_regulated_verse(
    package_dir: str | os.PathLike[str], collections: Sequence[str] = DEFAULT_COLLECTIONS
) -> RegulatedVerse:
    """Read the poems of `collections`, keep the regulated verse, convert to simplified, collect their pairs.

    A poem is judged in its traditional characters and judged again after the `t2s`
    conversion, so every pair returned obeys `antithetical_couplets`'s rule as written.
    See `RegulatedVerse` for the order and the counts.
    """
    result = RegulatedVerse([], collection_files(package_dir, collections))
    unique: dict[tuple[str, str], None] = {}
    for path in result.files:
        for paragraphs in _poem_paragraphs(path):
            result.poems_read += 1
            if not antithetical_couplets(paragraphs):
                continue
            # One call a poem: OpenCC's phrase tables see the poem, not lone characters.
            simplified = to_simplified("\n".join(paragraphs)).split("\n")
            couplets = antithetical_couplets(simplified)
            if not couplets:
                result.changed_form_in_conversion += 1
                continue
            result.regulated_poems += 1
            result.pairs_found += len(couplets)
            unique.update(dict.fromkeys(couplets))
    result.pairs = list(unique)
    if result.changed_form_in_conversion:
        logger.warning(
            "%d poem(s) were regulated verse in traditional characters but not after conversion; left out",
            result.changed_form_in_conversion,
        )
    logger.info("regulated verse: %s", ", ".join(f"{key} {value}" for key, value in result.summary().items()))
    return result


def filter_against(pairs: Iterable[tuple[str, str]], held_out_lines: set[str]) -> tuple[list[tuple[str, str]], int]:
    """The pairs neither of whose lines is in `held_out_lines`, in order, and the number dropped.

    Lines are compared exactly: pass held-out lines in the form the pairs have (here without
    punctuation).
    """
    kept: list[tuple[str, str]] = []
    dropped = 0
    for upper, lower in pairs:
        if upper in held_out_lines or lower in held_out_lines:
            dropped += 1
        else:
            kept.append((upper, lower))
    return kept, dropped


def _check_pair(index: int, pair: tuple[str, str]) -> None:
    """A ValueError naming `pairs[index]` unless it is two non-empty lines of equal length that the format can hold."""
    if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(line, str) for line in pair)):
        raise ValueError(f"pairs[{index}]: expected a (upper, lower) tuple of two strings, got {pair!r}")
    upper, lower = pair
    if not upper or len(upper) != len(lower):
        raise ValueError(f"pairs[{index}]: expected two non-empty lines of equal length, got {pair!r}")
    if any(character.isspace() for character in upper + lower):
        # Spaces separate the characters in the files; a space or a line break in a line
        # would read back as another line.
        raise ValueError(f"pairs[{index}]: expected lines without whitespace, got {pair!r}")


def write_couplet_files(pairs: Sequence[tuple[str, str]], out_dir: str | os.PathLike[str]) -> Path:
    """Write `pairs` as a couplet split folder: `in.txt` (upper lines) and `out.txt` (lower lines).

    The wb14123 format that `couplet.read_couplets` reads: one couplet a line, characters
    separated by single spaces, every line ending with a space. `out_dir` must not exist
    (nothing is overwritten); the files are written in a temporary folder beside it that
    is renamed into place, so the folder appears complete or not at all.

    Raises:
        ValueError: `out_dir` exists, or a pair is not two non-empty lines of equal length
            without whitespace (the message names it).
    """
    out_dir = check_new_folder(out_dir)  # before the pairs are checked: the cheaper refusal first
    for index, pair in enumerate(pairs):
        _check_pair(index, pair)

    def write(folder: Path) -> None:
        for name, side in ((UPPER_FILE, 0), (LOWER_FILE, 1)):
            text = "".join(" ".join(pair[side]) + " \n" for pair in pairs)
            with open(folder / name, "w", encoding="utf-8", newline="\n") as file:
                file.write(text)
                file.flush()
                os.fsync(file.fileno())

    return write_folder(out_dir, write)


def extract_npm_package(tarball: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> Path:
    """Extract an npm package tarball's `package/` folder as `out_dir` (its dist/ then lies at `out_dir/dist`).

    Only plain files and folders under `package/` are accepted (no links, no absolute
    paths, no `..`); the files go to a temporary folder renamed into place, so `out_dir`
    appears complete or not at all.

    Raises:
        ValueError: `out_dir` exists, or the tarball holds anything else (named).
    """
    tarball, out_dir = Path(tarball), Path(out_dir)

    def write(folder: Path) -> None:
        with tarfile.open(tarball, "r:gz") as archive:
            for member in archive:
                parts = PurePosixPath(member.name).parts
                if (
                    not parts
                    or parts[0] != _NPM_TOP_FOLDER
                    or ".." in parts
                    or PurePosixPath(member.name).is_absolute()
                ):
                    raise ValueError(f"{tarball}: expected members under {_NPM_TOP_FOLDER}/, got {member.name!r}")
                target = folder.joinpath(*parts[1:])
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                elif member.isfile():
                    source = archive.extractfile(member)
                    assert source is not None  # a regular file always has a body
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with source, open(target, "wb") as destination:
                        shutil.copyfileobj(source, destination)
                else:
                    raise ValueError(
                        f"{tarball}: expected only files and folders, got {member.name!r} (a link or device)"
                    )

    return write_folder(out_dir, write)


def download_chinese_poetry(
    dest_dir: str | os.PathLike[str],
    version: str = CHINESE_POETRY_VERSION,
    *,
    expected_sha256: str | None = None,
    url: str | None = None,
    timeout: float = 60.0,
) -> Path:
    """Download the npm package chinese-poetry into `dest_dir` and extract it; returns the package folder.

    The registry's tarball (`CHINESE_POETRY_URL`) is saved as
    `<dest_dir>/chinese-poetry-<version>.tgz`, checked by sha256 (`CHINESE_POETRY_SHA256`,
    or `expected_sha256` for another version; a mismatch deletes it and raises) and not
    fetched again when already present with the right hash. It is extracted to
    `<dest_dir>/chinese-poetry-<version>/` (holding dist/), unless that folder already
    exists (it is only ever written whole). Afterwards
    `read_regulated_verse(<that folder>)` reads it.

    Raises:
        ValueError: a version with no pinned sha256 and no `expected_sha256`; a hash mismatch.
        FileNotFoundError, ConnectionError: see `download.download_file`.
    """
    if not isinstance(version, str) or not version or "/" in version:
        raise ValueError(f"version: expected an npm version such as {CHINESE_POETRY_VERSION!r}, got {version!r}")
    sha256 = expected_sha256 if expected_sha256 is not None else CHINESE_POETRY_SHA256.get(version)
    if sha256 is None:
        raise ValueError(
            f"expected_sha256: expected the sha256 of chinese-poetry {version}'s tarball (only "
            f"{', '.join(CHINESE_POETRY_SHA256)} are pinned), got None; nothing is downloaded unverified"
        )
    dest_dir = Path(dest_dir)
    name = f"chinese-poetry-{version}"
    tarball = download_file(
        url or CHINESE_POETRY_URL.format(version=version), dest_dir / f"{name}.tgz", sha256, timeout=timeout
    )
    package_dir = dest_dir / name
    if package_dir.is_dir():
        logger.info("%s is already extracted; not extracting again", package_dir)
        return package_dir
    return extract_npm_package(tarball, package_dir)
