"""Checkpoint folders, written atomically and loaded without unpickling arbitrary objects.

A checkpoint is a folder::

    model.safetensors   the weights (safetensors' save_model: tied weights stored once)
    config.json         the resolved configuration, a dict given by the caller
    trainer_state.pt    optional; optimizer, schedule, RNG and position for resume
    <extra files>       optional; e.g. the vocabulary or tokenizer files

Atomicity: everything is written into a temporary sibling folder ``.<name>.tmp-XXXX``, each
file and the folder fsync'd, and only then renamed to ``<name>``. If ``<name>`` already
exists it is first renamed aside to ``.<name>.old-XXXX``, the new folder renamed in, and the
old one deleted. A crash therefore never leaves a partial folder under the final name. In
the short window between the two renames the final name is absent, but the previous
checkpoint is complete under ``.<name>.old-XXXX``; the next :func:`save_checkpoint` to that
name moves it back first, and the loaders' ``FileNotFoundError`` points at it.

``trainer_state.pt`` holds only tensors, numbers, strings, bools, None, lists, tuples and
dicts (checked when saving), and is read with ``torch.load(weights_only=True)``.

Failures: a write that fails (a full disk: ``OSError`` ENOSPC; a quota, a read-only or failing
file system) raises a :class:`CheckpointWriteError` (an ``OSError`` with the errno) naming the
folder and the errno's meaning, after removing the temporary folder, with any previous
checkpoint under the name untouched. A file that cannot be read back (truncated, not a checkpoint, weights of another
configuration, a trainer state holding objects other than plain data) is a ``ValueError``
naming the file; nothing in it is ever executed.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import os
import pickle
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import _remove_duplicate_names, load_model
from safetensors.torch import save as save_safetensors
from torch import nn

from transformer_lab import strict_json
from transformer_lab.atomic_files import make_temporary_folder
from transformer_lab.folders import FolderWriteError, describe_os_error
from transformer_lab.path_argument import path_argument
from transformer_lab.word_lists import in_words

from .config_io import ConfigType, config_from_dict, shown
from .model_card import CARD_HINTS_KEY, DATA_COUNTS_KEY
from .time_budget import PLAN_KEY

__all__ = [
    "CONFIG_FILE",
    "CheckpointWriteError",
    "MODEL_FILE",
    "PREPARED_CORPUS_KEY",
    "TRAINER_STATE_FILE",
    "copy_checkpoint",
    "is_evaluation_output",
    "load_checkpoint_config",
    "load_model_weights",
    "load_task_config",
    "load_trainer_state",
    "read_extra_file",
    "recover_interrupted_save",
    "resolve_checkpoint",
    "save_checkpoint",
]

logger = logging.getLogger(__name__)

ModelType = TypeVar("ModelType", bound=nn.Module)

MODEL_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
TRAINER_STATE_FILE = "trainer_state.pt"
_RESERVED_NAMES = (MODEL_FILE, CONFIG_FILE, TRAINER_STATE_FILE)
# Keys of config.json that describe the checkpoint rather than configure its run: the
# task's name (written by the tasks) and the averaged folders (written by averaging).
# "initialized_from": the checkpoint a fine-tuning run started from (its weights and tokenizer);
# PLAN_KEY: what a time budget's measurement found and fixed (time_budget.py); the examples
# a task trained and validated on (for the model card); PREPARED_CORPUS_KEY: the prepared
# folder's input files and checksums (a resume refuses the folder prepared again since).
PREPARED_CORPUS_KEY = "prepared_corpus"
CHECKPOINT_METADATA_KEYS = (
    "task",
    "averaged_from",
    "initialized_from",
    PLAN_KEY,
    DATA_COUNTS_KEY,
    CARD_HINTS_KEY,
    PREPARED_CORPUS_KEY,
)


# A save writes ``.<name>.tmp-XXXX`` and renames the old folder aside to ``.<name>.old-XXXX``
# (module docstring); ``training.run.run_folder`` recognises what a crash left by these marks.
TEMPORARY_MARK = ".tmp-"
ASIDE_MARK = ".old-"


class CheckpointWriteError(FolderWriteError):
    """The system refused a checkpoint's write (ENOSPC, EDQUOT, EROFS, EIO, ...); the previous checkpoint stands.

    An ``OSError`` with the original errno, whose message names the folder and what the
    errno means. The command line reports it as a refused input (exit 2): the run itself
    was sound, and the folder, the disk or the quota is what to change.
    """


def _temporary_prefix(folder: Path) -> str:
    return f".{folder.name}{TEMPORARY_MARK}"


def _aside_prefix(folder: Path) -> str:
    return f".{folder.name}{ASIDE_MARK}"


def _fsync_path(path: Path) -> None:
    # Opening a folder read-only to fsync it is how POSIX makes a rename or a new entry
    # durable; Windows cannot open folders, and there rename durability is best effort.
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) if path.is_dir() else os.O_RDONLY
    try:
        descriptor = os.open(path, flags)
    except OSError:
        if path.is_dir():
            return
        raise
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _check_extra_name(name: str, argument: str) -> None:
    if (
        not isinstance(name, str)
        or not name
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or name.startswith(".")
    ):
        raise ValueError(
            f"{argument}: expected a plain file name (no folders, not starting with '.'), " f"got {name!r}"
        )
    if name in _RESERVED_NAMES:
        raise ValueError(f"{argument}: {name!r} is reserved for the checkpoint itself")


def _check_plain_state(value: Any, where: str) -> None:
    """Refuse what ``torch.load(weights_only=True)`` would refuse, at save time."""
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor)):
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_plain_state(item, f"{where}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, (str, int)):
                raise ValueError(
                    f"trainer_state: expected str or int keys, got {type(key).__name__} " f"key {key!r} at {where}"
                )
            _check_plain_state(item, f"{where}[{key!r}]")
        return
    raise ValueError(
        "trainer_state: expected only tensors, numbers, strings, bools, None, lists, "
        f"tuples and dicts, got {type(value).__name__} at {where}"
    )


def _leftovers(folder: Path, prefix: str) -> list[Path]:
    if not folder.parent.is_dir():
        return []
    return sorted(path for path in folder.parent.iterdir() if path.name.startswith(prefix))


def recover_interrupted_save(folder: str | os.PathLike[str]) -> None:
    """Tidy what a crashed save of ``folder`` left behind; call it only as the folder's writer.

    Temporary folders are deleted; if ``folder`` is absent because the crash fell between
    the two renames, the complete previous checkpoint is renamed back. Every save does this
    first; a training run resuming from ``folder`` does it too, before reading.
    """
    folder = Path(folder)
    for temporary in _leftovers(folder, _temporary_prefix(folder)):
        # A temporary folder was never renamed in, so it may be incomplete: never use it.
        shutil.rmtree(temporary, ignore_errors=True)
    asides = _leftovers(folder, _aside_prefix(folder))
    if asides and not folder.exists():
        # The crash fell between "rename old aside" and "rename new in": the old one is
        # complete, so it is the checkpoint of record again.
        newest = max(asides, key=lambda path: path.stat().st_mtime)
        os.rename(newest, folder)
        logger.warning("restored checkpoint %s from an interrupted save (%s)", folder, newest)
        asides.remove(newest)
    for aside in asides:
        shutil.rmtree(aside, ignore_errors=True)


def _swap_into_place(temporary: Path, folder: Path) -> None:
    """Rename the finished ``temporary`` folder to ``folder``, replacing any old one."""
    aside: Path | None = None
    if folder.exists():
        aside = make_temporary_folder(folder.parent, _aside_prefix(folder))
        # The folder only reserved a unique name; rename needs it absent (or an empty folder
        # on POSIX, but not on Windows).
        aside.rmdir()
        os.rename(folder, aside)
    try:
        os.rename(temporary, folder)
    except BaseException:
        if aside is not None and not folder.exists():
            os.rename(aside, folder)
        raise
    _fsync_path(folder.parent)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def _write_atomically(folder: Path, fill: Any) -> Path:
    """Create a temporary sibling of ``folder``, let ``fill(path)`` write it, swap it in."""
    folder = Path(folder)
    temporary: Path | None = None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        recover_interrupted_save(folder)
        # Made with mkdir's mode (0777 less the umask): renamed into place, it is the checkpoint.
        temporary = make_temporary_folder(folder.parent, _temporary_prefix(folder))
        fill(temporary)
        for path in temporary.iterdir():
            _fsync_path(path)
        _fsync_path(temporary)
        _swap_into_place(temporary, folder)
    except OSError as error:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
        # A full disk, a quota, a read-only or failing file system: say which checkpoint failed,
        # what the errno means and that the old one (if any) still stands, since the raw
        # "[Errno 28] No space left on device" says neither.
        raise CheckpointWriteError(
            error.errno,
            f"could not write checkpoint {str(folder)!r} ({describe_os_error(error)}); "
            "nothing was replaced, the previous checkpoint under that name (if any) is intact",
        ) from error
    except BaseException:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
        raise
    return folder


def model_file_bytes(model: nn.Module) -> bytes:
    """The bytes safetensors' ``save_model`` writes for ``model`` (tied weights stored once).

    Made in memory and written by Python, so that a full disk, a quota or a read-only file
    system is an ``OSError`` with its errno (safetensors' own writer raises its own error
    type, without one).
    """
    state_dict = model.state_dict()
    metadata: dict[str, str] = {}
    for kept, removed in _remove_duplicate_names(state_dict).items():
        for name in removed:
            metadata[name] = kept
            del state_dict[name]
    return save_safetensors({name: tensor.contiguous() for name, tensor in state_dict.items()}, metadata)


def save_model(model: nn.Module, filename: str) -> None:
    """Write ``model``'s weights as safetensors' ``save_model`` does, through a Python file (see above)."""
    Path(filename).write_bytes(model_file_bytes(model))


def save_checkpoint(
    folder: str | os.PathLike[str],
    model: nn.Module,
    config: Mapping[str, Any],
    extra_files: Mapping[str, bytes | str] | None = None,
    trainer_state: Mapping[str, Any] | None = None,
) -> Path:
    """Write a checkpoint folder atomically (see the module docstring) and return its path.

    Args:
        folder: the checkpoint folder; its parent is created if needed.
        model: whose ``state_dict`` goes to ``model.safetensors``; tied weights stored once.
        config: JSON-serialisable dict written to ``config.json``.
        extra_files: file name -> content; ``str`` is written as UTF-8, ``bytes`` as is.
        trainer_state: plain data (tensors, numbers, strings, lists, tuples, dicts) for
            ``trainer_state.pt``; anything else is a ``ValueError`` before anything is written.
    """
    if not isinstance(config, Mapping):
        raise ValueError(f"config: expected a dict, got {type(config).__name__}")
    try:
        config_text = json.dumps(dict(config), indent=2, allow_nan=False) + "\n"
    except (TypeError, ValueError) as error:
        raise ValueError(f"config: expected JSON-serialisable data, got an error: {error}") from error
    extra_files = dict(extra_files or {})
    for name, content in extra_files.items():
        _check_extra_name(name, "extra_files")
        if not isinstance(content, (bytes, str)):
            raise ValueError(f"extra_files[{name!r}]: expected bytes or str, got {type(content).__name__}")
    if trainer_state is not None:
        if not isinstance(trainer_state, Mapping):
            raise ValueError(f"trainer_state: expected a dict, got {type(trainer_state).__name__}")
        _check_plain_state(dict(trainer_state), "trainer_state")

    def fill(temporary: Path) -> None:
        save_model(model, str(temporary / MODEL_FILE))
        (temporary / CONFIG_FILE).write_text(config_text, encoding="utf-8")
        for name, content in extra_files.items():
            if isinstance(content, str):
                (temporary / name).write_text(content, encoding="utf-8")
            else:
                (temporary / name).write_bytes(content)
        if trainer_state is not None:
            # Serialised in memory and written by Python, so that a full disk is an OSError,
            # not torch's "basic_ios::clear" or "unexpected pos" RuntimeError.
            buffer = io.BytesIO()
            torch.save(dict(trainer_state), buffer)
            (temporary / TRAINER_STATE_FILE).write_bytes(buffer.getbuffer())

    return _write_atomically(Path(folder), fill)


def copy_checkpoint(
    source: str | os.PathLike[str], target: str | os.PathLike[str], config: Mapping[str, Any] | None = None
) -> Path:
    """Copy checkpoint folder ``source`` to ``target``, atomically like :func:`save_checkpoint`.

    Files are hard-linked where the file system allows (no extra space, no copying time);
    that is safe because checkpoint files are never modified in place, only replaced by
    renaming whole folders. Otherwise they are copied. With ``config``, ``config.json`` is
    written from it instead (``target`` may then be ``source``: the folder is replaced whole).
    """
    source = _require_folder(Path(source))
    config_text = None if config is None else json.dumps(dict(config), indent=2, allow_nan=False) + "\n"

    def fill(temporary: Path) -> None:
        if config_text is not None:
            (temporary / CONFIG_FILE).write_text(config_text, encoding="utf-8")
        for path in source.iterdir():
            if not path.is_file() or (config_text is not None and path.name == CONFIG_FILE):
                continue
            try:
                os.link(path, temporary / path.name)
            except OSError:
                shutil.copy2(path, temporary / path.name)

    return _write_atomically(Path(target), fill)


def _require_folder(folder: Path) -> Path:
    if folder.is_dir():
        return folder
    message = f"expected a checkpoint folder at {str(folder)!r}, but it does not exist"
    asides = _leftovers(folder, _aside_prefix(folder))
    if asides:
        message += f"; a save was interrupted and the previous checkpoint is complete at " f"{str(asides[-1])!r}"
    raise FileNotFoundError(message)


def _require_file(folder: str | os.PathLike[str], name: str, what: str) -> Path:
    path = _require_folder(Path(folder)) / name
    if not path.is_file():
        # A folder under the file's name (a copy gone wrong) is said as one, not as a file missing.
        state = "is a folder" if path.is_dir() else "does not exist"
        raise FileNotFoundError(f"expected {what} {name!r} in checkpoint {str(folder)!r}, but {str(path)!r} {state}")
    return path


def load_checkpoint_config(folder: str | os.PathLike[str], name: str = "checkpoint") -> dict[str, Any]:
    """Read ``config.json`` of checkpoint ``folder``; an export's folder is refused naming ``name`` (its option)."""
    path = _require_file(folder, CONFIG_FILE, "the configuration")
    try:
        config = strict_json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise ValueError(f"{str(path)!r}: expected UTF-8 JSON, got invalid bytes at byte {error.start}") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{str(path)!r}: expected a JSON object, got malformed JSON: {error}") from None
    except strict_json.DuplicateKeyError as error:
        raise ValueError(f"{str(path)!r}: {error}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{str(path)!r}: expected a JSON object, got {type(config).__name__}")
    if not isinstance(config.get("task", ""), str):
        # Looked up among the tasks by every reader: a list or an object there failed as "unhashable type".
        raise ValueError(f"{path}: task: expected the name of the task that trained it, got {shown(config['task'])}")
    export = _export_kind(Path(folder), config)
    if export is not None:
        raise ValueError(
            f"{name} {str(folder)!r}: expected a checkpoint folder ({MODEL_FILE} and {CONFIG_FILE}, as training "
            f"writes them), got {export} written by `transformer-lab export`; give the checkpoint it was exported from"
        )
    return config


