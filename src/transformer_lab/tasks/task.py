"""The contract every task offers the commands: its presets, how it trains, loads, prepares, scores, predicts, serves.

The commands read the tasks from ``tasks/registry.py``, never a list of their own: a new
task is its package (whose ``__init__`` assembles its `Task`) and its tests.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import torch
from torch import nn

from transformer_lab.data.prepared_cache import CorpusKind
from transformer_lab.devices import load_on
from transformer_lab.tasks.command import PredictCommand
from transformer_lab.tasks.evaluation import EvaluateFunction, TaskOption
from transformer_lab.word_lists import in_words

# What a trained task offers beyond training and loading.
SURFACES = ("onnx", "ctranslate2", "serve", "lab")
# The surfaces that write a task's vocabulary beside its model.
EXPORT_SURFACES = ("onnx", "ctranslate2")

VocabularyType = TypeVar("VocabularyType")


@dataclass(frozen=True)
class VocabularyFunctions(Generic[VocabularyType]):
    """How a task's vocabulary lives in its checkpoints, whatever its kind (tokenizers, characters, ...).

    ``read(folder)`` reads a checkpoint folder's vocabulary (an error names the file);
    ``files(vocabulary)`` gives the files that hold it, name -> text, as a checkpoint and
    an export store them; ``tokens(vocabulary)`` the token string of every id, source side
    then target side (the same strings twice for one vocabulary). ``settings``: the data
    config fields the vocabulary was made with; a run that keeps a checkpoint's vocabulary
    (``--init-from``) takes them from that checkpoint's ``config.json``.
    """

    read: Callable[[Path], VocabularyType]
    files: Callable[[VocabularyType], dict[str, str]]
    tokens: Callable[[VocabularyType], tuple[Sequence[str], Sequence[str]]]
    settings: tuple[str, ...] = ()


# A request field's metadata key: the field may be given only where earlier fields have these
# values, as {"strategy": "beam"}; elsewhere it would be ignored, so a request giving it is refused.
ONLY_WHEN = "only_when"


@dataclass(frozen=True)
class Endpoint:
    """One POST endpoint of a served task: its ``path``, its body and the handler method that answers it.

    ``request`` is a dataclass of the body's fields (the server adds ``model``); a ``str`` is a text
    the server bounds, and a field's metadata holds pydantic ``Field`` bounds (``ge``, ``max_length``, ...)
    and, under `ONLY_WHEN`, the values of earlier fields it may be given with (else a 422 names it).
    ``method(handler, request)`` returns the answer's JSON object.
    """

    path: str
    request: type
    method: Callable[[Any, Any], dict[str, Any]]


@dataclass(frozen=True)
class Serving:
    """How ``transformer-lab serve`` offers a task: ``handler(predictor)`` wraps the task's API object.

    A handler has ``describe()`` (what the page shows of the model), optionally ``tokenize(text)``
    (the masks view's tokens) and the methods its ``endpoints`` call; it loads nothing of its own.
    """

    handler: Callable[[Any], Any]
    endpoints: tuple[Endpoint, ...]


class TrainResult(Protocol):
    """What a finished run returns: at least its summary (the command prints it as JSON)."""

    summary: dict[str, Any]


class TrainFunction(Protocol):
    """``train(config, out_dir, *, resume, init_from)``: one whole training run."""

    def __call__(
        self,
        config: Any,
        out_dir: str | os.PathLike[str],
        *,
        resume: bool = False,
        init_from: str | os.PathLike[str] | None = None,
    ) -> TrainResult: ...


@dataclass(frozen=True)
class Closing:
    """What ``train`` says after a run's summary: ``lines`` for a person, ``facts`` (JSON values) under ``--json``."""

    lines: Sequence[str]
    facts: Mapping[str, Any]


@dataclass(frozen=True)
class Task:
    """One task behind the one seam.

    ``name`` is the task's command-line name; ``checkpoint_task`` the ``task`` field its
    checkpoints carry in ``config.json`` (tasks that share a model, as the synthetic ones
    do, share it). ``presets`` maps a preset name to a fresh config, the first being the
    default. ``train(config, out_dir, *, resume, init_from)`` runs a whole training run
    and ``closing(result, config)`` what follows its summary (:class:`Closing`);
    ``load(checkpoint)`` rebuilds (model in eval mode, vocabulary or None, config) from a
    checkpoint or run folder. ``reads_data``: the data options (``--data-dir``,
    ``--train``, ``--valid``, ``--prepared``) apply. ``corpus(data config, progress, checkpoint)``
    is the task's prepared corpus of that data, which `prepare` writes (None: the task has no
    corpus to prepare), its ids made with the vocabulary of ``checkpoint`` (a checkpoint
    folder, ``--init-from``) or, for None, with one built from the data; of ``corpus_kind``
    (the manifest's kind, ``data.prepared_*``; it must name it with ``corpus``), which
    ``--prepared`` and ``prepare --verify`` expect.
    ``evaluate(checkpoint, split, options)`` scores a checkpoint and returns its report
    (``tasks/evaluation.py``; None: ``evaluate`` does not score this task);
    ``evaluation_split`` is its default split, ``evaluation_splits`` all it knows by name, and
    ``evaluation_options`` the options of ``evaluate`` it reads beyond those every task reads,
    which the command offers (an option of another task is refused, naming the tasks that read it). ``surfaces`` names
    what else it offers (see SURFACES); ``dataset`` is the ``download`` name of its
    preset's data. ``vocabulary`` reads, writes and lists its checkpoints' vocabulary
    (None: they hold none, as the synthetic tasks'); a task offering an export surface
    must name it. ``layout_settings``: the data fields saying how its training files are laid out
    (a translator's languages, a classifier's columns), which a fine-tune (``--init-from``, also
    of ``prepare``) takes from its checkpoint unless given. ``predictor(model, vocabulary, config,
    device)`` builds the task's Python API object from what ``load`` rebuilds (see
    `predictor_for`), and ``serving`` how the server offers it; a task offering "serve" must name
    both. ``command``: the task's own command answering lines with that object
    (``tasks/command.py``); it needs a predictor.
    """

    name: str
    presets: Mapping[str, Callable[[], Any]]
    train: TrainFunction
    load: Callable[[str | os.PathLike[str]], tuple[nn.Module, Any, Any]]
    checkpoint_task: str = ""
    reads_data: bool = True
    corpus: Callable[[Any, bool, Path | None], CorpusKind[Any]] | None = None
    corpus_kind: str | None = None
    evaluate: EvaluateFunction | None = None
    evaluation_split: str | None = None
    evaluation_splits: tuple[str, ...] = ()  # the splits it scores by name (none: any folder's)
    evaluation_options: tuple[TaskOption, ...] = ()
    surfaces: frozenset[str] = field(default_factory=frozenset)
    dataset: str | None = None
    closing: Callable[[Any, Any], Closing] | None = None
    vocabulary: VocabularyFunctions[Any] | None = None
    layout_settings: tuple[str, ...] = ()
    predictor: Callable[[Any, Any, Any, torch.device], Any] | None = None
    serving: Serving | None = None
    command: PredictCommand | None = None

    def __post_init__(self) -> None:
        if not self.presets:
            raise ValueError(f"task {self.name!r}: expected at least one preset, got none")
        if (self.corpus is None) != (self.corpus_kind is None):
            raise ValueError(f"task {self.name!r}: expected corpus and corpus_kind together, got only one of them")
        unknown = sorted(set(self.surfaces) - set(SURFACES))
        if unknown:
            raise ValueError(f"task {self.name!r}: expected surfaces among {SURFACES}, got {unknown}")
        exports = sorted(set(self.surfaces) & set(EXPORT_SURFACES))
        if exports and self.vocabulary is None:
            raise ValueError(
                f"task {self.name!r}: expected a vocabulary (Task.vocabulary) with the surfaces {exports}, got none"
            )
        missing = " and ".join(name for name in ("predictor", "serving") if getattr(self, name) is None)
        if "serve" in self.surfaces and missing:
            raise ValueError(
                f"task {self.name!r}: expected Task.predictor and Task.serving with the surface 'serve', "
                f"got no {missing}"
            )
        if self.command is not None and self.predictor is None:
            raise ValueError(f"task {self.name!r}: expected Task.predictor with a command, got none")
        if (self.evaluate is None) != (self.evaluation_split is None):
            raise ValueError(
                f"task {self.name!r}: expected both evaluate and its evaluation_split, or neither, got one"
            )
        if not self.checkpoint_task:
            object.__setattr__(self, "checkpoint_task", self.name)

    def reads_option(self, flag: str) -> bool:
        """Whether the task's evaluation reads the option spelled ``flag`` (one of ``evaluation_options``)."""
        return any(option.flag == flag for option in self.evaluation_options)

    def prepare(self, data: Any, out_dir: Path, progress: bool, checkpoint: Path | None = None) -> dict[str, Any]:
        """``transformer-lab prepare``: the corpus of ``data`` (a data config) written into ``out_dir``; its report.

        ``checkpoint``: the checkpoint folder whose vocabulary makes the ids (``--init-from``).
        """
        if self.corpus is None:
            raise ValueError(f"task: expected a task with a corpus to prepare, got {self.name}")
        prepared = self.corpus(data, progress, checkpoint).prepare(out_dir)
        return {**prepared.report, "seconds": prepared.manifest["seconds"]}

    def check_prepared_vocabulary(self, data: Any, checkpoint: Path, option: str = "data.prepared_dir") -> None:
        """Refuse ``data.prepared_dir`` when its ids were not made with ``checkpoint``'s vocabulary (a fine-tune).

        One line naming the folder (as ``option``) and the checkpoint, before the folder's recorded settings
        are compared with the checkpoint's: those differ too, but say less.
        """
        folder = Path(getattr(data, "prepared_dir", "") or "")
        if self.corpus is None or not folder.name:
            return
        kind = self.corpus(data, False, checkpoint)
        mismatch = kind.identity.given_mismatch(kind.read_manifest(folder))
        if mismatch:
            raise ValueError(
                f"{option} {folder}: expected a corpus prepared with the {kind.identity.what} of the checkpoint "
                f"{checkpoint} (prepare {self.name} --init-from {checkpoint}), got one {mismatch}"
            )

    def config(self, preset: str | None = None) -> Any:
        """A fresh config of the preset named ``preset`` (None: the default); an unknown name is one line."""
        if preset is None:
            return next(iter(self.presets.values()))()
        if preset not in self.presets:
            names = sorted(self.presets)
            # Named as words: a Python list is no part of the command's vocabulary.
            if len(names) == 1:
                expected = f"{names[0]!r}, the only preset of {self.name}"
            else:
                expected = f"a preset of {self.name} ({in_words(names)})"
            raise ValueError(f"--preset: expected {expected}, got {preset!r}")
        return self.presets[preset]()

    def predictor_for(self, checkpoint: str | os.PathLike[str], device: str | torch.device = "cpu") -> Any:
        """The task's Python API object for ``checkpoint`` (a checkpoint or run folder), its model on ``device``."""
        if self.predictor is None:
            raise ValueError(f"task {self.name!r}: expected a predictor (Task.predictor), got none")
        return self.predictor(*load_on(self.load, checkpoint, device))
