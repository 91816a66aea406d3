"""The model card: ``README.md`` in every checkpoint, for a person who opens the folder.

It follows the Hugging Face Hub's convention: YAML front matter with ``language``, ``tags``,
``datasets`` and a ``model-index`` block (each result a task, a dataset with its split, and
metrics), then Markdown. The facts it is made from sit in the front matter under
``transformer_lab`` (task, languages, data files and counts, the model's sizes, the
training's steps, time and machine, the validation and test scores), so that the body can
be rendered again from the card alone: ``evaluate`` adds its test scores that way
(:func:`add_test_scores`), rewriting the file atomically (a temporary file renamed over it;
the other checkpoint folders that share the old file by hard link keep theirs).

The facts come from the checkpoint's ``config.json`` (the task, its ``data`` and ``model``
sections, ``data_counts`` written by the task, a time budget's plan) and from the Trainer
(:class:`TrainerFacts`: step, epoch, seconds, device, parameters, validation metrics);
:func:`trainer_card` puts them together, with the machine's name and threads.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import torch

from transformer_lab.atomic_files import write_text_atomically
from transformer_lab.hardware import cpu_model_name

from .config_file import MAX_YAML_BYTES, dump_yaml, load_bounded_yaml_text, read_bounded_text
from .config_io import shown

__all__ = [
    "CARD_FILE",
    "CARD_HINTS_KEY",
    "DATA_COUNTS_KEY",
    "TrainerFacts",
    "TrainingClock",
    "add_test_scores",
    "card_facts",
    "file_test_name",
    "read_card",
    "render_card",
    "trainer_card",
]

logger = logging.getLogger(__name__)

CARD_FILE = "README.md"
# The key of config.json where a task records how many examples it trained and validated on.
DATA_COUNTS_KEY = "data_counts"
_FACTS_KEY = "transformer_lab"
# The key of config.json where a task says what its cards need from it: the Hub's task type
# ("hub_task"), and the dataset and languages of its preset, for a run that reads no files
# of the user's ("dataset", "languages").
CARD_HINTS_KEY = "card"
# The key of config.json naming the checkpoint a fine-tuning run started from.
INITIALIZED_FROM_KEY = "initialized_from"
_DEFAULT_HUB_TASK = "text2text-generation"
_MODEL_SIZES = (
    "d_model",
    "nhead",
    "num_encoder_layers",
    "num_decoder_layers",
    "num_layers",
    "dim_feedforward",
    "src_vocab_size",
    "tgt_vocab_size",
    "vocab_size",
    "num_classes",
)


def _data_facts(default_dataset: str, data: Mapping[str, Any], counts: Mapping[str, Any]) -> dict[str, Any]:
    """The dataset's name, the files read, the counts, and ``own_files``: whether the user gave the files."""
    # Names, not the absolute paths config.json records: a card is shared, the folders are the trainer's own.
    own = [Path(str(name)).name for key in ("train_files", "valid_files") for name in data.get(key) or ()]
    if data.get("prepared_dir"):
        own.append(Path(str(data["prepared_dir"])).name)
    # A preset's file inside its dataset's folder (AG News's train.csv) names the file, not the dataset.
    files = own + ([str(data["train_file"])] if data.get("train_file") else [])
    dataset = default_dataset if not own else Path(own[0]).name
    return {"dataset": dataset, "files": files, "counts": dict(counts), "own_files": bool(own)}


