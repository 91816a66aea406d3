"""The exporters write whatever vocabulary a task keeps, through the task's own vocabulary functions.

A toy task registered at run time keeps a vocabulary of a kind no built-in task has (a
JSON list of symbol strings per side, in ``symbols.json``) over the reverse-task model
(tests/export/conftest.py): both exporters write it without knowing its kind. A model
kind an exporter cannot write, and a task offering an export without a vocabulary, are
refused in one line naming the task.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from torch import nn

from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.tasks import registry
from transformer_lab.tasks.synthetic import train as synthetic_train
from transformer_lab.tasks.task import Task, VocabularyFunctions
from transformer_lab.training.checkpoint import resolve_checkpoint
from transformer_lab.training.checkpoint_loading import load_checkpoint_parts

SYMBOLS_FILE = "symbols.json"
SPECIALS = ["<pad>", "<unk>", "<bos>", "<eos>"]


@dataclass(frozen=True)
class SymbolTable:
    """The toy vocabulary: the string of every id, one list per side."""

    source_symbols: tuple[str, ...]
    target_symbols: tuple[str, ...]


def read_symbols(folder: Path) -> SymbolTable:
    sides = json.loads((folder / SYMBOLS_FILE).read_text(encoding="utf-8"))
    return SymbolTable(tuple(sides["source"]), tuple(sides["target"]))


def symbol_files(table: SymbolTable) -> dict[str, str]:
    return {SYMBOLS_FILE: json.dumps({"source": list(table.source_symbols), "target": list(table.target_symbols)})}


SYMBOLS = VocabularyFunctions(
    read=read_symbols, files=symbol_files, tokens=lambda table: (table.source_symbols, table.target_symbols)
)


def load_symbols(checkpoint: Any) -> tuple[Seq2SeqTransformer, SymbolTable, synthetic_train.SyntheticConfig]:
    return load_checkpoint_parts(
        checkpoint,
        "symbols",
        synthetic_train.SyntheticConfig,
        lambda config: Seq2SeqTransformer.from_config(config.model),
        read_symbols,
        lambda table: {"src_vocab_size": (len(table.source_symbols), SYMBOLS_FILE)},
    )


def load_as_linear(checkpoint: Any) -> tuple[nn.Module, SymbolTable, None]:
    return nn.Linear(2, 2), read_symbols(resolve_checkpoint(checkpoint)), None


def toy_task(name: str, load: Any, vocabulary: VocabularyFunctions[Any] | None = SYMBOLS) -> Task:
    return Task(
        name=name,
        presets={"default": lambda: synthetic_train.default_config("reverse")},
        train=synthetic_train.train,
        load=load,
        reads_data=False,
        surfaces=frozenset({"onnx", "ctranslate2"}),
        vocabulary=vocabulary,
    )


@pytest.fixture
def symbols_checkpoint(reverse_training: dict, tmp_path: Path) -> Iterator[tuple[Path, SymbolTable]]:
    """The reverse-task checkpoint, recorded as the toy tasks' (config.json's task), with its symbol table."""
    folder = tmp_path / "symbols"
    shutil.copytree(resolve_checkpoint(reverse_training["run"]), folder)
    size = reverse_training["model"].src_vocab_size
    table = SymbolTable(
        tuple(SPECIALS + [f"s{symbol}" for symbol in range(4, size)]),
        tuple(SPECIALS + [f"t{symbol}" for symbol in range(4, size)]),
    )
    (folder / SYMBOLS_FILE).write_text(symbol_files(table)[SYMBOLS_FILE], encoding="utf-8")
    tasks = (toy_task("symbols", load_symbols), toy_task("linear", load_as_linear))
    with registry.registered(*tasks):
        yield folder, table


def as_task(folder: Path, name: str) -> Path:
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    (folder / "config.json").write_text(json.dumps({**config, "task": name}), encoding="utf-8")
    return folder


def test_onnx_export_writes_the_tasks_own_vocabulary(
    symbols_checkpoint: tuple[Path, SymbolTable], tmp_path: Path
) -> None:
    pytest.importorskip("onnx", reason='onnx is not installed (pip install -e ".[deploy]")')
    from transformer_lab.export.onnx import export_checkpoint

    folder, table = symbols_checkpoint
    out_dir = export_checkpoint(as_task(folder, "symbols"), tmp_path / "onnx")
    config = json.loads((out_dir / "config.json").read_text(encoding="utf-8"))
    assert config["task"] == "symbols" and config["vocabulary_files"] == [SYMBOLS_FILE]
    assert read_symbols(out_dir) == table
    assert (out_dir / "encoder.onnx").is_file() and (out_dir / "decoder.onnx").is_file()


def test_ctranslate2_export_lists_the_tasks_token_strings(
    symbols_checkpoint: tuple[Path, SymbolTable], tmp_path: Path
) -> None:
    pytest.importorskip("ctranslate2", reason='ctranslate2 is not installed (pip install -e ".[deploy]")')
    from transformer_lab.export import export_checkpoint

    folder, table = symbols_checkpoint
    out_dir = export_checkpoint(as_task(folder, "symbols"), tmp_path / "ct2")
    assert json.loads((out_dir / "source_vocabulary.json").read_text(encoding="utf-8")) == list(table.source_symbols)
    assert json.loads((out_dir / "target_vocabulary.json").read_text(encoding="utf-8")) == list(table.target_symbols)


def test_a_model_kind_the_exporters_cannot_write_is_one_line_naming_the_task(
    symbols_checkpoint: tuple[Path, SymbolTable], tmp_path: Path
) -> None:
    pytest.importorskip("onnx", reason='onnx is not installed (pip install -e ".[deploy]")')
    pytest.importorskip("ctranslate2", reason='ctranslate2 is not installed (pip install -e ".[deploy]")')
    from transformer_lab.export import ctranslate2, onnx

    folder = as_task(symbols_checkpoint[0], "linear")
    with pytest.raises(ValueError) as refused:
        onnx.export_checkpoint(folder, tmp_path / "onnx")
    assert str(refused.value) == (
        f"checkpoint {str(folder)!r}: task 'linear': expected a Seq2SeqTransformer or a TransformerClassifier "
        "(what ONNX export writes), got a Linear"
    )
    with pytest.raises(ValueError) as refused:
        ctranslate2.export_checkpoint(folder, tmp_path / "ct2")
    assert str(refused.value) == (
        f"checkpoint {str(folder)!r}: task 'linear': expected a Seq2SeqTransformer (what CTranslate2 writes), "
        "got a Linear"
    )
    assert not (tmp_path / "onnx").exists() and not (tmp_path / "ct2").exists()


def test_a_task_offering_an_export_without_a_vocabulary_is_refused_when_built() -> None:
    with pytest.raises(
        ValueError,
        match=r"task 'bare': expected a vocabulary \(Task.vocabulary\) with the surfaces \['ctranslate2', 'onnx'\], "
        "got none",
    ):
        toy_task("bare", synthetic_train.load, vocabulary=None)
