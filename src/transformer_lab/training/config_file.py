"""A run's configuration as a YAML file: the same keys as ``--set``, nested by section.

    # run.yaml
    model:
      d_model: 128
      num_encoder_layers: 2
    train:
      max_steps: 2000
      precision: auto
    data:
      train_files: [corpus.de, corpus.en]

``transformer-lab train translation --config run.yaml`` starts from the task's preset,
applies the file, then any ``--set`` (which wins). ``transformer-lab config translation``
prints a preset in this form to start from. The file is checked as strictly as a
checkpoint's ``config.json``: an unknown key or a value of the wrong type is one error
naming the file and the key; a file that is not YAML names its line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from transformer_lab.training.config_io import config_from_dict, config_to_dict

ConfigType = TypeVar("ConfigType")


def _merged(base: dict[str, Any], changes: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``base`` with ``changes`` laid over it, section by section (a section given as a value is refused)."""
    merged = dict(base)
    for key, value in changes.items():
        if not isinstance(key, str):
            raise ValueError(f"{where}: expected text keys, got {key!r}")
        if isinstance(value, Mapping):
            if key in merged and not isinstance(merged[key], Mapping):
                raise ValueError(f"{where}.{key}: expected a value, got a section")
            merged[key] = _merged(dict(merged.get(key) or {}), value, f"{where}.{key}")
        else:
            merged[key] = value
    return merged


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The mapping a YAML config file holds; a missing file, bad YAML or another top level is refused by name."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--config: expected an existing YAML file, got {str(path)!r}")
    try:
        content = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: expected UTF-8 text, got invalid bytes ({error.reason})") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ValueError(f"{path}: {where}expected YAML, got an error: {problem}") from None
    if content is None:
        return {}
    if not isinstance(content, Mapping):
        found = type(content).__name__
        raise ValueError(f"{path}: expected sections of keys (model:, train:, data:, ...), got {found}")
    return dict(content)


def apply_config_file(config: ConfigType, path: str | os.PathLike[str]) -> ConfigType:
    """``config`` with the YAML file's values laid over it, every key and value checked (the errors name the file)."""
    changes = read_config_file(path)
    merged = _merged(config_to_dict(config), changes, str(path))
    try:
        return config_from_dict(type(config), merged)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None


def config_to_yaml(config: Any) -> str:
    """A config as the YAML text ``--config`` reads (sections in the dataclass's field order)."""
    return yaml.safe_dump(config_to_dict(config), sort_keys=False, allow_unicode=True)
