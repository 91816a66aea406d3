"""One registry of tasks: the commands offer exactly its tasks, and a task registered at run time, with a
vocabulary of its own kind, is trained by `train`, printed by `config`, loaded by the checkpoint loader, scored by
`evaluate`, opened as its Python API object, answered by its own command, served by the web app and exported to
ONNX with no other change."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from transformer_lab.cli import build_parser, main
from transformer_lab.data import BOS_ID, EOS_ID, PAD_ID
from transformer_lab.data.synthetic import batches_of
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.serve import create_app, load_served_models
from transformer_lab.tasks import registry
from transformer_lab.tasks.command import Answers, PredictCommand
from transformer_lab.tasks.evaluation import EvaluationOptions, EvaluationReport, TaskOption
from transformer_lab.tasks.synthetic import train as synthetic_train
from transformer_lab.tasks.task import Closing, Endpoint, Serving, Task, VocabularyFunctions
from transformer_lab.training.batch_losses import seq2seq_loss_fn, validation_loss
from transformer_lab.training.checkpoint import resolve_checkpoint
from transformer_lab.training.checkpoint_loading import load_checkpoint_parts
from transformer_lab.training.model_card import read_card
from transformer_lab.training.run.plan import RunPlan, train_run


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    subparsers = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return dict(subparsers.choices)


def command_parser(command: str) -> argparse.ArgumentParser:
    return subcommands()[command]


def command_choices(command: str) -> tuple[str, ...]:
    task_argument = next(action for action in command_parser(command)._actions if action.dest == "task")
    assert task_argument.choices is not None
    return tuple(task_argument.choices)


def test_the_commands_offer_the_registered_tasks() -> None:
    tasks = registry.TASKS
    assert command_choices("train") == tuple(tasks) == command_choices("config")
    assert command_choices("evaluate") == tuple(name for name, task in tasks.items() if task.evaluate is not None)
    # Every option of `evaluate` beyond the shared ones is read by some task, and every option a task reads is offered.
    offered = {
        *command_parser("evaluate").get_default("task_options").values(),
        "--beam",
        "--length-penalty",
        "--beam-stop",
    }
    assert offered == {option.flag for task in tasks.values() for option in task.evaluation_options}
    assert command_choices("prepare") == tuple(name for name, task in tasks.items() if task.corpus is not None)
    served = registry.checkpoint_tasks("serve")
    assert set(served) == set(registry.tasks_offering("serve")) == {"translation", "couplet", "classification"}
    assert all(task.serving is not None and task.predictor is not None for task in served.values())
    commands = {task.command.name for task in tasks.values() if task.command is not None}
    assert commands == {"translate", "couplet", "classify"}
    assert commands <= set(subcommands())
    with pytest.raises(ValueError, match="task 'copy': expected a new task name"):
        registry.register(registry.TASKS["copy"])
    with pytest.raises(
        ValueError, match="task: expected one of classification, couplet, .*, translation, got 'summarise'"
    ):
        registry.task_named("summarise")


def test_the_task_layer_knows_nothing_of_the_command_line() -> None:
    # The commands turn their options into the tasks' own (EvaluationOptions), never the reverse.
    for path in sorted((Path(registry.__file__).parent).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            names += [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            for name in names:
                assert name != "argparse" and not name.startswith("transformer_lab.cli"), f"{path.name} imports {name}"


TINY = ["data.num_train=64", "data.num_validation=8", "data.num_test=8", "model.d_model=16", "model.nhead=2"]
TINY += ["model.num_encoder_layers=1", "model.num_decoder_layers=1", "model.dim_feedforward=32"]
TINY += ["train.epochs=1", "train.progress_bar=false"]


def short_sort_config() -> synthetic_train.SyntheticConfig:
    """The toy task's one preset: sorting sequences of at most four symbols."""
    config = synthetic_train.default_config("sort")
    return synthetic_train.resolve(dataclasses.replace(config, data=dataclasses.replace(config.data, max_length=4)))


# The toy task's own vocabulary, of a kind no built-in task keeps: one JSON list of symbol strings.
SYMBOLS_FILE = "symbols.json"
SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")


@dataclasses.dataclass(frozen=True)
class SymbolTable:
    """The string of every id, the same on both sides."""

    symbols: tuple[str, ...]

    def ids(self, symbols: Sequence[str]) -> list[int]:
        unknown = [symbol for symbol in symbols if symbol not in self.symbols[len(SPECIALS) :]]
        if unknown:
            raise ValueError(f"symbols: expected symbols of the table, got {unknown}")
        return [self.symbols.index(symbol) for symbol in symbols]


