"""A run from a prepared folder takes the data settings the folder fixes from the folder, never from the preset.

The folder's manifest describes what its corpus was made with (the files, the split, the
BPE or the vocabulary). A setting of those that the run gives with another value would be
recorded in its checkpoints but not used, so it is refused, naming the key; one left to
the preset is replaced by the corpus's value, so that ``config.json`` says what was trained on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, TypeVar

from transformer_lab.data.prepared_cache import (
    CorpusKindError,
    NotAPreparedFolderError,
    check_prepared_settings,
    corpus_data_config,
    fixed_settings_of,
)
from transformer_lab.data.prepared_couplets import COUPLETS_KIND, couplet_settings, read_couplets_manifest
from transformer_lab.data.prepared_labelled import LABELLED_KIND, labelled_settings, read_labelled_manifest
from transformer_lab.data.prepared_pairs import PAIRS_KIND, pair_settings, read_pairs_manifest

ConfigType = TypeVar("ConfigType")

_READERS: dict[str, tuple[Callable[[Path], dict[str, Any]], Callable[[dict[str, Any]], dict[str, Any]]]] = {
    PAIRS_KIND: (read_pairs_manifest, pair_settings),
    COUPLETS_KIND: (read_couplets_manifest, couplet_settings),
    LABELLED_KIND: (read_labelled_manifest, labelled_settings),
}


def with_prepared_settings(kind: str | None, config: ConfigType, changed: Collection[str]) -> ConfigType:
    """``config`` whose data settings that its prepared folder (``data.prepared_dir``) fixes are the corpus's own.

    ``changed``: the dotted keys that a source other than the preset set (``merge_settings``
    returns them); one that the corpus fixes, set to another value, is a ValueError naming
    the key, the corpus's value and the one given. ``kind`` is the corpus kind the run
    trains from (a task's ``corpus_kind``); ``config`` as it is for None, or without
    ``data.prepared_dir``.
    """
    data: Any = getattr(config, "data", None)
    if kind is None or not getattr(data, "prepared_dir", ""):
        return config
    read_manifest, settings = _READERS[kind]
    folder = Path(data.prepared_dir)
    try:
        manifest = read_manifest(folder)
    except (CorpusKindError, NotAPreparedFolderError) as error:  # the CLI names it as given
        raise error.for_option("data.prepared_dir") from None
    for field_name in ("tokenizer_file", "target_tokenizer_file"):
        # The manifest records that a tokenizer was given, not which file: any file named now is refused.
        tokenizer_file = getattr(data, field_name, None)
        if f"data.{field_name}" in changed and tokenizer_file:
            raise ValueError(
                f"data.{field_name}: expected none with the prepared corpus {folder} (its ids were made with its "
                f"own tokenizer), got {tokenizer_file!r}"
            )
    fixed = fixed_settings_of(folder, manifest, settings)
    check_prepared_settings(folder, fixed, data, lambda name: f"data.{name}" in changed)
    return dataclasses.replace(config, data=corpus_data_config(data, fixed))  # type: ignore[type-var]