def checkpoint_config_section(
    folder: str | os.PathLike[str], section: str, absent: Mapping[str, Any] | None = None
) -> Mapping[str, Any]:
    """The ``section`` of ``folder``'s config.json, a JSON object as training writes it (``absent`` if none).

    A hand-edited file's null, list or string there, or a missing section with ``absent`` None, is
    refused naming the file: compared key by key, it would fail inside the comparison or let anything through.
    """
    config = load_checkpoint_config(folder)
    settings = config.get(section, absent)
    if not isinstance(settings, Mapping):
        given = "none" if section not in config else "null" if settings is None else shown(settings)
        raise ValueError(
            f"{Path(folder) / CONFIG_FILE}: {section}: expected a JSON object of settings, as training writes it, "
            f"got {given}"
        )
    return settings


def _export_kind(folder: Path, config: Mapping[str, Any]) -> str | None:
    """What export wrote ``folder`` ("an ONNX export", "a CTranslate2 export"), or None for any other folder.

    Both keep a config.json of their own beside no model.safetensors; told by what they write
    (export.onnx's "format", CTranslate2's model.bin), so that it is not read as a checkpoint's.
    """
    if (folder / MODEL_FILE).is_file():
        return None
    if config.get("format") == "onnx":
        return "an ONNX export"
    if "task" not in config and (folder / "model.bin").is_file():
        return "a CTranslate2 export"
    return None


