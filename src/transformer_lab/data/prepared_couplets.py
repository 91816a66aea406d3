"""Couplets prepared once into a memory-mapped `TokenStore` with their character vocabulary.

A couplet corpus is read, checked and split by the couplet task's rules (skipped pairs
counted, validation carved with the seed, duplicates of validation upper lines left out);
what training needs of it is kept here: the training pairs' character ids in a store
(``source`` the upper lines, ``target`` the lower lines), ``vocabulary.txt``, the
validation couplets as text in ``validation.jsonl`` and a ``manifest.json`` with the input
files (size, mtime, sha256), the vocabulary's sha256, the data report and the format
version. The folder is written under a temporary name and renamed (`folders.write_folder`).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformer_lab.data.prepared_cache import (
    VALIDATION_FILE,
    input_records,
    read_corpus_manifest,
    read_pairs_jsonl,
    write_manifest,
    write_pairs_jsonl,
)
from transformer_lab.data.token_store import TokenStore, TokenStoreWriter, ids_dtype
from transformer_lab.data.vocabulary import Vocabulary

COUPLETS_KIND = "couplets"
COUPLETS_FORMAT_VERSION = 1
VOCABULARY_FILE = "vocabulary.txt"
COUPLET_KEYS = ("upper", "lower")  # the keys of validation.jsonl
_CHUNK_PAIRS = 20_000  # pairs encoded and appended at a time


@dataclass
class PreparedCouplets:
    """A prepared couplet corpus: the training ids (mapped), the vocabulary, the validation couplets, the report."""

    store: TokenStore
    vocabulary: Vocabulary
    validation_pairs: list[tuple[str, str]]
    report: dict[str, int]
    folder: Path
    manifest: dict[str, Any]


def vocabulary_sha256(vocabulary: Vocabulary) -> str:
    """The sha256 of the vocabulary's tokens in id order (what identifies the ids a store holds)."""
    return hashlib.sha256("".join(token + "\n" for token in vocabulary.tokens).encode("utf-8")).hexdigest()


def write_prepared_couplets(
    folder: Path,
    train_pairs: Sequence[tuple[str, str]],
    validation_pairs: Sequence[tuple[str, str]],
    vocabulary: Vocabulary,
    report: dict[str, int],
    inputs: Sequence[Path],
    description: dict[str, Any],
) -> None:
    """Write a prepared couplet corpus into the (new, temporary) ``folder``; see the module docstring.

    ``description`` is what the corpus was made from (the settings and files), recorded
    so that a cache can tell whether it still holds.
    """
    started = time.perf_counter()
    writer = TokenStoreWriter(folder, ("source", "target"), ids_dtype(len(vocabulary)))
    try:
        for start in range(0, len(train_pairs), _CHUNK_PAIRS):
            chunk = train_pairs[start : start + _CHUNK_PAIRS]
            writer.append(
                {
                    "source": [vocabulary.encode(list(upper)) for upper, _ in chunk],
                    "target": [vocabulary.encode(list(lower)) for _, lower in chunk],
                }
            )
        writer.finish()
    except BaseException:
        writer.close()
        raise
    vocabulary.save(folder / VOCABULARY_FILE)
    write_pairs_jsonl(folder / VALIDATION_FILE, validation_pairs, COUPLET_KEYS)
    write_manifest(
        folder,
        {
            "format_version": COUPLETS_FORMAT_VERSION,
            "kind": COUPLETS_KIND,
            "description": description,
            "inputs": input_records(inputs),
            "vocabulary_sha256": vocabulary_sha256(vocabulary),
            "report": report,
            "seconds": round(time.perf_counter() - started, 2),
        },
    )


def read_couplets_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of a prepared couplet folder; a ValueError naming the file if it is not one."""
    return read_corpus_manifest(folder, COUPLETS_KIND, COUPLETS_FORMAT_VERSION)


def open_prepared_couplets(folder: str | os.PathLike[str]) -> PreparedCouplets:
    """Open a folder written by `write_prepared_couplets` (the ids mapped)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"prepared corpus: expected a folder written by 'prepare', got {str(folder)!r}")
    manifest = read_couplets_manifest(folder)
    vocabulary = Vocabulary.load(folder / VOCABULARY_FILE)
    if vocabulary_sha256(vocabulary) != manifest.get("vocabulary_sha256"):
        raise ValueError(f"{folder}: {VOCABULARY_FILE} differs from the one the ids were made with; prepare it again")
    store = TokenStore.open(folder)
    validation = read_pairs_jsonl(folder / VALIDATION_FILE, COUPLET_KEYS)
    return PreparedCouplets(store, vocabulary, validation, dict(manifest["report"]), folder, manifest)
