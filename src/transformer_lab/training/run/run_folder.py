"""The run folder before and around training: may a run start here, and what did a crash leave.

A run folder holds ``metrics.jsonl``, ``last/``, ``best/`` and ``step-NNNNNN/`` (see
``trainer``). Three moments need rules of their own:

- **Starting.** A folder that holds a checkpoint holds a run: a new run there is refused
  (``--resume`` continues it). A folder that a run left before its first save holds only
  its log; a new run starts there and keeps that log aside, named, so that neither
  ``train`` nor ``train --resume`` is stuck. The folder must be writable before the first
  step, not at the first save, minutes or hours in.
- **Pruning.** Only the ``keep_last`` newest ``step-N/`` stay
  (:func:`prune_step_checkpoints`); deleting more than the one a save rotates out (a
  resume with a smaller ``keep_last``) names the folders in a warning. An old one is
  renamed to ``.step-N.pruned`` first and deleted after: a kill during the deletion leaves
  a hidden leftover, never a partial folder under a checkpoint's name.
- **After a crash.** :func:`remove_pruned_leftovers` deletes such leftovers, naming them;
  the trainer calls it when it starts.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

from transformer_lab.training.checkpoint import ASIDE_MARK, CONFIG_FILE, MODEL_FILE, TEMPORARY_MARK
from transformer_lab.training.run.run_lock import LOCK_FILE
from transformer_lab.training.tensorboard_log import TENSORBOARD_FOLDER

logger = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"
_PRUNED_SUFFIX = ".pruned"


def run_log(folder: Path) -> dict[str, Path]:
    """A run folder's training log, by what it is (nothing for a folder that is no run): an output must not be it."""
    log = folder / METRICS_FILE
    is_run = any((folder / name / CONFIG_FILE).is_file() for name in ("last", "best"))
    return {"the run's metrics log": log} if is_run and log.is_file() else {}


_CHECKPOINT_NAME = r"(last|best|step-\d+)"
CHECKPOINT_FOLDERS = re.compile(rf"^{_CHECKPOINT_NAME}$")
_STEP_FOLDER = re.compile(r"^step-(\d+)$")
# The log of a run that stopped before its first save, kept aside by the next run.
_INTERRUPTED_LOG = re.compile(rf"^{re.escape(METRICS_FILE)}\.interrupted-\d+$")
# A save's old folder renamed aside: a complete checkpoint (recover_interrupted_save).
_ASIDE_FOLDERS = re.compile(rf"^\.{_CHECKPOINT_NAME}{re.escape(ASIDE_MARK)}")
# What save_checkpoint and pruning leave while they work (.last.tmp-XXXX, .best.old-XXXX, .step-000010.pruned).
_WORK_LEFTOVERS = re.compile(
    rf"^\.{_CHECKPOINT_NAME}({re.escape(TEMPORARY_MARK)}.+|{re.escape(ASIDE_MARK)}.+|{re.escape(_PRUNED_SUFFIX)})$"
)


def checkpoint_folders(out_dir: Path) -> list[Path]:
    """The checkpoint folders of a run folder (last/, best/, step-N/, and a save's renamed-aside old copy)."""
    if not out_dir.is_dir():
        return []
    return sorted(
        path
        for path in out_dir.iterdir()
        if path.is_dir() and (CHECKPOINT_FOLDERS.match(path.name) or _ASIDE_FOLDERS.match(path.name))
    )


def prepare_new_run(out_dir: Path, init_from: bool = True) -> Path | None:
    """Make ``out_dir`` ready for a new run; return where an interrupted run's log was kept aside, if any.

    Refuses a folder that holds a checkpoint (a run to ``--resume``) or files that no run
    writes (someone else's folder); checks that the folder is writable. ``init_from``: whether
    the run's task takes ``--init-from``, advised where ``out_dir`` is a checkpoint.
    """
    kept_aside = None
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"--out: expected a folder, got {out_dir}, which is a file")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        if checkpoint_folders(out_dir):
            raise ValueError(
                f"--out: {out_dir} already holds a run; pass --resume to continue it or choose a new folder"
            )
        foreign = _foreign_entries(out_dir)
        if _is_checkpoint(out_dir):
            raise ValueError(_checkpoint_not_run("--out", out_dir, "a new folder", init_from))
        if foreign:
            raise ValueError(
                f"--out: expected a new folder or one a run left before its first checkpoint, got {out_dir} "
                f"holding {', '.join(foreign[:5])}; choose a new folder"
            )
        kept_aside = _keep_metrics_aside(out_dir)
        for path in out_dir.iterdir():
            if not _WORK_LEFTOVERS.match(path.name):
                continue
            if path.is_dir():
                _delete_tree(path)
            else:
                path.unlink()
    check_writable(out_dir)
    return kept_aside