def trained_task_name(config: Mapping[str, Any]) -> Any:
    """The task a checkpoint's ``config`` was trained as, as the user named it: ``train copy`` is the
    synthetic task with ``data.task`` copy, and an error that says "synthetic" names no command they typed."""
    data = config.get("data")
    if isinstance(data, Mapping) and isinstance(data.get("task"), str):
        return data["task"]
    return config.get("task")


def load_task_config(
    folder: str | os.PathLike[str],
    task: str,
    config_type: type[ConfigType],
    extra_metadata_keys: Sequence[str] = (),
) -> ConfigType:
    """The ``config_type`` of a checkpoint written by task ``task``, from its ``config.json``.

    A checkpoint of another task is an error naming both; the metadata keys
    (``CHECKPOINT_METADATA_KEYS`` and the task's ``extra_metadata_keys``, such as a data
    report) are not part of the config and are left out. A bad value is an error naming
    the file and the key.
    """
    raw = load_checkpoint_config(folder)
    if raw.get("task") != task:
        raise ValueError(f"checkpoint {folder}: expected a {task} checkpoint, got task {trained_task_name(raw)!r}")
    ignored = set(CHECKPOINT_METADATA_KEYS) | set(extra_metadata_keys)
    return checkpoint_task_config(raw, Path(folder) / CONFIG_FILE, config_type, ignored)


