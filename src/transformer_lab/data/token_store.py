"""Token ids of a corpus in flat arrays with offsets: held in memory, or memory-mapped from a folder.

The layout is the field's (fairseq's and Megatron's `.bin`/`.idx`): each column (``source``
and ``target`` for pairs, ``tokens`` for classification) keeps every example's ids one after
the other in one flat array of the smallest unsigned type that holds the vocabulary, and
an ``offsets`` array of N + 1 int64 values, so that example i is ``ids[offsets[i] :
offsets[i + 1]]``. Classification labels are one int64 array. On disk each array is a raw
file beside a ``store.json`` that gives the count, the dtypes and the token totals::

    source.ids  source.offsets  target.ids  target.offsets  [labels]  store.json

Opened with `TokenStore.open`, the arrays are `numpy.memmap` views: the operating system
pages in what a batch reads, so memory does not grow with the corpus, and processes that
open the same folder (DataLoader workers, the ranks of a `torchrun`) share the pages.
`TokenStoreWriter` appends examples chunk by chunk, so a corpus is never held whole.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from transformer_lab import strict_json

STORE_FILE = "store.json"
STORE_FORMAT_VERSION = 1
LABELS_FILE = "labels"
_OFFSET_DTYPE = np.dtype("<i8")
_LABEL_DTYPE = np.dtype("<i8")


def ids_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned little-endian integer type that holds ids in [0, vocab_size)."""
    if vocab_size <= 1 << 8:
        return np.dtype("u1")
    if vocab_size <= 1 << 16:
        return np.dtype("<u2")
    if vocab_size <= 1 << 32:
        return np.dtype("<u4")
    raise ValueError(f"vocab_size: expected at most 2**32 ids, got {vocab_size}")