def symbol_table(vocab_size: int) -> SymbolTable:
    return SymbolTable(SPECIALS + tuple(f"s{number}" for number in range(len(SPECIALS), vocab_size)))


def read_symbols(folder: Path) -> SymbolTable:
    return SymbolTable(tuple(json.loads((folder / SYMBOLS_FILE).read_text(encoding="utf-8"))))


SYMBOLS = VocabularyFunctions(
    read=read_symbols,
    files=lambda table: {SYMBOLS_FILE: json.dumps(list(table.symbols))},
    tokens=lambda table: (table.symbols, table.symbols),
)


def train_short_sort(
    config: Any, out_dir: str | os.PathLike[str], *, resume: bool = False, init_from: object = None
) -> synthetic_train.TrainResult:
    """The toy task's own run: the sort data, its checkpoints recorded as short-sort's with its symbol table."""
    config = synthetic_train.resolve(config)
    data = synthetic_train.build_data(config.data)
    table = symbol_table(config.data.vocab_size)

    def evaluate(model: torch.nn.Module) -> dict[str, float]:
        assert isinstance(model, Seq2SeqTransformer)
        greedy = dataclasses.replace(config.decode, strategy="greedy")
        return {
            "val_loss": validation_loss(model, data.validation, 256 * (config.data.max_length + 2)),
            "val_exact_match": synthetic_train.exact_match(model, data.validation, greedy),
        }

    plan = RunPlan(
        task_name="short-sort",
        config=config,
        build_model=lambda: Seq2SeqTransformer.from_config(config.model),
        loss_fn=seq2seq_loss_fn(config.train.label_smoothing, PAD_ID),
        train_batches=lambda epoch: batches_of(data.train, config.data.batch_size, True, config.data.seed, epoch),
        evaluate_fn=evaluate,
        count_tokens=lambda batch: batch.num_target_tokens,
        extra_files=SYMBOLS.files(table),
    )
    model, summary = train_run(plan, out_dir, resume=resume, init_from=init_from)
    return synthetic_train.TrainResult(model=model, vocabulary=table, config=config, data=data, summary=summary)


def load_short_sort(checkpoint: Any) -> tuple[Seq2SeqTransformer, SymbolTable, synthetic_train.SyntheticConfig]:
    return load_checkpoint_parts(
        checkpoint,
        "short-sort",
        synthetic_train.SyntheticConfig,
        lambda config: Seq2SeqTransformer.from_config(config.model),
        read_symbols,
        lambda table: {name: (len(table.symbols), SYMBOLS_FILE) for name in ("src_vocab_size", "tgt_vocab_size")},
    )


def held_out_count(result: synthetic_train.TrainResult, config: Any) -> Closing:
    count = len(result.data.test)
    return Closing([f"short sort: {count} held-out sequences"], {"held_out_sequences": count})


def evaluate_short_sort(checkpoint: Path, split: str | None, options: EvaluationOptions) -> EvaluationReport:
    """The toy task's evaluation: greedy exact match, and token accuracy under teacher forcing in padded batches."""
    model, _, config = load_short_sort(checkpoint)
    data = synthetic_train.build_data(config.data)
    splits = {"test": data.test, "validation": data.validation}
    name = split or "test"
    if name not in splits:
        raise ValueError(f"--split: expected one of {sorted(splits)}, got {name!r}")
    exact = synthetic_train.exact_match(model, splits[name], dataclasses.replace(config.decode, strategy="greedy"))
    correct = total = 0
    with torch.inference_mode():
        for batch in batches_of(splits[name], 3, shuffle=False, seed=0, epoch=0):
            predicted_ids = model(batch.src_ids, batch.tgt_in_ids).argmax(dim=-1)  # [B, T]
            real = batch.tgt_out_ids != PAD_ID  # [B, T]
            correct += int(((predicted_ids == batch.tgt_out_ids) & real).sum())
            total += int(real.sum())
    return EvaluationReport(
        lines=[f"short sort {name}: exact match {exact:.4f}, token accuracy {correct / total:.4f}"],
        files={},
        checkpoint=resolve_checkpoint(checkpoint),
        name=name,
        search="greedy",
        scores={"exact_match": exact, "token_accuracy": correct / total},
    )