def checkpoint_task_config(
    raw: Mapping[str, Any], path: Path, config_type: type[ConfigType], ignored: Iterable[str]
) -> ConfigType:
    """``config_type`` from ``raw``, the ``config.json`` at ``path``, its ``ignored`` (metadata) keys left out.

    Every section training writes (each field of ``config_type``) must be there: a config
    read without one takes the preset's values for the run's (another beam, another
    lowercasing, AG News's class names) without a word. A bad value is named by its key.
    """
    fields = dataclasses.fields(config_type) if dataclasses.is_dataclass(config_type) else ()
    sections = [field.name for field in fields]
    missing = [name for name in sections if name not in raw]
    if missing:
        listed = in_words(sections, "and")
        raise ValueError(
            f"{path}: expected {listed}, as training writes them, got none for {', '.join(missing)}; was the file "
            "edited? Without it, the preset's values would stand in for the run's"
        )
    ignored = set(ignored)
    try:
        return config_from_dict(config_type, {key: value for key, value in raw.items() if key not in ignored})
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None


def load_model_weights(folder: str | os.PathLike[str], model: nn.Module) -> nn.Module:
    """Load ``model.safetensors`` of ``folder`` into ``model`` (strict) and return ``model``.

    The tensors are read straight onto the device of the model's first parameter or
    buffer. Missing or unexpected names are a ``ValueError`` listing them.
    """
    path = _require_file(folder, MODEL_FILE, "the weights")
    state = model.state_dict()
    stored = _stored_tensors(path)  # the header, read once for both checks
    _check_shapes(path, state, stored)
    _check_number_types(path, state, stored)
    first = next(iter(state.values()), None)
    device = str(first.device) if first is not None else "cpu"
    try:
        missing, unexpected = load_model(model, str(path), strict=False, device=device)
    except SafetensorError as error:
        raise _unreadable_weights(path, error) from None
    if missing or unexpected:
        raise ValueError(
            f"model: expected the parameter names stored in {str(path)!r}; "
            f"missing from the file: {sorted(missing)}, unexpected in the file: {sorted(unexpected)}"
        )
    _warn_if_not_finite(path, model)
    return model


