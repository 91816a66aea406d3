"""Fine-tuning: a new run that starts from a trained checkpoint's weights, tokenizer and model.

``transformer-lab train TASK --init-from CHECKPOINT`` keeps what the checkpoint learned
(weights, tokenizer or vocabulary, model config) and trains it further on new data with a
fresh optimizer and schedule, the way OpenNMT-py's ``train_from`` with ``reset_optim`` and
fairseq's ``--finetune-from-model`` do. A different architecture cannot reuse the weights,
so a ``model.X`` that disagrees with the checkpoint is an error whichever source set it
(``--set``, ``--config``; ``model.dropout`` excepted: it shapes no weight); a checkpoint of
another task is an error too. The data settings the tokenizer or vocabulary was made with
(``vocab_size``, ``lowercase``, the BPE's, ...) are the checkpoint's for the same reason:
the new ``config.json`` records the checkpoint's values, and another value given is an error.
How the model answers (its ``decode`` section, a couplet's ``constraints``) is the checkpoint's
too, unless given: a fine-tune that meant to change the search says so.

The schedule: the presets' rates are for a model that starts from random weights (a peak
of ~1e-3 after ~800 warm-up steps); a trained model on a few hundred new pairs wants a
rate about ten times lower and a short warm-up, or it forgets what it knew before it
learns the new domain. :data:`FINETUNE_TRAIN` is laid over the preset before ``--config`` and
``--set``, so the user's ``train.*`` still wins. ``--resume`` of a fine-tuned run (its
``config.json`` names the checkpoint, :data:`INITIALIZED_FROM_KEY`) lays the same schedule and
takes the model and tokenizer settings from the run's own ``last/``, so it continues exactly.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, TypeVar

from torch import nn

from transformer_lab.data.prepared_cache import corpus_data_config
from transformer_lab.training import config_from_dict, load_model_weights
from transformer_lab.training.checkpoint import load_checkpoint_config, trained_task_name
from transformer_lab.training.config import TaskConfig
from transformer_lab.training.config_io import Setting, shown
from transformer_lab.training.model_card import INITIALIZED_FROM_KEY

logger = logging.getLogger(__name__)


ConfigType = TypeVar("ConfigType", bound=TaskConfig)

# Peak rate lr_factor / sqrt(d_model * warmup_steps): 0.02 / sqrt(256 * 100) = 1.25e-4 for
# the translation model, then the inverse-square-root decay; no cool-down (the run's
# length is the user's), and the warm-up kept as set on the small data a fine-tune is for.
FINETUNE_TRAIN: dict[str, Any] = {
    "lr_factor": 0.02,
    "warmup_steps": 100,
    "cooldown_steps": 0,
    "fit_schedule_to_run": False,
}
# The origin of FINETUNE_TRAIN's settings, in messages and to tell them from the user's.
FINETUNE_ORIGIN = "the fine-tuning schedule"
# Fields of the model config that a fine-tune may change: they shape no weight.
CHANGEABLE_MODEL_FIELDS = ("dropout",)
# The sections of a task's config that the model, its training and its data fill; the others say how it answers.
_LEARNT_SECTIONS = ("model", "train", "data")


def finetune_settings() -> list[Setting]:
    """The fine-tuning rate and warm-up (:data:`FINETUNE_TRAIN`), as settings laid over the preset."""
    return [Setting(f"train.{name}", value, FINETUNE_ORIGIN) for name, value in FINETUNE_TRAIN.items()]


def checkpoint_data_settings(checkpoint: str | Path, names: Collection[str]) -> list[Setting]:
    """The checkpoint's values of the data fields ``names``, as settings laid over the preset (the user's still win).

    They say how the files it learned from were laid out (a translator's languages, a classifier's
    columns): a fine-tune on more data of that form reads it so without being told again, as
    ``evaluate`` reads a test file, and not, say, in the preset's direction. A field the
    checkpoint's ``config.json`` lacks keeps the preset's value.
    """
    saved = load_checkpoint_config(checkpoint).get("data")
    if not isinstance(saved, Mapping):
        return []
    return [Setting(f"data.{name}", saved[name], f"--init-from {checkpoint}") for name in names if name in saved]


def checkpoint_model_settings(checkpoint: str | Path) -> list[Setting]:
    """The checkpoint's model fields, which a fine-tune takes where no setting chose another value.

    Not laid over the preset (`with_checkpoint_model` applies them once the choices are known):
    they let the command say which values of a ``--config`` file, the preset's own, the checkpoint's replaced.
    """
    saved = load_checkpoint_config(checkpoint).get("model")
    if not isinstance(saved, Mapping):
        return []
    return [Setting(f"model.{name}", value, f"--init-from {checkpoint}") for name, value in saved.items()]


def checkpoint_decoding_settings(checkpoint: str | Path, preset: TaskConfig) -> list[Setting]:
    """The checkpoint's values of ``preset``'s sections beside model, train and data, laid over the preset.

    Those sections say how the trained model answers (its search, a couplet's rules): a fine-tune
    answers as the model it starts from did (a beam of 3 stays 3), unless the user's settings say
    otherwise. A field the checkpoint's ``config.json`` lacks keeps the preset's value.
    """
    saved = load_checkpoint_config(checkpoint)
    settings = []
    for section in dataclasses.fields(preset):
        stored, default = saved.get(section.name), getattr(preset, section.name)
        if section.name in _LEARNT_SECTIONS or not dataclasses.is_dataclass(default) or not isinstance(stored, Mapping):
            continue
        known = [field.name for field in dataclasses.fields(default) if field.init and field.name in stored]
        origin = f"--init-from {checkpoint}"
        settings += [Setting(f"{section.name}.{name}", stored[name], origin) for name in known]
    return settings


def check_checkpoint_task(checkpoint: str | Path, task_name: str) -> dict[str, Any]:
    """``checkpoint``'s ``config.json``; a checkpoint of another task than ``task_name`` is refused."""
    saved = load_checkpoint_config(checkpoint)
    if saved.get("task") != task_name:
        raise ValueError(
            f"--init-from: expected a {task_name} checkpoint, got {str(checkpoint)!r}, "
            f"a checkpoint of the task {trained_task_name(saved)!r}"
        )
    return saved


def with_checkpoint_model(
    config: ConfigType, checkpoint: str | Path, task_name: str, changed: Mapping[str, Setting]
) -> ConfigType:
    """``config`` with the model section of ``checkpoint``; refuses another task or a differing ``model.X``.

    ``changed`` are the settings that changed the preset, by dotted key, whatever their
    origin (``--config``, ``--set``, ...): a ``model.X`` among them must agree with the
    checkpoint (except the fields that shape no weight, which it changes).
    """
    saved = check_checkpoint_task(checkpoint, task_name)
    try:
        saved_model = config_from_dict(type(config.model), saved.get("model", {}))
    except ValueError as error:
        raise ValueError(f"--init-from: {Path(checkpoint) / 'config.json'}: {error}") from None
    for key in sorted(changed):
        section, _, name = key.partition(".")
        if section != "model":
            continue
        wanted, stored = getattr(config.model, name), getattr(saved_model, name)
        if name in CHANGEABLE_MODEL_FIELDS:
            saved_model = dataclasses.replace(saved_model, **{name: wanted})
        elif wanted != stored:
            raise ValueError(
                f"{changed[key].origin} {key}={wanted}: expected the value of the checkpoint it fine-tunes, "
                f"{stored} ({checkpoint}); fine-tuning keeps the architecture (only model.dropout may change)"
            )
    return dataclasses.replace(config, model=saved_model)


def with_checkpoint_vocabulary_settings(
    config: ConfigType, checkpoint: str | Path, settings: Collection[str], changed: Mapping[str, Setting]
) -> ConfigType:
    """``config`` whose data ``settings`` (the fields its vocabulary was made with) are ``checkpoint``'s.

    A fine-tune keeps the checkpoint's tokenizer or vocabulary, so those settings are not
    used: one among ``changed`` (by dotted key, whatever its origin) with another value than
    the checkpoint's is a ValueError naming the key, both values and where it was given. A
    field the checkpoint's ``config.json`` lacks (written before it existed) stays as it is.
    """
    saved_data = load_checkpoint_config(checkpoint).get("data")
    data: Any = getattr(config, "data", None)
    if not isinstance(saved_data, Mapping) or data is None:
        return config
    fixed = {name: saved_data[name] for name in settings if name in saved_data and hasattr(data, name)}
    for name, stored in fixed.items():
        key = f"data.{name}"
        wanted = getattr(data, name)
        if key in changed and wanted != stored:
            raise ValueError(
                f"{changed[key].origin} {key}={shown(wanted)}: expected the value of the checkpoint it fine-tunes, "
                f"{shown(stored)} ({checkpoint}); fine-tuning keeps the checkpoint's vocabulary, "
                "which was made with that value"
            )
    return dataclasses.replace(config, data=corpus_data_config(data, fixed))


def recorded_initialization(run_checkpoint: str | os.PathLike[str], task_name: str) -> str | None:
    """The checkpoint a run of ``task_name`` was fine-tuned from, as its ``run_checkpoint`` (``last/``) records it.

    None for a run from random weights, a folder without a readable ``config.json`` or of
    another task (the resume's own checks name those).
    """
    try:
        saved = load_checkpoint_config(run_checkpoint)
    except (OSError, ValueError):
        return None
    recorded = saved.get(INITIALIZED_FROM_KEY)
    return recorded if saved.get("task") == task_name and isinstance(recorded, str) else None


def load_initial_weights(model: nn.Module, init_from: str | os.PathLike[str] | None, resume: bool) -> dict[str, str]:
    """Load ``init_from``'s weights into ``model`` for a fine-tune; returns the metadata its checkpoints record.

    Nothing happens without ``init_from`` or on ``resume`` (the run's own ``last/`` then
    holds newer weights).
    """
    if init_from is None or resume:
        return {}
    load_model_weights(init_from, model)
    logger.info("fine-tuning from %s", init_from)
    return {INITIALIZED_FROM_KEY: str(init_from)}