class ShortSorter:
    """The toy task's Python API object: its model, on a device, sorts up to four symbols of its table."""

    def __init__(self, model: torch.nn.Module, table: SymbolTable, config: Any, device: torch.device) -> None:
        self.model = model.to(device)
        self.table = table
        self.config = config

    def sort(self, symbols: Sequence[str]) -> list[str]:
        greedy = dataclasses.replace(self.config.decode, strategy="greedy")
        ids = synthetic_train.decode_pairs(self.model, [(self.table.ids(symbols), [])], greedy)[0]
        return [self.table.symbols[token_id] for token_id in ids]


@dataclasses.dataclass(frozen=True)
class SortRequest:
    symbols: list[str] = dataclasses.field(metadata={"min_length": 1, "max_length": 4})


class SortHandler:
    """The toy task's pane: a thin adapter over its `ShortSorter`."""

    def __init__(self, predictor: ShortSorter) -> None:
        self.predictor = predictor

    def describe(self) -> dict[str, Any]:
        return {"max_length": self.predictor.config.data.max_length}

    def sort(self, request: SortRequest) -> dict[str, Any]:
        return {"symbols": self.predictor.sort(request.symbols)}


SHOW_INPUT = TaskOption("--show-input", "print each input, a tab, then its sorted symbols", bool)


def answer_sort(sorter: ShortSorter, lines: list[str], options: Mapping[str, Any]) -> Answers:
    """``transformer-lab sort-symbols``: each line's symbols (spaces apart) sorted by the model."""
    answers = Answers(lines=[])
    for number, line in enumerate(lines, start=1):
        try:
            sorted_symbols = " ".join(sorter.sort(line.split()))
        except ValueError as error:
            answers.refused += 1
            answers.lines.append("")
            answers.notes.append(f"input {number}: {error}")
            continue
        answers.lines.append(f"{line}\t{sorted_symbols}" if options.get(SHOW_INPUT.flag) else sorted_symbols)
    return answers


@pytest.fixture
def short_sort_task() -> Iterator[Task]:
    """The toy task, registered for one test and taken out again."""
    task = Task(
        name="short-sort",
        presets={"default": short_sort_config},
        train=train_short_sort,
        load=load_short_sort,
        reads_data=False,
        evaluate=evaluate_short_sort,
        evaluation_split="test",
        closing=held_out_count,
        surfaces=frozenset({"serve", "onnx"}),
        vocabulary=SYMBOLS,
        predictor=ShortSorter,
        serving=Serving(SortHandler, (Endpoint("/api/short-sort", SortRequest, SortHandler.sort),)),
        command=PredictCommand("sort-symbols", "sort symbols", "sequences", "sort", answer_sort, (SHOW_INPUT,)),
    )
    with registry.registered(task):
        yield task