def non_finite_tensors(tensors: Iterable[tuple[str, torch.Tensor]]) -> Iterator[str]:
    """The names of the floating-point tensors that hold NaN or inf, in order."""
    for name, tensor in tensors:
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            yield name


def _warn_if_not_finite(path: Path, model: nn.Module) -> None:
    """Say so when loaded weights hold NaN or inf: every output of such a model is garbage, silently."""
    with torch.no_grad():
        bad = list(non_finite_tensors(model.state_dict().items()))
    if bad:
        logger.warning(
            "%s: %d tensor(s) hold NaN or inf (%s%s): the model's outputs will be meaningless; "
            "was the run diverging when it saved?",
            path,
            len(bad),
            ", ".join(bad[:3]),
            ", ..." if len(bad) > 3 else "",
        )


def _check_shapes(path: Path, state: Mapping[str, torch.Tensor], stored: Mapping[str, _StoredTensor]) -> None:
    """Refuse, from the file's header alone (``stored``), weights whose shapes are not the model's."""
    mismatched = [
        f"{name}: stored {stored[name].shape}, model {list(tensor.shape)}"
        for name, tensor in state.items()
        if name in stored and stored[name].shape != list(tensor.shape)
    ]
    if mismatched:
        raise ValueError(
            f"{str(path)!r}: expected weights of the shapes the checkpoint's config.json gives "
            f"the model, got {len(mismatched)} tensor(s) of other shapes (the weights and the "
            f"config come from different runs, or the config was edited), first {mismatched[0]}"
        )