def card_facts(
    config: Mapping[str, Any],
    *,
    parameters: int,
    step: int,
    epoch: int,
    training_seconds: float,
    machine: str,
    threads: int,
    validation: Mapping[str, float],
    validation_step: int | None,
) -> dict[str, Any]:
    """The facts of a checkpoint's card, from its ``config.json`` and the Trainer's figures."""
    task = str(config.get("task") or "model")
    data = config.get("data") if isinstance(config.get("data"), Mapping) else {}
    model = config.get("model") if isinstance(config.get("model"), Mapping) else {}
    train = config.get("train") if isinstance(config.get("train"), Mapping) else {}
    assert isinstance(data, Mapping) and isinstance(model, Mapping) and isinstance(train, Mapping)
    counts = config.get(DATA_COUNTS_KEY)
    hints = config.get(CARD_HINTS_KEY) if isinstance(config.get(CARD_HINTS_KEY), Mapping) else {}
    assert isinstance(hints, Mapping)
    languages = [str(data[key]) for key in ("source_language", "target_language") if data.get(key)]
    data_facts = _data_facts(str(hints.get("dataset") or task), data, counts if isinstance(counts, Mapping) else {})
    own_files = data_facts.pop("own_files")
    if not languages and not own_files:
        languages = [str(language) for language in hints.get("languages") or ()]
    training: dict[str, Any] = {
        "steps": step,
        "epochs_completed": epoch,
        "seconds": round(training_seconds, 1),
        "machine": machine,
        "threads": threads,
        "precision": train.get("precision"),
    }
    if config.get("time_budget_plan"):
        training["time_budget_plan"] = dict(config["time_budget_plan"])
    if isinstance(config.get(INITIALIZED_FROM_KEY), str):
        training["fine_tuned_from"] = config[INITIALIZED_FROM_KEY]
    return {
        "task": task,
        "hub_task": str(hints.get("hub_task") or _DEFAULT_HUB_TASK),
        "languages": languages,
        "data": data_facts,
        "model": {"parameters": parameters, **{key: model[key] for key in _MODEL_SIZES if key in model}},
        "training": training,
        "validation": {"step": validation_step, "metrics": {key: float(value) for key, value in validation.items()}},
        "test": [],
    }


@dataclasses.dataclass(frozen=True)
class TrainerFacts:
    """What the Trainer knows of a checkpoint beyond its config.json (named as :func:`card_facts` names them)."""

    parameters: int
    step: int
    epoch: int  # epochs completed
    training_seconds: float
    validation: Mapping[str, float]
    validation_step: int | None  # the step ``validation`` was measured at


def trainer_card(config: Mapping[str, Any], trainer: TrainerFacts, device: torch.device) -> str:
    """The card of a checkpoint the Trainer writes on ``device``, ``config`` being its config.json."""
    machine = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model_name()
    facts = {field.name: getattr(trainer, field.name) for field in dataclasses.fields(trainer)}
    return render_card(card_facts(config, **facts, machine=machine, threads=torch.get_num_threads()))