class TokenStore:
    """N examples' token ids in named columns of flat arrays (see the module docstring).

    Build one in memory with `from_sequences`, or `open` a folder that `TokenStoreWriter`
    wrote. ``ids(column, index)`` is one example's ids; ``lengths(column)`` all lengths.
    """

    def __init__(
        self,
        columns: Mapping[str, tuple[np.ndarray, np.ndarray]],
        labels: np.ndarray | None = None,
        folder: Path | None = None,
    ) -> None:
        if not columns:
            raise ValueError("columns: expected at least one column of ids, got none")
        counts = {name: len(offsets) - 1 for name, (_, offsets) in columns.items()}
        if len(set(counts.values())) != 1:
            raise ValueError(f"columns: expected the same number of examples in every column, got {counts}")
        self._columns = dict(columns)
        self._count = next(iter(counts.values()))
        if labels is not None and len(labels) != self._count:
            raise ValueError(f"labels: expected {self._count} labels (one per example), got {len(labels)}")
        self._labels = labels
        self.folder = folder

    @classmethod
    def from_sequences(
        cls, columns: Mapping[str, Sequence[Sequence[int]]], labels: Sequence[int] | None = None
    ) -> TokenStore:
        """A store in memory of id sequences, one list per column (all of the same length)."""
        arrays = {}
        for name, rows in columns.items():
            arrays[name] = _flatten(rows, np.dtype("<i8"))
        return cls(arrays, None if labels is None else np.asarray(labels, dtype=_LABEL_DTYPE))

    @classmethod
    def open(cls, folder: str | os.PathLike[str]) -> TokenStore:
        """Map the arrays of a folder written by `TokenStoreWriter` (read-only, nothing is loaded)."""
        folder = Path(folder)
        layout = read_store_layout(folder)
        columns = {}
        for name, column in layout["columns"].items():
            dtype = np.dtype(column["dtype"])
            offsets = _map(folder / f"{name}.offsets", _OFFSET_DTYPE, layout["count"] + 1)
            ids = _map(folder / f"{name}.ids", dtype, column["tokens"])
            if int(offsets[-1]) != column["tokens"]:
                raise ValueError(
                    f"{folder / (name + '.offsets')}: expected the last offset to be {column['tokens']} (the token "
                    f"count of {STORE_FILE}), got {int(offsets[-1])}; prepare the corpus again"
                )
            columns[name] = (ids, offsets)
        labels = _map(folder / LABELS_FILE, _LABEL_DTYPE, layout["count"]) if layout["labels"] else None
        return cls(columns, labels, folder)

    def __len__(self) -> int:
        """N, the number of examples."""
        return self._count

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(self._columns)

    @property
    def labels(self) -> np.ndarray | None:
        """The label of each example [N], or None for a store without labels."""
        return self._labels

    def _column(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in self._columns:
            raise ValueError(f"column: expected one of {self.column_names}, got {name!r}")
        return self._columns[name]

    def ids(self, column: str, index: int) -> np.ndarray:
        """The ids of example ``index`` in ``column`` (a view, no copy)."""
        ids, offsets = self._column(column)
        if not 0 <= index < self._count:
            raise ValueError(f"index: expected an example in [0, {self._count}), got {index}")
        return ids[int(offsets[index]) : int(offsets[index + 1])]

    def rows(self, column: str, indices: Sequence[int] | np.ndarray) -> list[list[int]]:
        """The ids of the examples ``indices`` of ``column`` as lists, in that order."""
        ids, offsets = self._column(column)
        return [ids[int(offsets[index]) : int(offsets[index + 1])].tolist() for index in indices]

    def lengths(self, column: str) -> np.ndarray:
        """The number of ids of every example of ``column``, int64 [N]."""
        _, offsets = self._column(column)
        return np.diff(np.asarray(offsets, dtype=np.int64))

    def num_tokens(self, column: str) -> int:
        """The total number of ids in ``column``."""
        _, offsets = self._column(column)
        return int(offsets[-1])


def _flatten(rows: Sequence[Sequence[int]], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """(flat ids, offsets [N + 1]) of id sequences."""
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids = np.fromiter(itertools.chain.from_iterable(rows), dtype=dtype, count=int(offsets[-1]))
    return ids, offsets


def _map(path: Path, dtype: np.dtype, count: int) -> np.ndarray:
    """``count`` values of ``dtype`` mapped read-only from ``path``, whose size must be exactly that."""
    expected = count * dtype.itemsize
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: expected a file of the prepared corpus, got none; prepare it again") from None
    if size != expected:
        raise ValueError(
            f"{path}: expected {expected} bytes ({count} values of {dtype}), got {size}; prepare the corpus again"
        )
    if count == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=(count,))


def read_versioned_json(path: Path, format_version: int | None) -> dict[str, Any]:
    """A prepared corpus's JSON file as a dict, refused (naming it) when missing, unreadable or of another version.

    ``format_version`` None takes any int version (a reader of the fields all versions share).
    """
    if not path.is_file():
        raise FileNotFoundError(f"{path}: expected a prepared corpus's {path.name}, got no such file")
    try:
        content = strict_json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:  # bytes not UTF-8, bad JSON, a key twice
        raise ValueError(f"{path}: expected JSON, got unreadable content ({error})") from None
    check_format_version(path, content, format_version)
    return content


def check_format_version(path: Path, content: Any, format_version: int | None) -> None:
    """Refuse ``content`` read from ``path`` unless it is a dict of ``format_version`` (None: of any int version)."""
    version = content.get("format_version") if isinstance(content, dict) else None
    if type(version) is not int or (format_version is not None and version != format_version):
        found = version if isinstance(content, dict) else type(content).__name__
        expected = "an int format_version" if format_version is None else f"format_version {format_version}"
        raise ValueError(f"{path}: expected {expected}, got {found!r}; prepare the corpus again")


def read_store_layout(folder: Path) -> dict[str, Any]:
    """The checked content of a store folder's ``store.json``."""
    path = folder / STORE_FILE
    layout = read_versioned_json(path, STORE_FORMAT_VERSION)
    count = layout.get("count")
    columns = layout.get("columns")
    if not isinstance(count, int) or count < 0 or not isinstance(columns, dict) or not columns:
        raise ValueError(f"{path}: expected a non-negative 'count' and a non-empty 'columns', got {layout!r:.200}")
    for name, column in columns.items():
        if (
            not isinstance(column, dict)
            or column.get("dtype") not in ("|u1", "<u2", "<u4", "<i8")
            or not isinstance(column.get("tokens"), int)
            or column["tokens"] < 0
        ):
            raise ValueError(f"{path}: column {name!r}: expected a dtype and a token count, got {column!r:.200}")
    if not isinstance(layout.get("labels"), bool):
        raise ValueError(f"{path}: expected 'labels' true or false, got {layout.get('labels')!r}")
    return layout


class TokenStoreWriter:
    """Appends examples to a store folder chunk by chunk; `finish` writes ``store.json`` last.

    The folder should be a temporary one that the caller renames when done (a crash then
    leaves no half-written store where a complete one is looked for).
    """

    def __init__(self, folder: Path, column_names: Sequence[str], dtype: np.dtype, labels: bool = False) -> None:
        if not column_names:
            raise ValueError("column_names: expected at least one column, got none")
        self.folder = folder
        self.dtype = np.dtype(dtype)
        self._files: dict[str, tuple[BinaryIO, BinaryIO]] = {}
        self._tokens = dict.fromkeys(column_names, 0)
        self._count = 0
        folder.mkdir(parents=True, exist_ok=True)
        for name in column_names:
            ids_file = (folder / f"{name}.ids").open("wb")
            offsets_file = (folder / f"{name}.offsets").open("wb")
            offsets_file.write(np.zeros(1, dtype=_OFFSET_DTYPE).tobytes())
            self._files[name] = (ids_file, offsets_file)
        self._labels_file = (folder / LABELS_FILE).open("wb") if labels else None

    def __len__(self) -> int:
        return self._count

    def append(self, columns: Mapping[str, Sequence[Sequence[int]]], labels: Sequence[int] | None = None) -> None:
        """Add examples: one list of id sequences per column (all as long), and their labels if the store has them."""
        if set(columns) != set(self._files):
            raise ValueError(f"columns: expected {sorted(self._files)}, got {sorted(columns)}")
        counts = {len(rows) for rows in columns.values()}
        if len(counts) != 1 or (labels is not None and len(labels) not in counts):
            raise ValueError("columns and labels: expected as many rows in each, got different counts")
        if (labels is None) != (self._labels_file is None):
            raise ValueError("labels: expected labels exactly when the store was opened with labels=True")
        for name, rows in columns.items():
            ids, offsets = _flatten(rows, self.dtype)
            ids_file, offsets_file = self._files[name]
            ids_file.write(ids.tobytes())
            offsets_file.write((offsets[1:] + self._tokens[name]).astype(_OFFSET_DTYPE).tobytes())
            self._tokens[name] += int(offsets[-1])
        if self._labels_file is not None and labels is not None:
            self._labels_file.write(np.asarray(labels, dtype=_LABEL_DTYPE).tobytes())
        self._count += counts.pop()

    def finish(self) -> None:
        """Flush and close every array (fsynced), then write ``store.json``."""
        handles = [handle for pair in self._files.values() for handle in pair]
        if self._labels_file is not None:
            handles.append(self._labels_file)
        for handle in handles:
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
        layout = {
            "format_version": STORE_FORMAT_VERSION,
            "count": self._count,
            "columns": {name: {"dtype": self.dtype.str, "tokens": tokens} for name, tokens in self._tokens.items()},
            "labels": self._labels_file is not None,
        }
        (self.folder / STORE_FILE).write_text(json.dumps(layout, indent=1), encoding="utf-8")

    def close(self) -> None:
        """Close the files without writing ``store.json`` (after an error)."""
        for pair in self._files.values():
            for handle in pair:
                handle.close()
        if self._labels_file is not None:
            self._labels_file.close()
