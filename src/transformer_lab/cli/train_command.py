"""``transformer-lab train TASK --out DIR``: train a task with its preset, overridable with --set.

Also runs under ``torchrun`` (``torchrun --nproc-per-node 2 -m transformer_lab train ...``):
the Trainer trains with DistributedDataParallel and rank 0 alone prints.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TypeVar

from transformer_lab.cli.bounds import checked_text, path_of
from transformer_lab.cli.overrides import (
    add_config_file_argument,
    add_override_arguments,
    data_setting_name,
    files_named,
    given_name,
    resolved_config,
)
from transformer_lab.cli.unused_settings import check_settings_used
from transformer_lab.data.carve_error import CarveError
from transformer_lab.data.dataset_folder import DatasetMissingError
from transformer_lab.data.pair_files import check_validation_apart
from transformer_lab.data.prepared_cache import CorpusKindError, NotAPreparedFolderError
from transformer_lab.data.prepared_settings import with_prepared_settings
from transformer_lab.devices import resolve_device
from transformer_lab.folders import check_folder_output
from transformer_lab.hardware import PRECISIONS
from transformer_lab.tasks.registry import TASKS, data_option_error, task_named
from transformer_lab.tasks.task import Closing, Task
from transformer_lab.training import is_main_process, recover_interrupted_save
from transformer_lab.training.checkpoint import resolve_checkpoint
from transformer_lab.training.config_io import Setting
from transformer_lab.training.durations import budget_seconds
from transformer_lab.training.finetune import (
    FINETUNE_ORIGIN,
    checkpoint_data_settings,
    checkpoint_decoding_settings,
    checkpoint_model_settings,
    finetune_settings,
    recorded_initialization,
    with_checkpoint_model,
    with_checkpoint_vocabulary_settings,
)
from transformer_lab.training.optimization import CooldownTooLongError
from transformer_lab.training.rdrop import check_dropout_for_rdrop
from transformer_lab.training.run.run_folder import (
    check_output_outside_saves,
    check_writable,
    explain_missing_last,
    prepare_new_run,
)
from transformer_lab.training.run.run_lock import RunFolderLock
from transformer_lab.training.run.same_run import check_same_run
from transformer_lab.training.run_summary import summary_lines
from transformer_lab.training.trainer import LAST_FOLDER

ConfigType = TypeVar("ConfigType")

logger = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("train", help=f"train a task: {', '.join(TASKS)}")
    parser.add_argument("task", choices=tuple(TASKS), help="which task to train")
    parser.add_argument("--out", type=path_of, required=True, help="run folder for checkpoints and metrics.jsonl")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    parser.add_argument(
        "--data-dir",
        default=None,
        help=(
            "folder holding the dataset (default: $TRANSFORMER_LAB_DATA, else the folder that "
            "`transformer-lab download` fills); real-data tasks only"
        ),
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=None,
        help=(
            "shorthand for --set train.precision=...: fp32, bf16 (autocast) "
            "or auto (bf16 where this machine runs it fast)"
        ),
    )
    parser.add_argument(
        "--time-budget",
        type=checked_text(budget_seconds),
        default=None,
        metavar="DURATION",
        help="train as well as fits in this wall-clock time (90m, 1h30m, 5400s): measure the speed, then fix "
        "the steps, warm-up and cool-down; = --set train.time_budget=...",
    )
    parser.add_argument(
        "--tensorboard",
        action="store_true",
        default=None,  # not given: no setting, so the preset's or --set's value stands
        help="also write the metrics as TensorBoard event files in OUT/tensorboard (the tensorboard extra); "
        "= --set train.tensorboard=true",
    )
    parser.add_argument(
        "--train",
        nargs="+",
        default=None,
        metavar="FILE",
        help="your own training data: SOURCE TARGET line files or one .tsv/.jsonl file (translation, couplet), "
        "or one .csv/.tsv/.jsonl file (classification); = --set data.train_files=...",
    )
    parser.add_argument(
        "--valid",
        nargs="+",
        default=None,
        metavar="FILE",
        help="your own validation data, in the forms of --train (default: carved from --train)",
    )
    parser.add_argument(
        "--preset",
        default=None,
        help="the preset to start from (default: 'default', every task's; translation also has 'base', the "
        "paper's base model, for a large corpus on GPUs); --set overrides it",
    )
    parser.add_argument(
        "--prepared",
        default=None,
        metavar="DIR",
        help=(
            "translation, couplet, classification: a folder written by 'transformer-lab prepare' to train from; "
            "= --set data.prepared_dir=..."
        ),
    )
    parser.add_argument(
        "--source-language", default=None, help="translation: the source language code (JSON key, BLEU)"
    )
    parser.add_argument(
        "--target-language", default=None, help="translation: the target language code (JSON key, BLEU)"
    )
    parser.add_argument(
        "--init-from",
        type=path_of,
        default=None,
        metavar="CHECKPOINT",
        help="fine-tune: start from this checkpoint's weights, tokenizer and model config, with a fresh optimizer "
        "and the fine-tuning schedule (docs: README 'Your own data')",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the final summary as one JSON object, unrounded (for scripts), instead of readable lines",
    )
    parser.add_argument(
        "--no-progress",
        dest="progress_bar",
        action="store_const",
        const=False,
        default=None,
        help="no progress bar (for logs sent to files), as prepare's; = --set train.progress_bar=false",
    )
    add_config_file_argument(parser)
    add_override_arguments(parser)
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    out_dir: Path = arguments.out
    if arguments.init_from is not None and arguments.resume:
        raise ValueError(
            "--init-from and --resume: expected one of them (a new run from a checkpoint, or the same run "
            "continued), got both"
        )
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"--out: expected a folder, got {out_dir}, which is a file")
    check_folder_output(out_dir, "--out")  # a link, a file in the way or "new/..", before any folder is made
    check_output_outside_saves("--out", out_dir)  # else another run's next save or pruning deletes this one
    # The training process (rank 0 under torchrun) holds the folder for the whole run.
    holds_folder = is_main_process() and (out_dir.is_dir() or not arguments.resume)
    with RunFolderLock(out_dir) if holds_folder else contextlib.nullcontext():
        return _run_in_folder(arguments, out_dir)


def _run_in_folder(arguments: argparse.Namespace, out_dir: Path) -> int:
    if arguments.resume:
        # A crash between a save's two renames leaves the complete old last/ aside.
        recover_interrupted_save(out_dir / LAST_FOLDER)
        if not (out_dir / LAST_FOLDER).is_dir():
            raise FileNotFoundError(explain_missing_last(out_dir, init_from=task_named(arguments.task).reads_data))
        check_writable(out_dir)
    elif is_main_process():
        # Refuses a folder holding a run; keeps aside the log of one killed before its first save.
        prepare_new_run(out_dir, init_from=task_named(arguments.task).reads_data)
    return _train(task_named(arguments.task), arguments, out_dir)


def _train(task: Task, arguments: argparse.Namespace, out_dir: Path) -> int:
    """Train ``task`` with the config its sources make (see resolved_config); then print its summary."""
    if not task.reads_data:
        data_options = ("data_dir", "train", "valid", "prepared", "source_language", "target_language")
        for option in (*data_options, "init_from"):
            if getattr(arguments, option) is not None:
                raise data_option_error(f"--{option.replace('_', '-')}", task.name)
    init_from = None if arguments.init_from is None else resolve_checkpoint(arguments.init_from, "--init-from")
    # A fine-tuned run resumes as it started, minus --init-from: the fine-tuning schedule, and
    # the model and tokenizer settings, which its own last/ holds as the checkpoint gave them.
    resumed_finetune = arguments.resume and recorded_initialization(out_dir / LAST_FOLDER, task.checkpoint_task)
    model_source = out_dir / LAST_FOLDER if resumed_finetune else init_from
    # The preset, the fine-tuning schedule, --config, the options, --set: the nearer the command, the stronger.
    flags = option_settings(arguments, {**(DATA_OPTIONS if task.reads_data else {}), **TRAIN_OPTIONS})
    preset = task.config(arguments.preset)
    schedule = (
        []
        if model_source is None
        else [
            *finetune_settings(),
            *checkpoint_data_settings(model_source, task.layout_settings),
            *checkpoint_decoding_settings(model_source, preset),
        ]
    )
    replaced = [] if model_source is None else checkpoint_model_settings(model_source)
    config, changed = resolved_config(preset, arguments, schedule=schedule, flags=flags, replaced=replaced)
    config = with_schedule_as_given(config, changed)
    check_data_settings(config, changed)
    _check_search_settings_used(config, changed)
    if config.train.time_budget is not None and config.train.epochs and "train.epochs" in changed:
        # The budget fixes the length; the epochs stay the configured run whose cool-down it fits.
        logger.info(
            "%s train.epochs=%d with a time budget: the budget sets the run's length; the epochs set only the "
            "configured run whose cool-down the plan scales; to cap the run, give train.max_steps",
            changed["train.epochs"].origin,
            config.train.epochs,
        )
    # A prepared folder fixes the data settings it was made with: config.json records those, not the preset's.
    prepared_named = given_name(changed, "data.prepared_dir")  # as given: --prepared, --set or --config
    try:
        config = with_prepared_settings(task.corpus_kind, config, changed)
    except (NotAPreparedFolderError, CorpusKindError) as error:
        raise error.for_option(prepared_named) from None
    if model_source is not None:
        config = with_checkpoint_model(config, model_source, task.checkpoint_task, changed)
        if init_from is not None:  # a fine-tune's ids must be its checkpoint's (prepare TASK --init-from)
            task.check_prepared_vocabulary(config.data, init_from, prepared_named)
        # Its tokenizer is kept: config.json records the settings it was made with, not the preset's.
        settings = task.vocabulary.settings if task.vocabulary is not None else ()
        config = with_checkpoint_vocabulary_settings(config, model_source, settings, changed)
    if arguments.resume:
        check_same_run(out_dir / LAST_FOLDER, task.checkpoint_task, config)
    # Here, before the corpus is read and its vocabulary trained; the run checks them again for the API.
    resolve_device(config.train.device, name="train.device")
    check_dropout_for_rdrop(config.train.rdrop_alpha, config.model.dropout, given_name(changed, "train.rdrop_alpha"))
    try:
        with data_errors_named(changed):
            result = task.train(config, out_dir, resume=arguments.resume, init_from=init_from)
    except CooldownTooLongError as error:
        raise unscaled_cooldown_error(error, changed) from None
    except (NotAPreparedFolderError, CorpusKindError) as error:
        raise error.for_option(prepared_named) from None
    closing = task.closing(result, config) if task.closing is not None else Closing([], {})
    if not is_main_process():
        return 0  # under torchrun rank 0 reports (the weights are the same on every rank)
    if arguments.json:  # one object: the closing facts join the summary
        print(json.dumps({**result.summary, **closing.facts}, default=str))
        return 0
    for line in [*summary_lines(result.summary), *closing.lines]:
        print(line)
    return 0


def check_data_settings(config: object, changed: Mapping[str, Setting]) -> None:
    """Refuse validation files that are training files, and data settings the run would not read, named as given."""
    data = getattr(config, "data", None)
    check_validation_apart(data, files_named(changed, "data.train_files"), files_named(changed, "data.valid_files"))
    check_settings_used(data, changed)


@contextlib.contextmanager
def data_errors_named(changed: Mapping[str, Setting]) -> Iterator[None]:
    """A missing data folder and a refused validation carve, named as given: an option, --set or --config."""
    try:
        yield
    except DatasetMissingError as error:
        raise error.named(given_name(changed, "data.data_dir")) from None
    except CarveError as error:  # the validation files named as the training files were given: --valid or the key
        raise ValueError(error.phrased(data_setting_name(changed))) from None


def _given_by_user(changed: Mapping[str, Setting], key: str) -> Setting | None:
    """The setting of ``key`` the user gave (any channel), None where none or the fine-tuning schedule's."""
    setting = changed.get(key)
    return None if setting is None or setting.origin == FINETUNE_ORIGIN else setting