class TrainingClock:
    """The training seconds a card records: the run's before a resume (read from its card), and this fit's."""

    def __init__(self) -> None:
        self.earlier_seconds = 0.0
        self._started_at: float | None = None

    def resume_from(self, folder: Path) -> None:
        """Count on from ``folder``'s card; from 0 (with a note) where it records no training time."""
        try:
            self.earlier_seconds = float(read_card(folder)["training"]["seconds"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            logger.info("no training time in %s's model card (%s); the card counts from this resume", folder, error)
            self.earlier_seconds = 0.0

    def start(self) -> None:
        self._started_at = time.perf_counter()

    def seconds(self) -> float:
        this_fit = time.perf_counter() - self._started_at if self._started_at is not None else 0.0
        return self.earlier_seconds + this_fit


def _metric_entries(metrics: Mapping[str, float]) -> list[dict[str, Any]]:
    # The Hub's metric type is the plain name (bleu, chrf, accuracy); the name keeps "val_".
    return [
        {"type": name.removeprefix("val_"), "value": round(float(value), 4), "name": name}
        for name, value in metrics.items()
    ]


def _front_matter(facts: Mapping[str, Any]) -> dict[str, Any]:
    task = facts["task"]
    hub_task = str(facts.get("hub_task") or _DEFAULT_HUB_TASK)
    languages = facts["languages"]
    task_name = f"{task} {'-'.join(languages)}".strip() if languages else task
    dataset = facts["data"]["dataset"]
    results = []
    validation = facts["validation"]["metrics"]
    # The model index scores these weights: a validation of an earlier step (last/ saved between validations,
    # at a stop) is in the card's table with its step, not here.
    measured_here = facts["validation"]["step"] in (None, facts["training"].get("steps"))
    if validation and measured_here:
        results.append(
            {
                "task": {"type": hub_task, "name": task_name},
                "dataset": {"name": dataset, "type": dataset, "split": "validation"},
                "metrics": _metric_entries(validation),
            }
        )
    for test in facts["test"]:
        scored = test.get("dataset", dataset)  # a file of the user's own names itself
        results.append(
            {
                "task": {"type": hub_task, "name": task_name},
                "dataset": {"name": scored, "type": scored, "split": test["split"]},
                "metrics": _metric_entries(test["metrics"]),
            }
        )
    front: dict[str, Any] = {}
    if languages:
        front["language"] = sorted(set(languages), key=languages.index)
    front.update(
        {
            "library_name": "transformer_lab",
            "pipeline_tag": hub_task,
            "tags": ["transformer", "transformer_lab", task],
            "datasets": [dataset],
            "model-index": [{"name": f"transformer_lab-{task}", "results": results}],
            _FACTS_KEY: dict(facts),
        }
    )
    return front


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _counted(count: int, noun: str) -> str:
    """``1 epoch``, ``2 epochs``: a card reads as English, not as a template."""
    return f"{_number(count)} {noun}{'' if count == 1 else 's'}"


def render_card(facts: Mapping[str, Any]) -> str:
    """The card's text: the front matter, then the Markdown rendered from ``facts``."""
    front = dump_yaml(_front_matter(facts))
    task, languages, data, model, training = (
        facts["task"],
        facts["languages"],
        facts["data"],
        facts["model"],
        facts["training"],
    )
    lines = [
        "---",
        front.rstrip("\n"),
        "---",
        "",
        f"# transformer_lab {task} model" + (f" ({' -> '.join(languages)})" if languages else ""),
        "",
        'An encoder-decoder Transformer ("Attention Is All You Need") trained with transformer_lab; load it '
        "with the checkpoint loaders or the `transformer-lab` commands, pointing them at this folder.",
        "",
        "## Data",
        "",
        f"- Dataset: {data['dataset']}" + (f"; files: {', '.join(data['files'])}" if data["files"] else ""),
    ]
    for name, count in data["counts"].items():
        lines.append(f"- {name}: {_number(count)}")
    lines += ["", "## Model", "", "| size | value |", "|---|---:|"]
    lines += [f"| {name} | {_number(value)} |" for name, value in model.items()]
    minutes = training["seconds"] / 60
    lines += [
        "",
        "## Training",
        "",
        f"- {_counted(training['steps'], 'optimizer step')}, {_counted(training['epochs_completed'], 'epoch')} "
        "completed, "
        f"{training['seconds']:.0f} s ({minutes:.1f} minutes) of training",
        f"- Machine: {training['machine']}, {training['threads']} thread(s), precision {training['precision']}",
    ]
    base = training.get("fine_tuned_from")
    if base:
        lines.append(
            f"- Fine-tuned from {base}: the data, steps and time above are the fine-tune's; "
            "the base model's are on its own card"
        )
    averaged = training.get("averaged_from")
    if averaged:
        lines.append(
            f"- Weights: the mean of {len(averaged)} checkpoints of that run ({averaged[0]} .. {averaged[-1]}); "
            "the run's validation scores belong to its own checkpoints, so none are listed for these weights"
        )
    plan = training.get("time_budget_plan")
    if plan:
        lines.append(
            f"- Time budget {plan['budget_seconds']:.0f} s: {plan['steps_per_second']:.3f} steps/s measured over "
            f"{plan['measured_steps']} steps, so {plan['total_steps']} steps (warm-up {plan['warmup_steps']}, "
            f"cool-down {plan['cooldown_steps']})"
        )
    lines += ["", "## Scores", "", "| split | search | metric | value |", "|---|---|---|---:|"]
    validation = facts["validation"]
    where = f"validation (step {validation['step']})" if validation["step"] is not None else "validation"
    lines += [f"| {where} | - | {name} | {value:.2f} |" for name, value in validation["metrics"].items()]
    for test in facts["test"]:
        lines += [
            f"| {test['split']} | {test['search']} | {name} | {value:.2f} |" for name, value in test["metrics"].items()
        ]
    return "\n".join(lines) + "\n"


class _CardFields:
    """Checks of the facts' fields, each error naming the file and the field (``transformer_lab.test[0].split``).

    The card is read back to be rendered again (``evaluate``, averaging, a resume), and a
    checkpoint folder may hold a card that someone edited: a field of the wrong type would
    otherwise fail inside the rendering, after ``evaluate`` had scored.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, field: str, expected: str, value: Any) -> NoReturn:
        raise ValueError(f"{self.path}: {_FACTS_KEY}.{field}: expected {expected}, got {shown(value)}")

    def text(self, value: Any, field: str) -> str:
        if not isinstance(value, str):
            self.fail(field, "text", value)
        return value

    def count(self, value: Any, field: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            self.fail(field, "an int >= 0", value)
        return value

    def number(self, value: Any, field: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.fail(field, "a finite number", value)
        return value

    def mapping(self, value: Any, field: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
            self.fail(field, "a mapping of names", value)
        return value

    def sequence(self, value: Any, field: str) -> list[Any]:
        if not isinstance(value, list):
            self.fail(field, "a list", value)
        return value

    def numbers(self, value: Any, field: str) -> None:
        for name, item in self.mapping(value, field).items():
            self.number(item, f"{field}.{name}")

    def texts(self, value: Any, field: str) -> None:
        for index, item in enumerate(self.sequence(value, field)):
            self.text(item, f"{field}[{index}]")

    def facts(self, facts: Mapping[str, Any]) -> None:
        """Every field :func:`render_card` reads, with the type it reads it as."""
        self.text(facts["task"], "task")
        if "hub_task" in facts:
            self.text(facts["hub_task"], "hub_task")
        self.texts(facts["languages"], "languages")
        data = self.mapping(facts["data"], "data")
        for key in ("dataset", "files", "counts"):
            if key not in data:
                self.fail("data", f"the key {key!r}", data)
        self.text(data["dataset"], "data.dataset")
        self.texts(data["files"], "data.files")
        self.numbers(data["counts"], "data.counts")
        self.numbers(facts["model"], "model")
        training = self.mapping(facts["training"], "training")
        for key in ("steps", "epochs_completed", "seconds", "machine", "threads", "precision"):
            if key not in training:
                self.fail("training", f"the key {key!r}", training)
        self.count(training["steps"], "training.steps")
        self.count(training["epochs_completed"], "training.epochs_completed")
        self.number(training["seconds"], "training.seconds")
        self.text(training["machine"], "training.machine")
        self.count(training["threads"], "training.threads")
        if training["precision"] is not None:
            self.text(training["precision"], "training.precision")
        if training.get("averaged_from"):
            self.texts(training["averaged_from"], "training.averaged_from")
        if training.get("fine_tuned_from"):
            self.text(training["fine_tuned_from"], "training.fine_tuned_from")
        if training.get("time_budget_plan"):
            plan = self.mapping(training["time_budget_plan"], "training.time_budget_plan")
            for key in ("budget_seconds", "steps_per_second", "measured_steps", "total_steps"):
                self.number(plan.get(key), f"training.time_budget_plan.{key}")
            for key in ("warmup_steps", "cooldown_steps"):
                self.number(plan.get(key), f"training.time_budget_plan.{key}")
        validation = self.mapping(facts["validation"], "validation")
        if validation.get("step") is not None:
            self.count(validation["step"], "validation.step")
        self.numbers(validation.get("metrics"), "validation.metrics")
        for index, test in enumerate(self.sequence(facts["test"], "test")):
            entry = self.mapping(test, f"test[{index}]")
            self.text(entry.get("split"), f"test[{index}].split")
            self.text(entry.get("search"), f"test[{index}].search")
            if "dataset" in entry:
                self.text(entry["dataset"], f"test[{index}].dataset")
            self.numbers(entry.get("metrics"), f"test[{index}].metrics")


# A card is a few kilobytes; its front matter is read as bounded YAML.
_MAX_CARD_BYTES = 2 * MAX_YAML_BYTES


def read_card(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The facts of ``folder``'s card; a missing file is ``FileNotFoundError``, a malformed one ``ValueError``.

    Every field the card is rendered from is checked here, so a card that someone edited
    is one error naming the file and the field (``transformer_lab.test: expected a list``).
    """
    path = Path(folder) / CARD_FILE
    text = read_bounded_text(path, _MAX_CARD_BYTES, "a model card")
    parts = text.split("---\n", 2)
    if len(parts) != 3 or parts[0] != "":
        raise ValueError(f"{path}: expected YAML front matter between '---' lines at the top, got none")
    # The blank line stands for the opening '---', so that the lines named are the file's.
    front = load_bounded_yaml_text("\n" + parts[1], f"{path}: front matter")
    facts = front.get(_FACTS_KEY) if isinstance(front, Mapping) else None
    required = ("task", "languages", "data", "model", "training", "validation", "test")
    if not isinstance(facts, Mapping) or any(key not in facts for key in required):
        raise ValueError(f"{path}: expected a front matter section {_FACTS_KEY!r} with the keys {list(required)}")
    _CardFields(path).facts(facts)
    return dict(facts)


# What a pipe or a device given as a test file (``<(...)``, /dev/stdin) is named: it names no test set, and
# a digest of its path (a new ``pipe:[N]`` each time) would add an output file and a card row every run.
STREAM_TEST_NAME = "stream"


def file_test_name(path: str | os.PathLike[str]) -> str:
    """What the scores of a test file of one's own are recorded (and its outputs named) under.

    The file's name and 8 hex digits of its resolved path: a file named like a split
    (``test``, ``test_2016_flickr``), or ``a/test.de`` beside ``b/test.de``, keeps its own
    row of the card instead of replacing another's scores. A pipe or a device: `STREAM_TEST_NAME`.
    """
    if not Path(path).is_file():
        return STREAM_TEST_NAME
    digest = hashlib.sha256(os.fsencode(Path(path).resolve())).hexdigest()[:8]
    return f"{Path(path).name}.{digest}"


def add_test_scores(
    folder: str | os.PathLike[str],
    split: str,
    search: str,
    metrics: Mapping[str, float],
    dataset: str | None = None,
) -> Path:
    """Add (or replace) the scores of ``split`` under ``search`` in ``folder``'s card; return its path.

    ``dataset``: the name of the file scored where it is the user's own (None: a split of the
    dataset the card names).

    Scores recorded earlier for the same split and search under other names stay beside
    the new ones (one evaluation's BLEU flavour does not erase another's); a name given
    again is replaced.
    """
    path = Path(folder) / CARD_FILE
    facts = read_card(folder)
    earlier: dict[str, float] = {}
    tests = []
    for test in facts["test"]:
        if (test.get("split"), test.get("search")) == (split, search):
            earlier.update(test.get("metrics") or {})
        else:
            tests.append(test)
    new = {key: float(value) for key, value in metrics.items()}
    entry: dict[str, Any] = {"split": split, "search": search, "metrics": {**earlier, **new}}
    if dataset is not None:
        entry["dataset"] = dataset
    tests.append(entry)
    facts["test"] = tests
    write_text_atomically(path, render_card(facts))
    return path


def averaged_card(last: str | os.PathLike[str], sources: Sequence[str | os.PathLike[str]]) -> str:
    """The card of an average of ``sources`` (whose last is ``last``): the run's facts, no scores of its own yet."""
    facts = read_card(last)
    facts["training"] = {**facts["training"], "averaged_from": [Path(source).name for source in sources]}
    facts["validation"] = {"step": None, "metrics": {}}
    facts["test"] = []
    return render_card(facts)