def _check_number_types(path: Path, state: Mapping[str, torch.Tensor], stored: Mapping[str, _StoredTensor]) -> None:
    """Refuse, from the file's header alone (``stored``), integer or boolean weights for floating-point tensors."""
    # Loading casts whatever it reads to the parameter's type: integer or boolean weights
    # would load without a word into a model that answers nonsense.
    not_floating = [
        (name, stored[name].dtype)
        for name, tensor in state.items()
        if tensor.is_floating_point() and name in stored and not stored[name].dtype.startswith(("F", "BF"))
    ]
    if not_floating:
        name, kind = not_floating[0]
        more = f" and {len(not_floating) - 1:,} more" if len(not_floating) > 1 else ""
        raise ValueError(
            f"{str(path)!r}: expected floating-point weights (training writes F32), got {kind} in tensor {name!r}"
            f"{more}; the file was converted or written by another program, not saved by training"
        )


def build_model_for_weights(folder: str | os.PathLike[str], build: Callable[[], ModelType]) -> ModelType:
    """``build()``, once the model it makes is known to fit the weights of ``folder``.

    The sizes in ``config.json`` are not trusted: the model is first built on the meta
    device (shapes, no memory) and its shapes compared with the safetensors header, so a
    ``dim_feedforward`` of 1e12 is an error naming the tensor, not an allocation of
    terabytes, and a layer count the weights do not have is an error naming the tensors
    missing (or left over), before any layer is allocated. Load the weights into the
    result with :func:`load_model_weights`.
    """
    path = _require_file(folder, MODEL_FILE, "the weights")
    with torch.device("meta"):
        skeleton = build()
    state = skeleton.state_dict()
    stored = _stored_tensors(path)  # the header, read once for both checks
    _check_names(path, state, _tied_names(skeleton), stored)
    _check_shapes(path, state, stored)
    return build()


def _tied_names(model: nn.Module) -> dict[str, set[str]]:
    """Each parameter name -> every name of the same tensor (tied embeddings have two or three)."""
    by_tensor: dict[int, set[str]] = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        by_tensor.setdefault(id(parameter), set()).add(name)
    return {name: names for names in by_tensor.values() for name in names}


