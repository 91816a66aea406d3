"""Data settings that the user's own files leave unused, refused by name before a run or a preparation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from transformer_lab.cli.overrides import files_named
from transformer_lab.training.config_io import Setting, shown


def check_settings_used(data: Any, changed: Mapping[str, Setting]) -> None:
    """Refuse a data setting given (``changed``, by dotted key) that the config's own files leave unused.

    A data config lists them by the files that leave them so: ``UNUSED_WITH_TRAIN_FILES``
    (where the task's own dataset is found, its split), ``UNUSED_WITH_VALID_FILES`` (how
    validation is carved out of the training data), ``UNUSED_WITH_TOKENIZER_FILE`` (how the
    BPE is learned); and ``UNUSED_WITHOUT_TRAIN_FILES`` the other way round: how the user's
    files are read, unused where the task's own dataset is (no train files, no prepared
    folder). Given anyway, the run would ignore them and its ``config.json`` record them as if
    they had been used.
    """
    if not getattr(data, "train_files", None) and not getattr(data, "prepared_dir", None):
        for name, purpose in getattr(type(data), "UNUSED_WITHOUT_TRAIN_FILES", {}).items():
            setting = changed.get(f"data.{name}")
            if setting is not None:
                raise ValueError(
                    f"data.{name}: expected it only with --train ({purpose}; the task's own dataset is read as it "
                    f"is), got {_given(data, name, setting)} without training files"
                )
    unused = (  # the files named as given: --train, or the key by --set or --config
        ("train_files", files_named(changed, "data.train_files"), "UNUSED_WITH_TRAIN_FILES"),
        ("valid_files", files_named(changed, "data.valid_files"), "UNUSED_WITH_VALID_FILES"),
        ("tokenizer_file", "data.tokenizer_file", "UNUSED_WITH_TOKENIZER_FILE"),
    )
    for field_name, option, listed in unused:
        if not getattr(data, field_name, None):
            continue
        for name, purpose in getattr(type(data), listed, {}).items():
            setting = changed.get(f"data.{name}")
            if setting is None:
                continue
            raise ValueError(
                f"data.{name}: expected it only without {option} ({purpose}, unused with {option}), "
                f"got {_given(data, name, setting)}"
            )


def _given(data: Any, name: str, setting: Setting) -> str:
    """How data setting ``name`` was given: "--option VALUE", or "VALUE (--set)" / "VALUE (--config FILE)"."""
    if setting.origin == "--set" or setting.origin.startswith("--config"):
        return f"{shown(getattr(data, name))} ({setting.origin})"
    return f"{setting.origin} {shown(getattr(data, name))}"
