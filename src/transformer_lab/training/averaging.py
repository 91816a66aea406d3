"""Checkpoint averaging: the mean of the last N checkpoints' weights often beats any one of them."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable, Sequence

import torch
from safetensors import SafetensorError, safe_open
from torch import nn

from .checkpoint import (
    _RESERVED_NAMES,
    MODEL_FILE,
    checkpoint_config_section,
    is_evaluation_output,
    load_checkpoint_config,
    load_model_weights,
    non_finite_tensors,
    save_checkpoint,
    trained_task_name,
)
from .model_card import CARD_FILE, averaged_card

__all__ = ["average_checkpoints"]


def average_checkpoints(
    sources: Sequence[str | os.PathLike[str]],
    target: str | os.PathLike[str],
    model: nn.Module | Callable[[], nn.Module],
) -> Path:
    """Write to ``target`` a checkpoint whose weights are the mean of ``sources``' weights.

    ``model`` is a freshly built model of the same configuration (used as the container),
    or a function that builds one, called once the sources have passed their checks (so
    that building it from a source's weights cannot warn about them before they are refused).
    ``config.json`` and the extra files (e.g. the tokenizer) come from the last source;
    no trainer state is written, so the result is for inference, not for resuming.

    The sources are checked first (see :func:`_check_averageable`); nothing is written
    for sources that are refused.
    """
    target = Path(target)
    if any(Path(source).resolve() == target.resolve() for source in sources):
        raise ValueError(f"target: expected a folder other than the sources, got {target}")
    _check_averageable(sources)
    if not isinstance(model, nn.Module):
        model = model()
    sums: dict[str, torch.Tensor] = {}
    for source in sources:
        load_model_weights(source, model)
        for name, tensor in model.state_dict(keep_vars=False).items():
            value = tensor.detach().double()
            sums[name] = value.clone() if name not in sums else sums[name] + value
    averaged = {name: (total / len(sources)).to(model.state_dict()[name].dtype) for name, total in sums.items()}
    model.load_state_dict(averaged)
    last = Path(sources[-1])
    # Not the outputs an evaluation wrote beside the last one: they describe its weights, not the average's.
    extra_files = {path.name: path.read_bytes() for path in sorted(last.iterdir()) if _carried(path)}
    if CARD_FILE in extra_files:
        # The last checkpoint's card describes its own weights and scores, not the average's.
        extra_files[CARD_FILE] = averaged_card(last, sources).encode("utf-8")
    config = dict(load_checkpoint_config(last))
    config["averaged_from"] = [str(source) for source in sources]
    return save_checkpoint(target, model, config, extra_files=extra_files)


def _check_averageable(sources: Sequence[str | os.PathLike[str]]) -> None:
    """Refuse sources whose mean would be no model, before any weights are loaded into one.

    Every source must be of the last one's task with byte-identical tokenizer and
    vocabulary files: rows of an embedding mean a token only under their own vocabulary,
    and two vocabularies of one size give weights of the same shapes, which would
    average without a word into a model that fits neither. Their ``model`` sections must be
    equal (weights of one shape under another activation or norm placement compute
    something else), so must their data languages (a joint tokenizer serves de->en and
    en->de alike), and every weight finite (one NaN makes the whole mean NaN).
    """
    if len(sources) < 1:
        raise ValueError("sources: expected at least one checkpoint folder, got none")
    folders = [Path(source) for source in sources]
    _check_one_vocabulary(folders)
    _check_one_model(folders)
    _check_one_language_pair(folders)
    for folder in folders:
        _check_finite(folder)


def _check_one_model(sources: Sequence[Path]) -> None:
    """Refuse sources whose config's ``model`` section differs from the last one's, naming the first key."""
    _check_same_settings(
        sources,
        "model",
        lambda key: True,
        "one model configuration",
        "averaging their weights would give a model that is neither",
    )


def _check_one_language_pair(sources: Sequence[Path]) -> None:
    """Refuse sources whose data languages (``data.*_language``) differ: one tokenizer can serve two pairs."""
    _check_same_settings(
        sources,
        "data",
        lambda key: key.endswith("_language"),
        "one language pair",
        "a model averaged across directions translates neither",
    )


def _check_same_settings(
    sources: Sequence[Path], section: str, compared: Callable[[str], bool], expected: str, why: str
) -> None:
    """Refuse sources whose config's ``section`` differs from the last one's in a ``compared`` key, naming it."""
    last = sources[-1]
    settings = checkpoint_config_section(last, section, absent={})
    for source in sources[:-1]:
        other = checkpoint_config_section(source, section, absent={})
        for key in sorted(key for key in set(settings) | set(other) if compared(key)):
            if other.get(key) != settings.get(key):
                raise ValueError(
                    f"sources: expected checkpoints of {expected}, got {section}.{key} "
                    f"{other.get(key, '(absent)')!r} in {source} and {settings.get(key, '(absent)')!r} in {last}; "
                    f"{why}"
                )


def _check_finite(folder: Path) -> None:
    """Refuse a checkpoint whose stored weights hold NaN or inf, naming the first such tensor."""
    path = folder / MODEL_FILE
    try:
        with safe_open(str(path), framework="pt") as weights:
            stored = ((name, weights.get_tensor(name)) for name in weights.keys())
            bad = next(non_finite_tensors(stored), None)
    except (SafetensorError, OSError):
        # A missing or damaged file is refused by the loader, with its own message naming it.
        return
    if bad is not None:
        raise ValueError(
            f"sources: expected finite weights, got NaN or inf in tensor {bad!r} of {path}; "
            "leave that checkpoint out (was the run diverging when it saved?)"
        )


def _vocabulary_digests(folder: Path) -> dict[str, str]:
    """sha256 of each file that the checkpoint's weights are read with (tokenizers, vocabularies, classes)."""
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.iterdir())
        if _carried(path) and path.name != CARD_FILE
    }


def _carried(path: Path) -> bool:
    """Whether a checkpoint's file goes with its weights into an average (its vocabulary, its card).

    Not the weights and config (written anew), nor an evaluation's outputs (they describe the
    source's weights), nor a hidden file: the temporary of a write a kill cut short.
    """
    return (
        path.is_file()
        and path.name not in _RESERVED_NAMES
        and not is_evaluation_output(path.name)
        and not path.name.startswith(".")
    )


def _check_one_vocabulary(sources: Sequence[Path]) -> None:
    """Refuse sources whose task, or tokenizer and vocabulary files (by content), differ from the last one's."""
    last = sources[-1]
    # As trained: copy, reverse and sort are one task, synthetic, with three data.task.
    task = trained_task_name(load_checkpoint_config(last))
    digests = _vocabulary_digests(last)
    for source in sources[:-1]:
        other_task = trained_task_name(load_checkpoint_config(source))
        if other_task != task:
            raise ValueError(
                f"sources: expected checkpoints of one task, got {source} of {other_task!r} and {last} of {task!r}"
            )
        other = _vocabulary_digests(source)
        if set(other) != set(digests):
            raise ValueError(
                f"sources: expected the same tokenizer and vocabulary files in every checkpoint, got "
                f"{sorted(other)} in {source} and {sorted(digests)} in {last}"
            )
        for name, digest in digests.items():
            if other[name] != digest:
                raise ValueError(
                    f"sources: expected checkpoints with one vocabulary, got {source / name} (sha256 "
                    f"{other[name][:12]}...) other than {last / name} (sha256 {digest[:12]}...); averaging would mix "
                    "embedding rows of different tokens"
                )
