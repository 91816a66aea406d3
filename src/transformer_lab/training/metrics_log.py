"""``metrics.jsonl``: the run's log, one JSON object a line, appended as training goes.

Rows are ``{"event": "train" | "eval", "step": ..., ...}`` (see ``trainer``). A resumed run
repeats the steps after its checkpoint, so :meth:`MetricsLog.truncate_after` drops their
rows first: the log of a run interrupted and resumed reads like an uninterrupted one's.
:func:`read_metrics` reads a log back, strictly (the plots, the benchmarks).

The log and its temporary are never written through a symbolic link someone placed in the
run folder (``O_NOFOLLOW``; the temporary is made anew with ``O_EXCL``), so a link there
cannot make training append to, or empty, a file that is not the run's.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any, Mapping

from transformer_lab import strict_json

from .run.run_folder import METRICS_FILE

__all__ = ["MetricsLog", "numbered_metrics", "read_metrics"]

logger = logging.getLogger(__name__)


class MetricsLog:
    """Appends rows to ``out_dir/metrics.jsonl`` and cuts it back to a step on resume.

    Args:
        out_dir: the run folder; created at the first write if needed.
    """

    def __init__(self, out_dir: str | os.PathLike[str]) -> None:
        self.path = Path(out_dir) / METRICS_FILE

    def append(self, row: Mapping[str, Any]) -> None:
        """Write ``row`` as one JSON line at the end of the log."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Opened per row, so that each line reaches the file when it is logged and a
        # crash loses at most the line being written.
        descriptor = _open_own(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        with os.fdopen(descriptor, "a", encoding="utf-8") as file:
            file.write(json.dumps(dict(row)) + "\n")

    def truncate_after(self, step: int) -> int | None:
        """Drop the rows of steps after ``step``, and a last line a crash cut short; keep the rest.

        Any other line that is not a row (not UTF-8, not a JSON object, no int ``step``) is
        refused in a ``ValueError`` naming the file and the line, the log left as it is. The
        log is rewritten under a temporary name and renamed, so a crash during this leaves
        the old log or the new one, never part of it. No log: nothing to do. Returns the
        last step kept (None: no row).
        """
        if not self.path.is_file():
            return None
        lines = self.path.read_bytes().split(b"\n")
        numbers = [number for number, raw in enumerate(lines, start=1) if raw.strip()]
        kept = []
        last = None
        for number in numbers:
            raw = lines[number - 1]
            if number == numbers[-1] and not _is_json(raw):
                break  # the line a crash cut short: the only one a run may leave unfinished
            row_step = _checked_row(self.path, number, raw)["step"]
            if row_step <= step:
                kept.append(raw)
                last = row_step if last is None else max(last, row_step)
        temporary = self.path.with_name(self.path.name + ".tmp")
        temporary.unlink(missing_ok=True)  # a leftover, or a link: the name goes, not what it points to
        descriptor = _open_own(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        with os.fdopen(descriptor, "wb") as file:
            file.write(b"".join(line + b"\n" for line in kept))
        os.replace(temporary, self.path)
        return last


def _is_json(raw: bytes) -> bool:
    """Whether ``raw`` decodes as UTF-8 JSON (of any kind): a line cut short by a crash does not."""
    try:
        json.loads(raw.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are both ValueErrors
        return False
    return True


def _checked_row(path: Path, number: int, raw: bytes) -> dict[str, Any]:
    """Line ``number`` of the log ``path`` as a row: an object with ``event`` and an int ``step``, else a ValueError."""
    where = f"{path}: line {number}"
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{where}: expected UTF-8 text, got {error.reason} ({error})") from None
    try:
        row = strict_json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where}: expected a JSON object, got text that is not JSON ({error})") from None
    except strict_json.DuplicateKeyError as error:
        raise ValueError(f"{where}: {error}") from None
    if not isinstance(row, dict) or "event" not in row or "step" not in row:
        raise ValueError(f"{where}: expected an object with 'event' and 'step', got {line.strip()[:80]!r}")
    step = row["step"]
    # bool is an int to Python, but a step of true was never written by a run
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError(f"{where}: expected a non-negative int 'step', got {json.dumps(step)[:80]}")
    return row


def _open_own(path: Path, flags: int) -> int:
    """A descriptor of the log file ``path``, refused (``ValueError``) when it is a link or not a plain file."""
    try:
        descriptor = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ValueError(
                f"{path}: expected the run's own log, got a symbolic link (to {os.readlink(path)!r}); it is left as "
                "it is: remove it, or train into another folder"
            ) from None
        raise
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise ValueError(f"{path}: expected the run's own log, got something that is not a plain file")
    return descriptor


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of a Trainer's ``metrics.jsonl``, one dict per line, checked (see `numbered_metrics`)."""
    return [row for _, row in numbered_metrics(path)]


def numbered_metrics(path: str | os.PathLike[str]) -> list[tuple[int, dict[str, Any]]]:
    """The rows of a Trainer's ``metrics.jsonl``, each with its line number (from 1), checked.

    Every line must be a JSON object with ``event`` and a non-negative int ``step`` (blank
    lines are skipped), a train row's ``train_loss`` and ``lr`` numbers when present, an eval
    row's metrics numbers; an error names the file and the line. A last line without its
    newline that is no JSON is the row a running (or killed) run is writing: it is left out,
    with a warning, as ``MetricsLog.truncate_after`` drops it.
    """
    path = Path(path)
    # A pipe or device is read as a file is (`<(zcat metrics.jsonl.gz)`); a folder is no log.
    if not path.exists() or path.is_dir():
        what = "a folder" if path.is_dir() else "which does not exist"
        raise FileNotFoundError(f"metrics: expected a metrics.jsonl file at {str(path)!r}, {what}")
    rows: list[tuple[int, dict[str, Any]]] = []
    lines = path.read_bytes().split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        if number == len(lines) and not _is_json(raw):  # after the last newline: a row still being written
            cut = "%s: line %d is cut short (a run writing it, or one stopped while it did); left out"
            logger.warning(cut, path, number)
            break
        row = _checked_row(path, number, raw)
        _check_numbers(path, number, row)
        rows.append((number, row))
    return rows


# The fields of a train row that must be numbers when present (grad_norm is null before a step).
_TRAIN_NUMBERS = ("train_loss", "lr")
# An eval row's fields that are not metrics: every other one must be a number.
_EVAL_POSITION = ("event", "step", "epoch")


def _check_numbers(path: Path, number: int, row: Mapping[str, Any]) -> None:
    """Refuse (``ValueError``) a train row's loss or rate, or an eval row's metric, that is not a number."""
    if row["event"] == "train":
        names = [name for name in _TRAIN_NUMBERS if name in row]
    elif row["event"] == "eval":
        names = [name for name in row if name not in _EVAL_POSITION]
    else:
        return
    for name in names:
        value = row[name]
        # a plot would draw text as categories, and a bool as 0 or 1
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ValueError(
                f"{path}: line {number}: expected a number for the {row['event']} row's {name!r}, "
                f"got {json.dumps(value)[:80]}"
            )