def _check_names(
    path: Path, state: Mapping[str, torch.Tensor], tied: Mapping[str, set[str]], stored: Mapping[str, _StoredTensor]
) -> None:
    """Refuse, from the file's header alone, weights whose tensor names are not the model's (another layer count).

    A tied tensor is stored under one of its names (``tied``), with or without the
    header's note of the others.
    """
    names = set(stored) | {alias for alias, kept in _stored_aliases(path).items() if kept in stored}
    missing = sorted(name for name in state if not (tied.get(name, {name}) & names))
    unexpected = sorted(name for name in names if name not in state)
    if missing or unexpected:
        raise ValueError(
            f"{str(path)!r}: expected the tensors of the model the checkpoint's config.json describes, got "
            f"{len(missing):,} of them missing from the file (first {missing[:1]}) and {len(unexpected):,} the "
            f"model lacks (first {unexpected[:1]}); the layer counts or options of config.json do not match the weights"
        )


class UnreadableWeightsError(ValueError):
    """A weights file that safetensors cannot read (cut short, not safetensors): its own fault, not the config's."""


def _unreadable_weights(path: Path, error: SafetensorError, hint: str = "") -> ValueError:
    """The error for a safetensors file that safetensors cannot read, its message followed by ``hint``."""
    return UnreadableWeightsError(
        f"{str(path)!r}: expected a complete safetensors file, got one that cannot be read ({error}){hint}"
    )


def _safetensors_path(path: Path) -> str:
    """``path`` as the safetensors reader takes it: a ValueError naming it where it is not UTF-8, which it refuses."""
    try:
        os.fsencode(path).decode("utf-8")
    except UnicodeDecodeError:
        # Said of the path: the reader's own error read as a damaged file ("truncated or not a weights file").
        raise ValueError(
            f"{str(path)!r}: expected a path of UTF-8 text, which the safetensors reader needs, got one whose bytes "
            "are not (a name made in another encoding); rename the folder"
        ) from None
    return str(path)


def _stored_aliases(path: Path) -> dict[str, str]:
    """Tied weights stored once: the header's metadata maps each name left out to the name kept."""
    try:
        with safe_open(_safetensors_path(path), framework="pt") as file:
            return dict(file.metadata() or {})
    except SafetensorError as error:
        raise _unreadable_weights(path, error) from None


@dataclasses.dataclass(frozen=True)
class _StoredTensor:
    """A tensor as a safetensors header records it: its shape and number type (F32, BF16, I64, BOOL, ...)."""

    shape: list[int]
    dtype: str


def _stored_tensors(path: Path) -> dict[str, _StoredTensor]:
    """The name -> (shape, number type) table of a safetensors file, read from its header only."""
    try:
        with safe_open(_safetensors_path(path), framework="pt") as file:
            slices = {name: file.get_slice(name) for name in file.keys()}
            return {name: _StoredTensor(list(part.get_shape()), str(part.get_dtype())) for name, part in slices.items()}
    except SafetensorError as error:
        # The header records every tensor's byte range, so a cut file fails here.
        raise _unreadable_weights(path, error, "; it is truncated or not a weights file") from None


def checkpoint_damage(folder: Path) -> str | None:
    """Why ``folder`` is no complete checkpoint (missing, its config or weights unreadable); None if it is one.

    Read from the config and the weights' header, which records every tensor's byte range, so a cut
    file is found without loading the weights.
    """
    try:
        load_checkpoint_config(folder)
        _stored_tensors(_require_file(folder, MODEL_FILE, "the weights"))
    except (OSError, ValueError) as error:
        return str(error)
    return None


