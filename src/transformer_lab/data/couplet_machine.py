"""The couplet preset's training pairs, `couplet/train_couplet_machine/`, built from their public source.

Source: the repository `ZiJianZhao/Couplet-Machine` at commit 1344054 (its only one),
folder `data/final/`, eight files of `upper<TAB>=><TAB>lower` lines with the characters
separated by spaces (`COUPLET_MACHINE_FILES`, in the order they are read: the pairs of
four couplet collections, a hand-made list, parallel lines of Tang poems, the source's
own validation and test lists, long couplets, one-to-many character pairs, repetition
patterns). The build, `couplet_machine_pairs`:

1. removes the spaces (U+0020) of both lines;
2. keeps a pair only when both lines are non-empty and of equal length;
3. drops a pair equal to one kept before (exact duplicates);
4. drops every pair whose upper or lower line equals a line of the wb14123 test set
   (`couplet/test/`), so that the test set stays unseen;

and writes the rest in the wb14123 format (characters separated by single spaces, every
line ending with a space), file by file, in the source's order. The result is checked
against the pinned sha256 of both files (`TRAIN_COUPLET_MACHINE_SHA256`): 90,889 pairs.
"""

from __future__ import annotations

import logging
import os
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from transformer_lab.atomic_files import create_temporary_file
from transformer_lab.data.couplet import COUPLET_FOLDER, LOWER_FILE, UPPER_FILE
from transformer_lab.data.download import download_file, sha256_of_file
from transformer_lab.data.parallel_text import read_lines
from transformer_lab.folders import writes_refused_as

logger = logging.getLogger(__name__)

SPLIT = "train_couplet_machine"
SOURCES_FOLDER = "sources/couplet-machine"  # under couplet/: the source files as downloaded
COUPLET_MACHINE_URL = (
    "https://raw.githubusercontent.com/ZiJianZhao/Couplet-Machine/134405411ec64a985fb031fcbfa2276bfa322441/data/final"
)
# The files read, in order, with the sha256 of each at the pinned commit.
COUPLET_MACHINE_FILES: dict[str, str] = {
    "cldldq+zgdl+zgdldq+zgdlw.txt": "9497ff095f4699aa7b1d88375e244a03c986cfa1a1e36a3cc5428b71154ccbf1",
    "mannual.txt": "26a1c6930b0fb77c44e99049ae2e27ebd1ea8d2650c625d708807cf68497b342",
    "qts_for_duilian.txt": "f7c3a767feb5481c98360b38e93892737f564f5cce7d95bf837b9d3687d4c89e",
    "valid.txt": "7f6f8540005d9798ebd04a94d934837fe903cfa35a37d2d69969abfdd07c5ace",
    "test.txt": "1cc1bca1d8adb93c6eb3391739d89b4490e625d6ff428b16e4ef7a923c07d13c",
    "long.txt": "974d793241a17f232b319d8a1fc1e6c4af3b289d82f7efaa31cee7ad606bae7b",
    "lwdy+slqm+xmpj.txt": "f00be669fea2301c3ae6edc83205f53ce1594e1c31c38eef603bc64e84d066a2",
    "repeat.txt": "dae3b57ef73387860960b87389419215b63c074c4da10bb6455b4b12805863ba",
}
TRAIN_COUPLET_MACHINE_SHA256: dict[str, str] = {
    UPPER_FILE: "7f42e4a001798106b48d2daf6fafe46ba50c81ce63dd2320f5ab21c418381b02",
    LOWER_FILE: "888c0aa5c7f5163bedf9914efaa903dcb794242ee835be1908541ef6698538df",
}
SEPARATOR = "\t=>\t"


@dataclass
class CoupletMachineBuild:
    """The kept pairs and how many of each kind were left out."""

    pairs: list[tuple[str, str]]
    read: int = 0
    empty_or_unequal: int = 0
    duplicates: int = 0
    in_test_set: int = 0


def _without_spaces(line: str) -> str:
    return line.replace(" ", "")


def couplet_machine_pairs(files: Mapping[str, Iterable[str]], test_lines: Iterable[str]) -> CoupletMachineBuild:
    """Apply the build's rules (module docstring) to the lines of each source file, in order.

    Args:
        files: file name -> its lines (without line ends), in the order to read them.
        test_lines: the lines of the test set, spaced or not.

    Raises:
        ValueError: a line without the `<TAB>=><TAB>` separator, naming the file and line.
    """
    held_out = {_without_spaces(line) for line in test_lines}
    held_out.discard("")
    build = CoupletMachineBuild(pairs=[])
    seen: set[tuple[str, str]] = set()
    for name, lines in files.items():
        for number, line in enumerate(lines, start=1):
            sides = line.split(SEPARATOR)
            if len(sides) != 2:
                raise ValueError(f"{name}: line {number}: expected 'upper<TAB>=><TAB>lower', got {line[:60]!r}")
            build.read += 1
            upper, lower = _without_spaces(sides[0]), _without_spaces(sides[1])
            if not upper or len(upper) != len(lower):
                build.empty_or_unequal += 1
            elif (upper, lower) in seen:
                build.duplicates += 1
            else:
                seen.add((upper, lower))
                if upper in held_out or lower in held_out:
                    build.in_test_set += 1
                else:
                    build.pairs.append((upper, lower))
    return build


