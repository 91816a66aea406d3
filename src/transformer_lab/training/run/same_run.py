"""Whether a ``--resume`` continues the run its folder holds: the same task, data settings and seed.

The Trainer restores weights, optimizer and position from ``last/`` whatever the command
says; a resume under another task's name, another synthetic task, another file format,
other training files, or any other setting that changes the batches or the vocabulary
(``num_train``, the data ``seed``, ``lowercase``, ``min_frequency``, ``vocab_size``,
``max_tokens``, ...) would train on without a word, the checkpoint's step count meaning
nothing for the new data, and ``config.json`` would record values the run never had.
:func:`check_same_run` compares every data setting, and the training seed, with the
``config.json`` of ``last/`` and refuses in one line listing each difference with both
values. Only where the data and its caches live may differ (another machine's folders).
Steps, epochs and rates are the training's and may change: a resume to more steps is what
``--resume`` is for.

:func:`check_same_model` compares the ``model`` section the run wrote with the one the
resumed run would write (vocabulary sizes and special ids filled in from the vocabulary),
so that another activation, norm placement, dropout or width is refused in one line before
the trainer state is read, not trained on (or blamed on ``trainer_state.pt``'s shapes).

A run from a prepared folder records the folder's input files and checksums
(``prepared_corpus`` in ``config.json``): the same folder name prepared again since, from
other files or with other settings, is refused in one line saying what changed. A run that
read its files through the cache records them the same way, and a file changed since is refused.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from transformer_lab.data.download import sha256_of_file
from transformer_lab.data.prepared_cache import corpus_change, inputs_change, prepared_corpus_record
from transformer_lab.training.checkpoint import (
    CONFIG_FILE,
    PREPARED_CORPUS_KEY,
    checkpoint_config_section,
    checkpoint_task_config,
    load_checkpoint_config,
)
from transformer_lab.training.config_io import config_to_dict, shown

logger = logging.getLogger(__name__)

__all__ = ["check_same_model", "check_same_run", "held_out_change", "recorded_corpus_change", "with_absolute_paths"]

# Data fields a resume may change: where the data and the prepared corpora live on this
# machine, the split that evaluate scores by default, and classification's train_file,
# which a run records as the file it chose (relative to ag_news/) when the command left it
# to the task (train_files covers own data). Every other data field must match.
_FREE_DATA_FIELDS = ("data_dir", "cache_dir", "test_split", "train_file")
_FILE_FIELDS = ("train_files", "valid_files", "prepared_dir", "tokenizer_file", "target_tokenizer_file")
# Where the data lives: recorded as absolute paths, so that a resume or an evaluate from another folder finds them.
_PLACE_FIELDS = (*_FILE_FIELDS, "data_dir", "cache_dir")
# Training fields that must match: the seed drew the first weights and dropout's stream.
_FIXED_TRAIN_FIELDS = ("seed",)


def _comparable(name: str, value: Any) -> Any:
    """Paths as real absolute paths (a relative one was given from the same working folder); lists as lists."""
    if name in _FILE_FIELDS:
        if isinstance(value, (list, tuple)):
            return [os.path.realpath(item) if isinstance(item, str) and item else item for item in value]
        return os.path.realpath(value) if isinstance(value, str) and value else value
    return list(value) if isinstance(value, tuple) else value


def with_absolute_paths(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` (``config_to_dict``'s) with its data paths made absolute from the working folder.

    A run records where its data was; a relative path in ``config.json`` would name other
    files for a ``--resume`` started from another folder, which then trained on them.
    """
    data = config.get("data")
    if not isinstance(data, Mapping):
        return dict(config)

    def absolute(value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return [absolute(item) for item in value]
        return os.path.abspath(value) if isinstance(value, str) and value else value

    # The cache folder takes "~" as the home folder (`CorpusKind.cache_folder`): recorded as used.
    expanded = {
        name: os.path.expanduser(value) if name == "cache_dir" and isinstance(value, str) else value
        for name, value in data.items()
    }
    placed = {name: absolute(value) if name in _PLACE_FIELDS else value for name, value in expanded.items()}
    return {**config, "data": placed}


def check_same_run(last_folder: Path, task: str, command_config: Any) -> None:
    """Raise a ``ValueError`` naming the difference unless ``command_config`` continues the run in ``last_folder``.

    ``command_config`` is the command's config (a task's config dataclass); the run's
    ``config.json`` is read as that type first, so that a section missing, a key unknown or
    a value of another type there is refused naming the file, not compared past.

    ``task`` is the name the checkpoints record (``config.json``'s ``"task"``).
    """
    saved = load_checkpoint_config(last_folder)
    where = f"--resume: {last_folder / CONFIG_FILE}"
    if saved.get("task") != task:
        raise ValueError(
            f"{where}: expected a run of the task this command trains ({task!r}), got a run of {saved.get('task')!r}; "
            "resume with the command that started it, or train into a new --out"
        )
    # The keys beside the sections (the task's name, data counts, ...) differ by task and are not settings.
    sections = {field.name for field in dataclasses.fields(command_config)}
    metadata = [key for key in saved if key not in sections]
    try:
        checkpoint_task_config(saved, last_folder / CONFIG_FILE, type(command_config), metadata)
    except ValueError as error:
        raise ValueError(f"--resume: {error}") from None
    config = config_to_dict(command_config)
    differences = [
        *_differences("data", saved.get("data"), config.get("data"), None, _free_data_fields(saved, config)),
        *_differences("train", saved.get("train"), config.get("train"), _FIXED_TRAIN_FIELDS, ()),
    ]
    if differences:
        raise ValueError(
            f"{where}: expected the data the run was started with (and its seed), got other settings "
            f"({'; '.join(differences)}); resume with the command that started it, or train into a new --out"
        )
    _check_same_corpus(saved, config, f"{where}: {PREPARED_CORPUS_KEY}")
    searches = _differences("decode", saved.get("decode"), config.get("decode"), None, ())
    if searches:
        # Allowed (a checkpoint's search is the user's to choose), but said: the validations on each
        # side of the resume score two searches, and best/ is chosen among both.
        logger.warning(
            "%s: resuming with another search (%s): the validations from here on decode with it, and the "
            "checkpoints record it",
            where,
            "; ".join(searches),
        )


def _free_data_fields(saved: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[str, ...]:
    """The data fields a resume may change; ``prepared_dir`` too where both name one and the run recorded its corpus.

    A prepared folder moved or copied elsewhere (another disk, another machine) is the same
    corpus: the record of its files' checksums, compared next, says whether it is.
    """
    folders = [
        section.get("prepared_dir") if isinstance(section, Mapping) else None
        for section in (saved.get("data"), config.get("data"))
    ]
    return (*_FREE_DATA_FIELDS, "prepared_dir") if all(folders) and PREPARED_CORPUS_KEY in saved else _FREE_DATA_FIELDS


def _check_same_corpus(saved: Mapping[str, Any], config: Mapping[str, Any], where: str) -> None:
    """Refuse a prepared folder (``data.prepared_dir``) prepared again, or input files changed, since the run began.

    The same folder name may hold another corpus: prepared again from other files, or from
    the same ones changed since, its ids and vocabulary are not those the run trained on.
    A run that recorded none (started before runs recorded it) is not compared.
    """
    found = recorded_corpus_change(saved, config.get("data"), where)
    if found is None:
        return
    folder, change = found
    if folder is None:
        # Files read through the cache: the cache prepares a changed file again, and the run
        # would go on from its step and place in the epoch on other data.
        raise ValueError(
            f"--resume: expected the data files the run started on, got other contents: {change}; restore it, "
            "or train into a new --out (--init-from fine-tunes the run on the new data)"
        )
    raise ValueError(
        f"--resume: data.prepared_dir: expected the corpus the run started on, got {folder}, which {change}; "
        "resume with that corpus, or train into a new --out"
    )


def recorded_corpus_change(saved: Mapping[str, Any], data: Any, where: str) -> tuple[str | None, str] | None:
    """(the prepared folder or None, how it changed) where the corpus a checkpoint's config (``saved``) recorded
    differs from the one ``data`` (its data section, as a dict) names now; None when it is the same, or when
    none was recorded (a run started before runs recorded it).

    With ``data.prepared_dir``, the folder's files are compared with their recorded checksums;
    else the input files read through the cache, with their recorded state and sha256.
    """
    if PREPARED_CORPUS_KEY not in saved:
        return None
    folder = data.get("prepared_dir") if isinstance(data, Mapping) else None
    if not folder:
        change = inputs_change(saved[PREPARED_CORPUS_KEY], where) or _retargeted_file(saved[PREPARED_CORPUS_KEY], data)
        return None if change is None else (None, change)
    change = corpus_change(saved[PREPARED_CORPUS_KEY], prepared_corpus_record(folder), where)
    return None if change is None else (str(folder), change)


def held_out_change(checkpoint: Path, files: Sequence[Path]) -> str | None:
    """How the data a run at ``checkpoint`` held its validation rows out of differs now, or None.

    ``files`` are those an evaluation reads them from again: its prepared folder's, or the input
    files, each of which must hold what one the run read held (a folder given elsewhere included).
    """
    saved = load_checkpoint_config(checkpoint)
    where = str(Path(checkpoint) / CONFIG_FILE)
    found = recorded_corpus_change(saved, saved.get("data"), where)
    if found is not None:
        folder, change = found
        return change if folder is None else f"the prepared folder {folder}, which {change}"
    if PREPARED_CORPUS_KEY not in saved or (saved.get("data") or {}).get("prepared_dir"):
        return None
    unread = _first_unread(saved[PREPARED_CORPUS_KEY], files)
    return None if unread is None else f"{unread[0]} holds other contents than any file the run read"


def _retargeted_file(recorded: Mapping[str, Any], data: Any) -> str | None:
    """How a data file the command names now leads to other contents than any file the run read, or None.

    The run records each input by its real path, and the command's paths are compared by theirs
    now: a symbolic link (``t.de -> v1.de``) pointed since at another file (``v2.de``) passes
    both, so the file it leads to now is compared by its sha256 with the files the run read.
    """
    if not isinstance(data, Mapping):
        return None
    unread = _first_unread(
        recorded, [given for name in ("train_files", "valid_files") for given in data.get(name) or ()]
    )
    if unread is None:
        return None
    read = sorted(item["path"] for item in recorded["inputs"])
    return f"{unread[0]} now leads to {unread[1]}, which the run never read (it read {', '.join(read)})"


def _first_unread(recorded: Mapping[str, Any], paths: Iterable[str | os.PathLike[str]]) -> tuple[str, str] | None:
    """(as given, its real path) of the first of ``paths`` whose file holds what none of the run's ``recorded``
    inputs held. A path the run read is skipped: its record was compared already (`inputs_change`)."""
    read = {item["path"] for item in recorded["inputs"]}
    checksums = {item["sha256"] for item in recorded["inputs"]}
    for given in paths:
        real = os.path.realpath(given)
        if real in read or not os.path.isfile(real) or sha256_of_file(Path(real)) in checksums:
            continue
        return os.fspath(given), real
    return None


def check_same_model(last_folder: Path, model: Any) -> None:
    """Raise a ``ValueError`` listing each difference unless ``model`` is the run's ``model`` section.

    ``model`` is the section the resumed run will write to ``config.json``, resolved as the
    run's was (the vocabulary's sizes and ids filled in); None (no such section) is not compared.
    """
    if model is None:
        return
    try:
        saved = checkpoint_config_section(last_folder, "model")
    except ValueError as error:
        raise ValueError(f"--resume: {error}") from None
    differences = _differences("model", saved, model, None, ())
    if differences:
        raise ValueError(
            f"--resume: {last_folder / CONFIG_FILE}: expected the model the run was started with, got other settings "
            f"({'; '.join(differences)}); resume with the command that started it, or train into a new --out"
        )


def _differences(
    section: str, saved: Any, now: Any, compared: tuple[str, ...] | None, free: tuple[str, ...]
) -> list[str]:
    """``section.key: OLD in the run, NEW now`` for each key of ``compared`` (None: all but ``free``) that differs.

    A key absent from either side (a config written before the field existed) is not compared.
    """
    if not isinstance(saved, Mapping) or not isinstance(now, Mapping):
        return []
    names = [name for name in saved if name in now and name not in free and (compared is None or name in compared)]
    pairs = [(name, _comparable(name, saved[name]), _comparable(name, now[name])) for name in names]
    return [f"{section}.{name}: {shown(old)} in the run, {shown(new)} now" for name, old, new in pairs if old != new]
