"""``--config FILE`` and ``--set key=value`` on a task's dataclass config, shared by the subcommands."""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from transformer_lab.cli.bounds import path_of
from transformer_lab.training.config_file import config_file_settings
from transformer_lab.training.config_io import (
    Setting,
    derived_by,
    leaf_settings,
    merge_settings,
    override_settings,
    settings_of,
    shown,
)
from transformer_lab.training.durations import duration_seconds
from transformer_lab.training.finetune import CHANGEABLE_MODEL_FIELDS

ConfigType = TypeVar("ConfigType")

logger = logging.getLogger(__name__)
_CHANGEABLE_MODEL_KEYS = tuple(f"model.{name}" for name in CHANGEABLE_MODEL_FIELDS)


def add_override_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, e.g. --set model.d_model=64 --set train.max_steps=500 (repeatable)",
    )


def _file_leaves(cls: type, path: str | os.PathLike[str]) -> list[Setting]:
    """The settings of one --config file, a field each; a field the file gives twice (``train: {max_steps: 3}``
    beside ``train.max_steps: 5``) is refused, as YAML's own key given twice is."""
    leaves = leaf_settings(cls, config_file_settings(path))
    seen: set[str] = set()
    for setting in leaves:
        if setting.key in seen:
            raise setting.error(
                f"{setting.key}: expected each setting once in a file, got it twice (under its section and as a "
                "dotted key); keep one"
            )
        seen.add(setting.key)
    return leaves


def resolved_config(
    preset: ConfigType,
    arguments: argparse.Namespace,
    *,
    schedule: Sequence[Setting] = (),
    flags: Sequence[Setting] = (),
    replaced: Sequence[Setting] = (),
) -> tuple[ConfigType, dict[str, Setting]]:
    """The config and its changes that ``preset``, ``schedule``, --config, ``flags`` (options), --set make, in order.

    A --config value equal to the preset's is no change: ``transformer-lab config TASK``
    prints every key of the preset, and that file fed back must mean the preset (with
    ``--prepared``, whose folder fixes the data settings left to the preset; with
    ``--init-from``, whose fine-tuning ``schedule`` it leaves in place). A typed option or
    --set is a change whatever its value. ``replaced`` are values a later step puts in place of
    the unchosen ones (a fine-tune's checkpoint model): not merged here, only named where they
    replace a file's value.
    """
    paths = getattr(arguments, "config", None) or []
    given = [setting for path in paths for setting in _file_leaves(type(preset), path)]
    from_files = _file_choices(preset, given)
    overrides = override_settings(arguments.overrides)
    _check_options_agree_with_overrides(preset, flags, overrides)
    config, changed = merge_settings(type(preset), [*settings_of(preset), *schedule, *from_files, *flags, *overrides])
    for key, setting in changed.items():
        derived = derived_by(type(preset), key)
        if derived is not None and _value_at(config, key) != _value_at(preset, key):
            # Else replaced once the data is read, without a word (a 7 where the labels hold 3 classes).
            raise setting.error(f"{key}: expected none ({derived}), got {shown(_value_at(config, key))}")
    ruling = [*schedule, *(setting for setting in replaced if derived_by(type(preset), setting.key) is None)]
    _log_schedule_kept(ruling, given, [*from_files, *flags, *overrides])
    return config, changed


def _file_choices(preset: ConfigType, settings: Sequence[Setting]) -> list[Setting]:
    """The --config fields (``settings``, one a field) that choose: a value other than the preset's, or one
    undoing an earlier file's choice.

    A file's value that is the preset's is no choice, so it must not replace the schedule's (a
    printed preset fed back to a fine-tune trained at the preset's rate and warm-up). Each field
    is judged alone, so that a later file's value is not lost to an earlier one's (or to the schedule).
    """
    preset_settings = settings_of(preset)
    chosen: set[str] = set()
    choices = []
    for setting in settings:
        if setting.key in chosen or not _is_preset_value(preset, preset_settings, setting):
            chosen.add(setting.key)
            choices.append(setting)
    return choices


