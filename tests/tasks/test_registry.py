"""One checkpoint loader for every task: tasks.registry picks the task from config.json."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import torch

from tests.reliability.builders import (
    train_classification_checkpoint,
    train_couplet_checkpoint,
    write_translation_checkpoint,
)
from transformer_lab.cli import main
from transformer_lab.data import TokenizerPair, Vocabulary
from transformer_lab.lab.checkpoints import load_seq2seq_checkpoint
from transformer_lab.models import Seq2SeqTransformer, TransformerClassifier
from transformer_lab.tasks import registry
from transformer_lab.tasks.couplet import train as couplet_train
from transformer_lab.tasks.registry import checkpoint_task, load_trained
from transformer_lab.tasks.translation import train as translation_train
from transformer_lab.training import CONFIG_FILE


def same_weights(first: torch.nn.Module, second: torch.nn.Module) -> bool:
    left, right = first.state_dict(), second.state_dict()
    return left.keys() == right.keys() and all(torch.equal(left[key], right[key]) for key in left)


def test_each_task_is_rebuilt_by_its_own_loader(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    translation_folder = write_translation_checkpoint(tmp_path / "translation")
    couplet_folder = train_couplet_checkpoint(tmp_path / "couplet")
    classification_folder = train_classification_checkpoint(tmp_path / "classification")

    trained = load_trained(translation_folder)
    assert (
        trained.task == translation_train.TASK_NAME
        and isinstance(trained.vocabulary, TokenizerPair)
        and trained.vocabulary.is_joint
    )
    assert same_weights(trained.model, translation_train.load_translator(translation_folder)[0])

    trained = load_trained(couplet_folder.parent)  # a run folder: its best/
    assert trained.task == couplet_train.TASK_NAME and trained.folder.name == "best"
    assert isinstance(trained.vocabulary, Vocabulary) and isinstance(trained.model, Seq2SeqTransformer)

    trained = load_trained(classification_folder)
    assert isinstance(trained.model, TransformerClassifier) and not trained.model.training

    # The lab takes any sequence-to-sequence checkpoint, and refuses a classifier by its task.
    assert same_weights(load_seq2seq_checkpoint(couplet_folder), couplet_train.load(couplet_folder)[0])
    # Named by the task names the commands take (copy, reverse, sort), not the "synthetic" their checkpoints record.
    with pytest.raises(
        ValueError,
        match=r"^checkpoint \S+: expected a checkpoint of couplet, copy, reverse, sort or translation, "
        r"got task 'classification'$",
    ):
        load_seq2seq_checkpoint(classification_folder)
    # The lab command names its option.
    assert main(["lab", "tgt-padding-mask", "--checkpoint", str(classification_folder)]) == 2
    assert capsys.readouterr().err.startswith(f"transformer-lab lab: error: --checkpoint {classification_folder}: ")


def test_an_unknown_task_is_named(tmp_path: Path) -> None:
    folder = write_translation_checkpoint(tmp_path / "translation")
    config = (folder / CONFIG_FILE).read_text(encoding="utf-8").replace('"task": "translation"', '"task": "summaries"')
    (folder / CONFIG_FILE).write_text(config, encoding="utf-8")
    with pytest.raises(ValueError, match="got task 'summaries'"):
        checkpoint_task(folder)


def test_a_vocabulary_of_another_size_is_refused_naming_both_files(tmp_path: Path) -> None:
    folder = train_couplet_checkpoint(tmp_path / "couplet")
    vocabulary = Vocabulary.load(folder / couplet_train.VOCABULARY_FILE)
    Vocabulary(vocabulary.tokens[4:-1]).save(folder / couplet_train.VOCABULARY_FILE)
    with pytest.raises(
        ValueError, match=r"config.json: model.src_vocab_size must equal the \d+ entries of .*vocabulary.txt"
    ):
        couplet_train.load(folder)


def test_a_task_registered_for_a_block_is_taken_out_after_it_even_on_an_error() -> None:
    copy = registry.TASKS["copy"]
    renamed = dataclasses.replace(copy, name="copy-again")
    with pytest.raises(RuntimeError, match="inside"), registry.registered(renamed):
        assert registry.task_named("copy-again") is renamed
        raise RuntimeError("inside")
    assert "copy-again" not in registry.TASKS
    # A name taken refuses the block, and what the block added before it is taken out.
    with pytest.raises(ValueError, match="task 'copy': expected a new task name"):
        with registry.registered(dataclasses.replace(copy, name="copy-third"), copy):
            pass
    assert "copy-third" not in registry.TASKS and registry.TASKS["copy"] is copy


def test_every_task_package_is_found_by_package_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert [task.name for task in registry.package_tasks()] == list(registry.TASKS)
    # A package dropped under tasks/ is found with no line elsewhere; one without TASK is named.
    import transformer_lab.tasks

    (tmp_path / "aardvark").mkdir()
    (tmp_path / "aardvark" / "__init__.py").write_text(
        "import dataclasses\nfrom transformer_lab.tasks import synthetic\n\n"
        "TASK = dataclasses.replace(synthetic.TASKS[0], name='aardvark')\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(transformer_lab.tasks, "__path__", [*transformer_lab.tasks.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "transformer_lab.tasks.aardvark", raising=False)
    assert [task.name for task in registry.package_tasks()][:2] == ["aardvark", "classification"]
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "__init__.py").write_text('"""No task here."""\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"empty/__init__.py: expected a task package to define TASK \(or TASKS\)"):
        registry.package_tasks()
    for name in ("transformer_lab.tasks.aardvark", "transformer_lab.tasks.empty"):
        sys.modules.pop(name, None)