def load_trainer_state(folder: str | os.PathLike[str], map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read ``trainer_state.pt`` of ``folder`` with ``torch.load(weights_only=True)``."""
    path = _require_file(folder, TRAINER_STATE_FILE, "the trainer state")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        # torch's message suggests weights_only=False; keep only the line naming the object.
        lines = [line.strip() for line in str(error).splitlines() if "Unsupported" in line]
        detail = f" ({lines[0][:200]})" if lines else ""
        raise ValueError(
            f"{str(path)!r}: refused: expected only tensors, numbers, strings, lists and dicts, "
            f"got a pickle that asks for other objects, which are never unpickled{detail}"
        ) from None
    except Exception as error:  # noqa: BLE001 - a cut zip is OSError, an empty file EOFError, ...
        raise ValueError(
            f"{str(path)!r}: expected a complete trainer state written by save_checkpoint, got a "
            f"file torch cannot read ({type(error).__name__}: {error}); it is truncated or not a trainer state"
        ) from None
    if not isinstance(state, dict):
        raise ValueError(f"{str(path)!r}: expected a dict, got {type(state).__name__}")
    return state


def read_extra_file(folder: str | os.PathLike[str], name: str) -> bytes:
    """Return the bytes of extra file ``name`` of checkpoint ``folder`` (decode text yourself)."""
    _check_extra_name(name, "name")
    return _require_file(folder, name, "the extra file").read_bytes()


def weights_version(checkpoint: Path) -> dict[str, int] | None:
    """Which version of the checkpoint's weights file is there (None: none): a save replaces it with another.

    Its inode, size and mtime, not its ctime: the saves hard-link one weights file into best/, last/ and a
    step folder, and removing one of those links (a save of last/, a pruned step) changes the ctime of the
    others' file, which is the same weights.
    """
    try:
        status = (checkpoint / MODEL_FILE).stat()
    except OSError:
        return None
    return {"inode": status.st_ino, "size": status.st_size, "mtime_ns": status.st_mtime_ns}


def resolve_checkpoint(path: str | os.PathLike[str], name: str = "checkpoint") -> Path:
    """A checkpoint folder itself, or a run folder's ``best/`` (else its ``last/``); errors name ``name``.

    ``name`` is the option or keyword that gave ``path`` (``--init-from`` for a fine-tune).
    """
    if isinstance(path, (str, os.PathLike)) and not os.fspath(path):
        # Path("") is the current folder: the message would quote a '.' nobody typed.
        raise ValueError(
            f"{name}: expected a checkpoint folder (with {CONFIG_FILE}) or a run folder holding best/ or last/, "
            "got an empty path"
        )
    path = path_argument(path, name)
    if (path / CONFIG_FILE).is_file():
        if not (path / MODEL_FILE).is_file():
            load_checkpoint_config(path, name)  # an export's folder is refused here, in the option's name
        return path
    run_checkpoints = ((path / "best", f"give {path / 'last'}"), (path / "last", "give a step-NNNNNN/ of the run"))
    for folder, instead in run_checkpoints:
        if (folder / CONFIG_FILE).is_file():
            return folder
        # best/ falls back to last/ only where the run never wrote one: a damaged best/, or one a
        # stopped save left aside, is said, not replaced by another checkpoint's scores.
        if folder.is_dir():
            raise ValueError(
                f"{name}: {folder}: expected a checkpoint folder (with {CONFIG_FILE}), got a folder without one "
                f"(damaged, or emptied by hand); restore it, or {instead}"
            )
        asides = _leftovers(folder, _aside_prefix(folder))
        if asides:
            raise FileNotFoundError(
                f"{name}: expected {folder}, got none: a save of it was stopped between its two renames, and the "
                f"previous {folder.name}/ is complete at {asides[-1]}; rename it back (mv {asides[-1]} {folder}), "
                f"or {instead}"
            )
    raise FileNotFoundError(
        f"{name}: expected a checkpoint folder (with {CONFIG_FILE}) or a run folder holding best/ or last/, "
        f"got {str(path)!r}"
    )


# What evaluations write into a checkpoint folder by default; every other file there is the checkpoint's own.
_EVALUATION_OUTPUTS = ("hypotheses.", "outputs.", "report.", "samples.", "confusion.")


def is_evaluation_output(name: str) -> bool:
    """Whether the file ``name`` of a checkpoint folder is an evaluation's output written beside it, not its own."""
    return name.startswith(_EVALUATION_OUTPUTS)


def checkpoint_files(checkpoint: str | os.PathLike[str]) -> dict[str, Path]:
    """The files a checkpoint (or a run folder's best/) consists of, by what they are: an output must not be one.

    Its weights, config, vocabulary, model card and trainer state; not the outputs evaluations wrote
    beside them. Nothing for a folder that is no checkpoint (its own error comes later).
    """
    try:
        folder = resolve_checkpoint(checkpoint)
    except (FileNotFoundError, ValueError):
        return {}
    return {
        f"the checkpoint's {path.name}": path
        for path in sorted(folder.iterdir())
        if path.is_file() and not is_evaluation_output(path.name)
    }