def with_schedule_as_given(config: ConfigType, changed: Mapping[str, Setting]) -> ConfigType:
    """``config`` with ``train.fit_schedule_to_run`` off where the user set a warm-up or cool-down (not the flag).

    A preset's schedule is scaled to a run too short for it; one the user chose is taken as
    given, and a cool-down longer than the run is then an error naming it.
    """
    given = any(_given_by_user(changed, key) for key in ("train.warmup_steps", "train.cooldown_steps"))
    train = getattr(config, "train", None)
    if not given or "train.fit_schedule_to_run" in changed or not getattr(train, "fit_schedule_to_run", False):
        return config
    return dataclasses.replace(config, train=dataclasses.replace(train, fit_schedule_to_run=False))  # type: ignore[type-var]


def unscaled_cooldown_error(error: CooldownTooLongError, changed: Mapping[str, Setting]) -> ValueError:
    """``error``, saying why where the cool-down is the preset's, left unscaled because the user gave the warm-up.

    Else the message names a setting the user never gave and asks to lower it, without saying
    why the preset's value, scaled on a run without the warm-up, is not scaled here.
    """
    warmup = _given_by_user(changed, "train.warmup_steps")
    if "train.cooldown_steps" in changed or warmup is None:
        return error
    return ValueError(
        f"train.cooldown_steps: expected at most the run's {error.run_steps} optimizer steps, got the preset's "
        f"{error.cooldown_steps}, not scaled to the run since train.warmup_steps was given ({warmup.origin}): "
        "set train.cooldown_steps too (0 for no cool-down)"
    )


