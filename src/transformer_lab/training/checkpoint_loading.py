"""Loading a trained checkpoint, the same way for every task: config, model, vocabulary, weights.

Each task names its pieces (config type, model builder, vocabulary file and reader);
:func:`load_checkpoint_parts` does the rest with errors that name the file. The tasks'
``load`` functions are this one call, and ``tasks.registry.load_trained`` picks the
task from the checkpoint itself.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

from torch import nn

from transformer_lab.data import SubwordTokenizer
from transformer_lab.data.vocabulary import BOS_TOKEN, EOS_TOKEN, PAD_TOKEN, SpecialTokenIds
from transformer_lab.training import CONFIG_FILE, load_model_weights, load_task_config, read_extra_file
from transformer_lab.training.checkpoint import UnreadableWeightsError, build_model_for_weights, resolve_checkpoint
from transformer_lab.training.config import TaskConfig

ConfigType = TypeVar("ConfigType", bound=TaskConfig)
VocabularyType = TypeVar("VocabularyType")
ModelType = TypeVar("ModelType", bound=nn.Module)


def read_tokenizer(folder: Path, file_name: str) -> SubwordTokenizer:
    """The subword tokenizer stored as ``file_name`` in a checkpoint folder; a damaged file is an error naming it."""
    path = folder / file_name
    try:
        text = read_extra_file(folder, file_name).decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: expected UTF-8 JSON, got invalid bytes at byte {error.start}") from None
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    return SubwordTokenizer.from_json(text, where=str(path))  # its errors start with the file's name


_SPECIAL_TOKENS = {"pad_id": PAD_TOKEN, "bos_id": BOS_TOKEN, "eos_id": EOS_TOKEN}


def check_special_ids(model_config: Any, vocabulary: Any, where: str, vocabulary_file: str) -> None:
    """Refuse a model config whose ``pad_id``/``bos_id``/``eos_id`` are not the vocabulary's own special tokens.

    ``vocabulary`` is a vocabulary or tokenizer (its ids come from its own file, which is
    checked to hold the specials where they belong), a pair of them (``source`` and
    ``target``), or None for a task whose ids are the package's fixed ones. An id that
    differs would silently change every output (decoding would stop at another token).
    """
    sides = [vocabulary] if isinstance(vocabulary, SpecialTokenIds) else []
    sides += [getattr(vocabulary, side) for side in ("source", "target") if hasattr(vocabulary, side)]
    for side in sides or [SpecialTokenIds()]:
        for name, token in _SPECIAL_TOKENS.items():
            if not hasattr(model_config, name):
                continue
            given, expected = getattr(model_config, name), getattr(side, name)
            if given != expected:
                raise ValueError(
                    f"{where}: model.{name}: expected {expected}, the id of {token} in {vocabulary_file}, got {given}"
                )


def load_checkpoint_parts(
    checkpoint: str | os.PathLike[str],
    task_name: str,
    config_type: type[ConfigType],
    build_model: Callable[[ConfigType], ModelType],
    read_vocabulary: Callable[[Path], VocabularyType],
    vocabulary_sizes: Callable[[VocabularyType], dict[str, tuple[int, str]]],
    metadata_keys: Sequence[str] = (),
    fixed_specials: str = "the package's fixed special ids",
) -> tuple[ModelType, VocabularyType, ConfigType]:
    """The model (in eval mode), vocabulary and config of a checkpoint folder, or of a run folder's ``best/``.

    ``vocabulary_sizes(vocabulary)`` maps each field of ``config.model`` that a vocabulary
    sizes (``src_vocab_size``) to that size and the file it came from; a task without a
    vocabulary file maps nothing, and its special ids are checked against the package's
    (``fixed_specials`` names them in the error). A checkpoint of
    another task, a bad config value, a vocabulary of another size, or weights that do not
    fit are errors that name the file.
    """
    folder = resolve_checkpoint(checkpoint)
    config = load_task_config(folder, task_name, config_type, extra_metadata_keys=metadata_keys)
    config_path = folder / CONFIG_FILE
    vocabulary = read_vocabulary(folder)
    files = vocabulary_sizes(vocabulary)
    specials_from = str(folder / next(iter(files.values()))[1]) if files else fixed_specials
    check_special_ids(config.model, vocabulary, str(config_path), specials_from)
    for field, (size, file_name) in files.items():
        expected = getattr(config.model, field)
        if size != expected:
            raise ValueError(
                f"{config_path}: model.{field} must equal the {size} entries of {folder / file_name}, got {expected}"
            )
    try:
        # Built on the meta device and checked against the weights' header first: the
        # config's sizes are not trusted before the weights confirm them.
        model = build_model_for_weights(folder, lambda: build_model(config))
    except UnreadableWeightsError:
        raise  # it names the weights file, which is at fault (cut short, not safetensors), not config.json
    except ValueError as error:
        # The messages name the key (model.nhead); the user also needs to know which file.
        raise ValueError(f"{config_path}: {error}") from None
    load_model_weights(folder, model)
    return model.eval(), vocabulary, config
