"""The evaluation seam: what a task's ``evaluate`` is asked, and the report it gives back.

The ``evaluate`` command turns its command line into `EvaluationOptions`, prints the report's
lines and records its scores, so that it never asks which task it runs (README.md, "Adding a task").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch
from torch import nn

from transformer_lab.atomic_files import check_not_an_input, write_text_atomically
from transformer_lab.decoding import DecodeConfig, decoding_model
from transformer_lab.decoding.beam import BEAM_STOPS
from transformer_lab.decoding.search_settings import (
    SearchKeywords,
    check_no_beam_settings,
    resolved_search,
    search_name,
)
from transformer_lab.devices import resolve_device
from transformer_lab.folders import check_file_output
from transformer_lab.hardware import INFERENCE_PRECISIONS
from transformer_lab.training.checkpoint import checkpoint_files, weights_version
from transformer_lab.training.model_card import STREAM_TEST_NAME
from transformer_lab.training.run.run_folder import run_log
from transformer_lab.training.run.same_run import held_out_change
from transformer_lab.word_lists import in_words

logger = logging.getLogger(__name__)

ModelType = TypeVar("ModelType", bound=nn.Module)


@dataclass(frozen=True)
class TaskOption:
    """One option of a command that some tasks read: the task declares it, the command line offers it.

    ``flag`` is its spelling (``--source``), ``help`` what it does; ``kind`` the type of
    its value (``str``, ``int``, ``float``, ``Path``), or ``bool`` for a switch that is
    True when given; ``bounds`` (low, high) the range an ``int`` must be in (None: any);
    ``choices`` the values it takes (None: any), ``metavar`` the name of its value in the
    help; ``repeatable``: given several times, its values form a list.
    A task reads it back from `EvaluationOptions.option` (or its own command's values)
    by ``flag``.
    """

    flag: str
    help: str
    kind: type = str
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    repeatable: bool = False
    bounds: tuple[int, int] | None = None


# The search settings, read by the tasks that decode (each declares them among its options).
BEAM = TaskOption("--beam", "beam size (1 = greedy; default: the checkpoint's)", int)
LENGTH_PENALTY = TaskOption(
    "--length-penalty", "beam search's GNMT length penalty alpha (0 = none; default: the checkpoint's)", float
)
BEAM_STOP = TaskOption(
    "--beam-stop",
    "when beam search stops a sentence: exact (once its best can no longer change) or finished "
    "(once beam-size hypotheses have ended, as fairseq and CTranslate2 do: fewer steps) "
    "(default: the checkpoint's)",
    choices=BEAM_STOPS,
)
SEARCH_OPTIONS = (BEAM, LENGTH_PENALTY, BEAM_STOP)
# int8 is not an autocast precision but a converted copy of the model (models.quantization).
DECODE_PRECISION = TaskOption(
    "--precision",
    "bf16: decode with a bf16 copy of the model, faster from about 8 rows (batch x beam) on CPUs with "
    "bf16 instructions; auto: bf16 where this machine runs it fast, else fp32; int8: the feed-forward and "
    "output layers in int8 (PyTorch dynamic quantization, CPU) (default: the checkpoint's; the presets say auto)",
    choices=INFERENCE_PRECISIONS,
)
# The options of a command that decodes with a checkpoint's search.
DECODE_OPTIONS = (BEAM, DECODE_PRECISION, LENGTH_PENALTY, BEAM_STOP)


def search_keywords(options: Mapping[str, Any]) -> SearchKeywords:
    """The search options among ``options`` (flag -> value, ``DECODE_OPTIONS``) as the predictors' keywords.

    An option not given is None: the checkpoint's setting.
    """
    return {
        "beam": options.get(BEAM.flag),
        "precision": options.get(DECODE_PRECISION.flag),
        "length_penalty": options.get(LENGTH_PENALTY.flag),
        "beam_stop": options.get(BEAM_STOP.flag),
    }


@dataclass(frozen=True)
class EvaluationOptions:
    """What an evaluation was asked besides the checkpoint and the split; None (or absent) keeps the default.

    ``data_dir``, ``output``, ``precision`` and ``device`` (where the model runs: "auto",
    "cpu", "cuda", "cuda:N" or a ``torch.device``) apply to every task. ``task_options``
    holds the options that only some tasks read (each task declares them,
    ``Task.evaluation_options``: the search's, ``SEARCH_OPTIONS``, and its own) by their
    flag (``{"--source": Path("test.de")}``), only those given.
    """

    data_dir: str | None = None
    output: Path | None = None
    precision: str | None = None
    task_options: Mapping[str, Any] = field(default_factory=dict)
    device: str | torch.device = "cpu"
    # The checkpoint folder scored and the version of its weights file as the evaluation began
    # (``training.checkpoint.weights_version``); set by ``registry.evaluate``, read by :meth:`write_output`.
    scored_weights: tuple[Path, dict[str, int] | None] | None = None

    def option(self, flag: str) -> Any:
        """The value of the task option ``flag`` (None where it was not given)."""
        return self.task_options.get(flag)

    def data_folder(self, default: str | None) -> str | None:
        """``data_dir`` if given, else ``default`` (the checkpoint's data folder)."""
        return self.data_dir if self.data_dir is not None else default

    def output_file(self, default: Path, read: Mapping[str, object] = {}) -> Path:
        """Where the task's output goes: ``output`` (its missing folders made, as the predict commands make
        theirs), else ``default`` beside the checkpoint. Called once the split is read, before the work, so
        that a refused output costs nothing.

        ``read`` names the files the evaluation read (its split's, by what they are); an ``output``
        that is one of them is refused, as the write would replace what the next evaluation scores against.
        """
        if self.output is None:
            # Beside the checkpoint, where no option put it: a folder the system will not write (a read-only
            # mount, an installed model) is said before the split is decoded, with the option that moves it.
            check_file_output(default, None, advice="; --output names a file elsewhere")
            return default
        # Then the files of another checkpoint where it points (a step of the same run), or a run's log.
        other = checkpoint_files(self.output.parent).values()
        elsewhere = {f"the {path.parent.name} checkpoint's {path.name}": path for path in other}
        check_not_an_input("--output", self.output, {**read, **elsewhere, **run_log(self.output.parent)})
        check_file_output(self.output, "--output")  # a path the system refuses, before the work
        self.output.parent.mkdir(parents=True, exist_ok=True)
        return self.output

    def write_output(self, path: Path, text: str) -> str:
        """Write ``text`` to ``path`` whole; returns what the report says of it: the path, or why it was not written.

        An output in the checkpoint's folder (by default, or given) is written only while the folder holds the
        weights scored: a run saving into it (best/, last/, a step folder it prunes) may have replaced or
        removed it while the split was decoded, and the file would then describe other weights.
        """
        if self.scored_weights is not None:
            folder, version = self.scored_weights
            if path.parent == folder and weights_version(folder) != version:
                return (
                    f"not written ({folder} was replaced by other weights, or removed, while this evaluation ran; "
                    "--output names a file elsewhere)"
                )
        write_text_atomically(path, text, name="--output" if path == self.output else None)
        return str(path)

    def placed(self, model: ModelType) -> ModelType:
        """``model`` moved to :attr:`device` (a device this machine lacks is a ValueError naming ``device``)."""
        return model.to(resolve_device(self.device))


@dataclass
class ConfusionFigure:
    """A confusion matrix to draw as a PNG at ``path`` (rows: true class, columns: predicted class)."""

    path: Path
    matrix: list[list[int]]
    class_names: list[str]
    title: str


@dataclass
class EvaluationReport:
    """What one evaluation did: the lines to print, the files it wrote, and the scores for the model card.

    ``checkpoint`` is the checkpoint folder scored (a run folder resolved to its best);
    ``name`` is what the scores are recorded under (the split, or ``file_test_name`` of a file);
    ``search`` how the outputs were produced ("greedy", "beam 4 bf16", "argmax").
    ``confusion``: a figure the command draws (the figure modules sit above the tasks).
    ``dataset``: the name of the user's file scored, where it is no split of the checkpoint's dataset.
    ``unrecorded``: why the scores stay off the checkpoint's card (an ensemble's are not its own; a pipe
    names no test set); None records them.
    ``replaced``: whether the checkpoint's weights were replaced or removed while it was evaluated (set by
    ``registry.evaluate``): its card and the figures beside it then describe other weights.
    """

    lines: list[str]
    files: dict[str, Path]
    checkpoint: Path
    name: str
    search: str
    scores: dict[str, float]
    confusion: ConfusionFigure | None = None
    dataset: str | None = None
    unrecorded: str | None = None
    replaced: bool = False


class EvaluateFunction(Protocol):
    """``evaluate(checkpoint, split, options)``: score a checkpoint (split None: the task's default)."""

    def __call__(self, checkpoint: Path, split: str | None, options: EvaluationOptions) -> EvaluationReport: ...


@dataclass
class Search:
    """How a sequence-to-sequence evaluation decodes: the checkpoint's decoding with the options' changes.

    ``own`` is the checkpoint's decoding: a beam search's length penalty or stop other than its own is
    named, so that its hypotheses and card row sit beside the default search's, not over them.
    """

    decode_config: DecodeConfig
    own: DecodeConfig | None = None

    @property
    def name(self) -> str:
        """The search's name in the report and the model card ("greedy", "beam 4 bf16", "beam 4 bf16 alpha 2")."""
        name = search_name(self.decode_config, self.decode_config.precision)
        decode, own = self.decode_config, self.own
        if own is None or decode.strategy != "beam":
            return name
        if decode.length_penalty != own.length_penalty:
            name += f" alpha {decode.length_penalty:g}"
        return name + (f" {decode.beam_stop}" if decode.beam_stop != own.beam_stop else "")

    @property
    def file_label(self) -> str:
        """The name as output files carry it ("beam4bf16")."""
        return self.name.replace(" ", "")


def search_for(model: ModelType, decode_config: DecodeConfig, options: EvaluationOptions) -> tuple[ModelType, Search]:
    """The model to decode with (on the options' device; a bf16 or int8 copy where the precision asks) and the
    checkpoint's ``decode_config`` with the options' search and precision."""
    model = options.placed(model)
    own = decode_config
    decode_config = resolved_search(
        decode_config,
        next(model.parameters()).device,
        beam=options.option(BEAM.flag),
        length_penalty=options.option(LENGTH_PENALTY.flag),
        beam_stop=options.option(BEAM_STOP.flag),
        precision=options.precision,
        precision_name="--precision",
    )
    check_no_beam_settings(
        decode_config.strategy == "greedy",
        options.option(BEAM.flag),
        options.option(LENGTH_PENALTY.flag),
        options.option(BEAM_STOP.flag),
    )
    return decoding_model(model, decode_config.precision), Search(decode_config, own)


# What an output must not replace: the files a run trained and validated on (its next --resume reads them).
TRAINED_ON = "the model's training or validation file"


def trained_files(data: object, *built_in: Callable[[], Sequence[Path]]) -> list[Path]:
    """The files a run of ``data`` (a task's data config) read: its own files, else each of ``built_in``'s.

    A built-in corpus that is no longer where the run found it has no files to protect.
    """
    own = [Path(path) for name in ("train_files", "valid_files") for path in getattr(data, name, ())]
    if own:
        return own
    found: list[Path] = []
    for files in built_in:
        try:
            found += files()
        except (OSError, ValueError):
            continue
    return found


def warn_if_seen(option: str, scored: Sequence[str | Path], seen: Sequence[Path]) -> None:
    """Say so where a file ``option`` scores is one the run trained or validated on: a score, not a test."""
    seen_paths = {Path(path).resolve() for path in seen}
    for scored_path in scored:
        if Path(scored_path).resolve() in seen_paths:
            logger.warning(
                "%s %s is a file the model trained or validated on: its score says how well the model fits data it "
                "has seen, not how it does on new text",
                option,
                scored_path,
            )
            return


def check_held_out_unchanged(checkpoint: Path, files: Sequence[Path], instead: str) -> None:
    """Refuse to score ``--split validation`` on data other than the run held its validation out of.

    ``files`` are those the rows are read again from; ``instead`` the option a message offers.
    """
    change = held_out_change(checkpoint, files)
    if change is not None:
        # Carved again from edited files, or read from a folder prepared again, they are other rows,
        # scored and carded as the run's validation.
        raise ValueError(
            f"--split validation: expected the data the run held its validation out of, got other data: {change}; "
            f"restore it, or score other data with {instead}"
        )


def unread_option_error(flag: str, task: str, readers: Sequence[str]) -> ValueError:
    """The one-line error for ``flag`` given to ``task``, which does not read it, naming the tasks that do."""
    if not readers:
        return ValueError(f"{flag}: expected with no task's evaluation, got it with {task}")
    names = in_words(readers, "and")
    tasks = "task" if len(readers) == 1 else "tasks"
    return ValueError(f"{flag}: expected only with the {names} {tasks}, got it with {task}")


def stream_unrecorded(name: str, given: object) -> str | None:
    """Why scores under ``name`` stay off the card: ``given`` (the option's path) is a pipe or a device."""
    if name != STREAM_TEST_NAME:
        return None
    return f"{given} is a pipe or a device, which names no test set to record them under"