def test_a_task_registered_at_run_time_trains_and_loads_through_the_commands(
    short_sort_task: Task, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "short-sort"]) == 0
    assert "max_length: 4" in capsys.readouterr().out

    out = tmp_path / "run"
    assert main(["train", "short-sort", "--out", str(out), *[part for item in TINY for part in ("--set", item)]]) == 0
    printed = capsys.readouterr().out
    assert "short sort: 8 held-out sequences" in printed
    assert printed.startswith("trained ") and "\nbest/: step " in printed

    trained = registry.load_trained(out)
    assert trained.task == "short-sort" and trained.vocabulary == symbol_table(trained.config.data.vocab_size)
    assert trained.config.data.max_length == 4 and trained.config.data.task == "sort"
    assert main(["train", "short-sort", "--out", str(tmp_path / "r2"), "--train", "a.txt"]) != 0
    assert "expected only with a task that reads data" in capsys.readouterr().err
    assert main(["evaluate", "short-sort", "--checkpoint", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("short sort test: exact match ")
    assert f"model card: {resolve_checkpoint(out) / 'README.md'}" in printed
    recorded = read_card(out / "best")["test"]
    assert [(entry["split"], entry["search"]) for entry in recorded] == [("test", "greedy")]

    # The oracle: one sequence at a time, teacher-forced without padding. Greedy search gives
    # the target exactly when every next token of the target, then eos, is the argmax.
    model, table, config = load_short_sort(out)
    held_out = synthetic_train.build_data(config.data).test
    right_tokens = whole_sequences = 0
    greedy_gives_target = []
    with torch.inference_mode():
        for source, target in held_out:
            predicted_ids = model(torch.tensor([source]), torch.tensor([[BOS_ID, *target]])).argmax(dim=-1)  # [1, T]
            right = int((predicted_ids[0] == torch.tensor([*target, EOS_ID])).sum())
            right_tokens += right
            whole_sequences += right == len(target) + 1
            greedy_gives_target.append(right == len(target) + 1)
    token_count = sum(len(target) + 1 for _, target in held_out)
    assert recorded[0]["metrics"]["token_accuracy"] == pytest.approx(right_tokens / token_count, abs=1e-9)
    assert recorded[0]["metrics"]["exact_match"] == pytest.approx(whole_sequences / len(held_out), abs=1e-9)

    # Options the toy task does not read are refused, naming the tasks that read them.
    assert main(["evaluate", "short-sort", "--checkpoint", str(out), "--beam", "2"]) == 2
    assert (
        "--beam: expected only with the couplet, copy, reverse, sort and translation tasks, got it with short-sort"
        in capsys.readouterr().err
    )
    assert main(["evaluate", "short-sort", "--checkpoint", str(out), "--test", "news.csv"]) == 2
    assert "--test: expected only with the classification task, got it with short-sort" in capsys.readouterr().err

    # The Python API object and the page: the task's predictor, loaded once, answers both alike.
    def spelled(ids: Sequence[int]) -> list[str]:
        return [table.symbols[token_id] for token_id in ids]

    sorter = short_sort_task.predictor_for(out)
    assert isinstance(sorter, ShortSorter) and not sorter.model.training
    client = TestClient(create_app(load_served_models([f"sorter={out}"])))
    assert client.get("/api/models").json()["models"] == [
        {
            "name": "sorter",
            "task": "short-sort",
            "checkpoint": str(resolve_checkpoint(out)),
            "max_length": 4,
            "endpoints": [
                {
                    "path": "/api/short-sort",
                    "fields": [{"name": "symbols", "type": "json", "required": True, "min_length": 1, "max_length": 4}],
                }
            ],
        }
    ]
    for (source, target), whole in zip(held_out, greedy_gives_target, strict=True):
        answer = client.post("/api/short-sort", json={"model": "sorter", "symbols": spelled(source)})
        assert answer.status_code == 200, answer.text
        assert answer.json()["symbols"] == sorter.sort(spelled(source))
        assert (answer.json()["symbols"] == spelled(target)) == whole, (source, target)
    for body, field in (({"symbols": ["s5"] * 5}, "symbols"), ({"symbols": ["s5"], "text": "x"}, "text")):
        refused = client.post("/api/short-sort", json={"model": "sorter", **body})
        assert refused.status_code == 422 and refused.json()["error"].startswith(f"{field}: "), refused.text

    # The task's own command: the same predictor behind a command line, its option added from its declaration.
    sources = [" ".join(spelled(source)) for source, _ in held_out]
    assert main(["sort-symbols", "--checkpoint", str(out), "--device", "cpu", *sources]) == 0
    printed_lines = capsys.readouterr().out.splitlines()
    assert printed_lines == [" ".join(sorter.sort(spelled(source))) for source, _ in held_out]
    assert main(["sort-symbols", "--checkpoint", str(out), "--show-input", sources[0], "s5 x"]) == 2
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"{sources[0]}\t{printed_lines[0]}", ""]
    assert captured.err == "transformer-lab sort-symbols: input 2: symbols: expected symbols of the table, got ['x']\n"

    # ONNX: the exporter writes the toy's own vocabulary beside the graphs, and onnxruntime's greedy
    # ids, spelled with the exported table, are the predictor's answers.
    pytest.importorskip("onnxruntime", reason='onnxruntime is not installed (pip install -e ".[deploy]")')
    from transformer_lab.export.onnx_runtime import greedy_decode, load_seq2seq

    exported = tmp_path / "onnx"
    assert main(["export", "--checkpoint", str(out), "--format", "onnx", "--out", str(exported)]) == 0
    assert read_symbols(exported) == table
    engine = load_seq2seq(exported)
    for source, _ in held_out:
        ids, _ = greedy_decode(engine, np.array([source]), max_len=config.decode.max_len)[0]
        assert [table.symbols[token_id] for token_id in ids if token_id != EOS_ID] == sorter.sort(spelled(source))


def test_a_task_offering_serve_without_its_predictor_and_serving_is_one_line() -> None:
    with pytest.raises(
        ValueError,
        match="task 'served-sort': expected Task.predictor and Task.serving with the surface 'serve', "
        "got no predictor and serving",
    ):
        Task(
            name="served-sort",
            presets={"default": short_sort_config},
            train=synthetic_train.train,
            load=synthetic_train.load,
            checkpoint_task=synthetic_train.TASK_NAME,
            reads_data=False,
            surfaces=frozenset({"serve"}),
        )