def spaced(line: str) -> str:
    """A line in the wb14123 format: characters separated by single spaces, a trailing space."""
    return "".join(character + " " for character in line)


def build_train_couplet_machine(
    sources_dir: str | os.PathLike[str],
    test_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    expected_sha256: Mapping[str, str] = TRAIN_COUPLET_MACHINE_SHA256,
) -> CoupletMachineBuild:
    """Build `out_dir/in.txt` and `out_dir/out.txt` from the source files and the test split.

    Both files are written beside their final names, checked by sha256 and only then
    renamed into place; a mismatch writes nothing and raises a ValueError naming the file
    and both hashes.
    """
    sources_dir, out_dir = Path(sources_dir), Path(out_dir)
    test_lines = [*read_lines(Path(test_dir) / UPPER_FILE), *read_lines(Path(test_dir) / LOWER_FILE)]
    files = {name: read_lines(sources_dir / name) for name in COUPLET_MACHINE_FILES}
    build = couplet_machine_pairs(files, test_lines)
    kept = "nothing was written; the downloaded sources are kept"
    with writes_refused_as(out_dir, kept, permission=True):
        out_dir.mkdir(parents=True, exist_ok=True)
    partials: dict[str, Path] = {}
    try:
        for name, side in ((UPPER_FILE, 0), (LOWER_FILE, 1)):
            with writes_refused_as(out_dir / name, kept):
                # A name of its own, as two builds at once would each rename the other's fixed-name partial.
                descriptor, partial = create_temporary_file(out_dir, f".{name}.", ".build.part")
                os.close(descriptor)
                partials[name] = partial
                partial.write_text("".join(spaced(pair[side]) + "\n" for pair in build.pairs), encoding="utf-8")
            actual = sha256_of_file(partial)
            if actual != expected_sha256[name]:
                raise ValueError(
                    f"{out_dir / name}: sha256 mismatch: expected {expected_sha256[name]}, got {actual} after "
                    f"building from {sources_dir}; nothing was written"
                )
        for name, partial in partials.items():
            os.replace(partial, out_dir / name)
    finally:
        for partial in partials.values():
            partial.unlink(missing_ok=True)
    logger.info(
        "%s: %d pairs from %d read (%d empty or of unequal length, %d duplicates, %d sharing a line with the test set)",
        out_dir,
        len(build.pairs),
        build.read,
        build.empty_or_unequal,
        build.duplicates,
        build.in_test_set,
    )
    return build


def is_built(
    out_dir: str | os.PathLike[str], expected_sha256: Mapping[str, str] = TRAIN_COUPLET_MACHINE_SHA256
) -> bool:
    """Whether both files are present with their pinned sha256."""
    return all(
        (Path(out_dir) / name).is_file() and sha256_of_file(Path(out_dir) / name) == sha256
        for name, sha256 in expected_sha256.items()
    )


def download_train_couplet_machine(
    cache_dir: str | os.PathLike[str],
    base_url: str = COUPLET_MACHINE_URL,
    timeout: float = 60.0,
    progress: bool = True,
    source_sha256: Mapping[str, str] = COUPLET_MACHINE_FILES,
    expected_sha256: Mapping[str, str] = TRAIN_COUPLET_MACHINE_SHA256,
) -> Path:
    """Fetch the source files into `<cache_dir>/couplet/sources/couplet-machine/` and build the split.

    Needs the test split in `<cache_dir>/couplet/test/` (`download_couplet_test`). A split
    already present with its pinned hashes is kept without any network access.

    Returns:
        the split folder `<cache_dir>/couplet/train_couplet_machine/`.
    """
    couplet_dir = Path(cache_dir) / COUPLET_FOLDER
    out_dir = couplet_dir / SPLIT
    if is_built(out_dir, expected_sha256):
        return out_dir
    sources_dir = couplet_dir / SOURCES_FOLDER
    base_url = base_url.rstrip("/")
    for name, sha256 in source_sha256.items():
        url = f"{base_url}/{urllib.parse.quote(name)}"
        download_file(url, sources_dir / name, sha256, timeout=timeout, progress=progress)
    build_train_couplet_machine(sources_dir, couplet_dir / "test", out_dir, expected_sha256)
    return out_dir