def _keep_metrics_aside(out_dir: Path) -> Path | None:
    log = out_dir / METRICS_FILE
    if not log.exists():
        return None
    number = 1
    while (out_dir / f"{METRICS_FILE}.interrupted-{number}").exists():
        number += 1
    aside = out_dir / f"{METRICS_FILE}.interrupted-{number}"
    os.rename(log, aside)
    logger.warning(
        "%s holds no checkpoint (the last run there stopped before its first save): starting afresh, "
        "its log kept as %s",
        out_dir,
        aside.name,
    )
    return aside


def check_writable(out_dir: Path) -> None:
    """Create ``out_dir`` if needed and prove a file can be written there, or raise naming it."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out_dir, prefix=".write-check-"):
            pass
    except OSError as error:
        raise ValueError(f"--out: expected a folder this user can write, got {out_dir} ({error.strerror})") from None


def _is_checkpoint(folder: Path) -> bool:
    """Whether ``folder`` is a checkpoint (best/, an average), not the run folder that holds them."""
    return (folder / CONFIG_FILE).is_file() and (folder / MODEL_FILE).is_file()


def _checkpoint_not_run(flag: str, folder: Path, expected: str, init_from: bool) -> str:
    said = f"{flag}: expected {expected}, got {folder}, a checkpoint folder (weights, no run around them)"
    return (
        f"{said}; to train it further, start a new run from it: --init-from {folder} --out NEW_FOLDER"
        if init_from
        else said
    )


def explain_missing_last(out_dir: Path, init_from: bool = False) -> str:
    """Why ``--resume`` cannot continue ``out_dir``, and what to do instead.

    ``init_from``: whether the run's task takes ``--init-from`` (those that read data), to advise it too.
    """
    if not out_dir.is_dir():
        return f"--resume: expected a run folder {out_dir}, found none; drop --resume to start the run"
    if _is_checkpoint(out_dir):
        return _checkpoint_not_run(
            "--resume", out_dir, "a run folder (its last/ is what a resume continues)", init_from
        )
    if not checkpoint_folders(out_dir):
        foreign = _foreign_entries(out_dir)
        if foreign:  # not a run at all: the advice to start one there would be refused for these
            return (
                f"--resume: expected a run folder (its last/ is what a resume continues), got {out_dir} holding "
                f"{', '.join(foreign[:5])}, which no run writes; give the folder of the run to continue"
            )
        kept = " (its metrics.jsonl is kept aside)" if (out_dir / METRICS_FILE).exists() else ""
        return (
            f"--resume: {out_dir} holds no checkpoint (the run stopped before its first save), so there is "
            f"nothing to continue; run the same command without --resume to start again{kept}"
        )
    folders = checkpoint_folders(out_dir)
    found = ", ".join(path.name for path in folders)
    message = f"--resume: expected a checkpoint folder {out_dir / 'last'}, found only {found}"
    # Every save writes the same checkpoint, trainer state included, so a step-N/ (else best/) resumes as last/ would.
    steps = sorted((int(match.group(1)), path) for path in folders if (match := _STEP_FOLDER.match(path.name)))
    best = [path for path in folders if path.name == "best"]
    newest = steps[-1][1] if steps else best[0] if best else None
    if newest is None:
        return message
    last = out_dir / "last"
    advice = f"{message}; to continue from {newest.name}, copy it to last/ (cp -r {newest} {last}) and resume"
    if not init_from:
        return advice
    return (
        f"{advice}, or start a new run from its weights with --init-from {newest} --out NEW_FOLDER "
        "(a fine-tune: a new optimizer and the fine-tuning schedule)"
    )


def _foreign_entries(out_dir: Path) -> list[str]:
    """The names in ``out_dir`` that no run writes before its first checkpoint (a user's own files)."""
    return sorted(
        path.name
        for path in out_dir.iterdir()
        if path.name not in (METRICS_FILE, LOCK_FILE, TENSORBOARD_FOLDER)
        and not _WORK_LEFTOVERS.match(path.name)
        and not _INTERRUPTED_LOG.match(path.name)
    )


def _delete_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def prune_folder(path: Path) -> None:
    """Delete a checkpoint folder so that no kill can leave part of it under its name: rename, then delete."""
    doomed = path.with_name(f".{path.name}{_PRUNED_SUFFIX}")
    if doomed.exists():
        _delete_tree(doomed)
    os.rename(path, doomed)
    _delete_tree(doomed)


def check_output_outside_saves(flag: str, out: Path, kind: str = "folder") -> None:
    """Refuse an output (``kind``: a folder, or a file) that a later save would delete: inside a checkpoint, or at
    a run's checkpoint names.

    A checkpoint is saved by renaming a new copy over the whole folder, so a folder inside
    one is lost at the next save; under a run folder (one holding ``metrics.jsonl``),
    ``last/``, ``best/`` and ``step-N/`` are such saves even before they exist, and a
    ``step-N/`` written by hand would be averaged and pruned as a real step. A file there (a
    figure) is lost the same way, and a step checkpoint holding it is no longer one that
    ``average-checkpoints`` can average with the others.
    """
    path = out.resolve()
    for child, folder in zip([path, *path.parents], path.parents):
        if (folder / METRICS_FILE).is_file() and CHECKPOINT_FOLDERS.match(child.name):
            where = "" if child == path else f"inside {child}, "
            raise ValueError(
                f"{flag}: expected a {kind} outside the checkpoints of a run, got {out}, {where}a checkpoint name "
                f"of the run folder {folder}: the next save of that run replaces it; choose a place beside them"
            )
    for folder in path.parents:
        if (folder / CONFIG_FILE).is_file() and (folder / MODEL_FILE).is_file():
            raise ValueError(
                f"{flag}: expected a {kind} outside checkpoints, got {out}, inside the checkpoint folder {folder}: "
                "the next save of that checkpoint replaces the folder whole; choose a place beside it"
            )


def step_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """The ``step-N/`` entries of ``folder`` with their N, smallest first."""
    return sorted((int(match.group(1)), path) for path in folder.iterdir() if (match := _STEP_FOLDER.match(path.name)))


def step_folder_name(step: int) -> str:
    """The name of the checkpoint folder of optimizer step ``step``: ``step-000123``."""
    return f"step-{step:06d}"


def prune_step_checkpoints(out_dir: Path, keep_last: int) -> list[str]:
    """Delete all but the ``keep_last`` newest ``step-N/`` folders of ``out_dir``; return the deleted names.

    The newest are those with the largest N. A save adds at most one step folder (none when
    ``keep_last`` is 0), so the rotation deletes at most that one; deleting more means the
    folder held more than ``keep_last`` (a resume with a smaller one), and those are named.
    """
    steps = [(step, path) for step, path in step_checkpoints(out_dir) if path.is_dir()]
    doomed = [path for _, path in steps[: max(len(steps) - keep_last, 0)]]
    for path in doomed:
        prune_folder(path)
    names = [path.name for path in doomed]
    if len(names) > min(keep_last, 1):
        kept = f"the newest {keep_last}" if keep_last else "none"
        logger.warning(
            "deleted the step checkpoints %s of %s: train.keep_last=%d keeps %s, and the folder held %d "
            "(an earlier run there kept more)",
            ", ".join(names),
            out_dir,
            keep_last,
            kept,
            len(steps),
        )
    return names


def remove_pruned_leftovers(out_dir: Path) -> list[str]:
    """Delete what a kill during pruning left (``.step-N.pruned``), logging each name; return the names."""
    if not out_dir.is_dir():
        return []
    removed = []
    for path in sorted(out_dir.iterdir()):
        if path.name.startswith(".") and path.name.endswith(_PRUNED_SUFFIX) and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path.name)
            logger.warning("removed %s, a step checkpoint whose deletion a crash interrupted", path / "")
    return removed