def _log_schedule_kept(schedule: Sequence[Setting], given: Sequence[Setting], chosen: Sequence[Setting]) -> None:
    """Say which schedule values stayed where a --config file gave the preset's value and nothing later chose."""
    ruled = {setting.key: setting for setting in schedule}
    chosen_keys = {setting.key for setting in chosen}
    kept: dict[str, list[str]] = {}  # the schedule's origin -> its values a file's preset value left in place
    files: dict[str, None] = {}
    architecture = False  # a kept model field a fine-tune cannot change
    for setting in given:
        if setting.key in ruled and setting.key not in chosen_keys and setting.value != ruled[setting.key].value:
            held = ruled[setting.key]
            value = str(held.value).lower() if isinstance(held.value, bool) else shown(held.value)  # as YAML spells it
            kept.setdefault(held.origin, []).append(f"{setting.key}={value}")
            files[setting.origin] = None
            architecture = architecture or (
                setting.key.startswith("model.") and setting.key not in _CHANGEABLE_MODEL_KEYS
            )
    if kept:
        order = list(dict.fromkeys(setting.origin for setting in schedule))  # the schedule's first, as ruled
        groups = sorted(kept.items(), key=lambda group: order.index(group[0]))
        held_by = "; ".join(f"{origin} keeps {', '.join(values)}" for origin, values in groups)
        logger.info(
            "%s: the preset's own values choose nothing, so %s (give a value with --set to change it%s)",
            ", ".join(files),
            held_by,
            f"; of the model's, a fine-tune can change {', '.join(_CHANGEABLE_MODEL_KEYS)} only"
            if architecture
            else "",
        )


def _is_preset_value(preset: ConfigType, preset_settings: list[Setting], setting: Setting) -> bool:
    """Whether ``setting`` gives its field the preset's value (one refused alone is a choice: the merge says why)."""
    try:
        config, _ = merge_settings(type(preset), [*preset_settings, setting])
    except ValueError:
        return False
    return bool(_value_at(config, setting.key) == _value_at(preset, setting.key))


def _check_options_agree_with_overrides(
    preset: ConfigType, flags: Sequence[Setting], overrides: Sequence[Setting]
) -> None:
    """Refuse an option and a --set of one key that give it different values: the later would drop the other."""
    typed = {setting.key: setting for setting in flags}
    base = settings_of(preset)
    for override in overrides:
        option = typed.get(override.key)
        if option is None:
            continue
        by_option, _ = merge_settings(type(preset), [*base, option])
        by_override, _ = merge_settings(type(preset), [*base, override])
        if _comparable(override.key, _value_at(by_option, override.key)) != _comparable(
            override.key, _value_at(by_override, override.key)
        ):
            raise ValueError(
                f"{option.origin} and --set {override.key}: expected one value, got two ({option.origin} "
                f"{shown(option.value)} and --set {override.key}={override.value})"
            )


def _comparable(key: str, value: object) -> object:
    """``value`` as what it means: a time budget as its seconds ("1h" and "60m" are one budget)."""
    if key == "train.time_budget" and isinstance(value, str) and value:
        try:
            return duration_seconds(value)
        except ValueError:  # refused with its own message once the settings are merged
            return value
    return value


def given_name(changed: Mapping[str, Setting], key: str) -> str:
    """``key`` as the user gave it, for a message: its option (``--data-dir``), the key (--set), or the file and key."""
    setting = changed.get(key)
    if setting is None or setting.text:
        return key
    return f"{setting.origin}: {key}" if setting.origin.startswith("--config") else setting.origin


# The options that give a data config's files (train and prepare alike).
_FILE_OPTIONS = {"data.train_files": "--train", "data.valid_files": "--valid"}


def files_named(changed: Mapping[str, Setting], key: str) -> str:
    """``data.train_files`` or ``data.valid_files`` named as the user works: by option or by key.

    The option (``--valid``) where those files came by one, or, for validation files not given,
    where the training files came by ``--train``; else the key, which --set and --config set.
    """
    setting = changed.get(key) or changed.get("data.train_files")
    return _FILE_OPTIONS[key] if setting is not None and setting.origin in _FILE_OPTIONS.values() else key


def data_setting_name(changed: Mapping[str, Setting]) -> Callable[[str], str]:
    """How a data config's field (``valid_files``) is named to the user: see `files_named` and `given_name`."""

    def name_of(field: str) -> str:
        key = f"data.{field}"
        return files_named(changed, key) if key in _FILE_OPTIONS else given_name(changed, key)

    return name_of


def _value_at(config: object, key: str) -> object:
    """The value of the dotted ``key`` (``"data.train_files"``) in the dataclass ``config``."""
    value = config
    for name in key.split("."):
        value = getattr(value, name)
    return value


def add_config_file_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=path_of,
        action="append",
        default=[],
        metavar="FILE.yaml",
        help="a YAML file of config values by section (model:, train:, data:, ...), applied over the preset "
        "and before --set; repeatable, each file over the ones before it; "
        "'transformer-lab config TASK' prints a preset to start from",
    )