# The options that stand for a config field, by their argparse names.
DATA_OPTIONS = {
    "data_dir": "data.data_dir",
    "train": "data.train_files",
    "valid": "data.valid_files",
    "prepared": "data.prepared_dir",
    "source_language": "data.source_language",
    "target_language": "data.target_language",
}
TRAIN_OPTIONS = {
    "precision": "train.precision",
    "time_budget": "train.time_budget",
    "tensorboard": "train.tensorboard",
    "progress_bar": "train.progress_bar",
}


def option_settings(arguments: argparse.Namespace, fields: Mapping[str, str]) -> list[Setting]:
    """The options given (not None) as settings of the fields they stand for, named by their flags."""
    given = {option: getattr(arguments, option) for option in fields}
    return [
        Setting(fields[option], value, "--" + option.replace("_", "-"))
        for option, value in given.items()
        if value is not None
    ]


# The decode settings that steer beam search only: given with a greedy search, recorded and never used.
_BEAM_ONLY_SETTINGS = ("decode.beam_size", "decode.length_penalty", "decode.beam_stop", "decode.num_return")


def _check_search_settings_used(config: object, changed: Mapping[str, Setting]) -> None:
    """Refuse a beam-search setting given beside a greedy search, as the commands and the server refuse one."""
    decode = getattr(config, "decode", None)
    if decode is None or decode.strategy != "greedy":
        return
    for key in _BEAM_ONLY_SETTINGS:
        given = _given_by_user(changed, key)
        # A fine-tune's checkpoint brings its own search, whatever it holds: no choice of the user's.
        if given is not None and not given.origin.startswith("--init-from"):
            raise given.error(
                f"{key}: expected it only with decode.strategy beam, which it steers, got a greedy search "
                "(set decode.strategy=beam, or leave it out)"
            )
