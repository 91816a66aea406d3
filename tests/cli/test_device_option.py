"""--device on evaluate, translate, classify, couplet and serve: parsed alike, checked first, passed to the model.

The checkpoints are the tiny ones of ``tests/reliability/builders.py``. On the CPU the
commands run with ``--device cpu`` and print what they print with ``auto`` on a machine
without CUDA; the tests marked ``cuda`` run them on a GPU and compare with the CPU.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.reliability.builders import (
    write_translation_checkpoint,
)
from transformer_lab.cli import build_parser, main
from transformer_lab.serve import load_served_models
from transformer_lab.tasks.translation.predict import TranslateRequest

# Each command that runs a model, as far as its task argument; evaluate's task is any.
COMMANDS = {
    "translate": ["translate"],
    "couplet": ["couplet"],
    "classify": ["classify"],
    "evaluate": ["evaluate", "translation"],
    "serve": ["serve"],
}
SENTENCES = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee."]
UPPER_LINES = ["春风得意马蹄疾", "海阔凭鱼跃"]
NEWS = ["shares profit merger", "goal league match"]


class _UnreadableStdin:
    """stdin that fails the test if a command reads it (the device must be checked first)."""

    @property
    def buffer(self) -> io.BytesIO:
        raise AssertionError("the command read stdin before checking --device")


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine as one without CUDA, whatever it has: auto is the CPU, cuda is refused."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture(scope="module")
def source_and_reference(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """evaluate translation's --source and --reference options, on two sentences."""
    folder = tmp_path_factory.mktemp("test-set")
    source, reference = folder / "test.de", folder / "test.en"
    source.write_text("".join(line + "\n" for line in SENTENCES), encoding="utf-8")
    reference.write_text("A man rides a bike.\nTwo dogs play in the snow.\n", encoding="utf-8")
    return ["--source", str(source), "--reference", str(reference)]


def _parse(command: str, *options: str) -> argparse.Namespace:
    return build_parser().parse_args([*COMMANDS[command], "--checkpoint", "runs/anything", *options])


def _printed(arguments: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    capsys.readouterr()
    assert main(arguments) == 0, capsys.readouterr().err
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_each_command_parses_device_with_default_auto(command: str) -> None:
    assert _parse(command).device == "auto"
    for given in ("cpu", "cuda", "cuda:1", "auto"):
        assert _parse(command, "--device", given).device == given
    # One declaration (cli/device_option.py) behind every command: the same help everywhere.
    subparsers = next(action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction))
    helps = {
        name: next(action.help for action in subparsers.choices[name]._actions if "--device" in action.option_strings)
        for name in ("translate", "couplet", "classify", "evaluate", "serve")
    }
    assert len(set(helps.values())) == 1


@pytest.mark.parametrize("command", list(COMMANDS))
def test_cuda_without_cuda_is_one_line_naming_device_before_anything_is_read(
    command: str,
    no_cuda: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(sys, "stdin", _UnreadableStdin())
    # The checkpoint does not exist either: the device is what is checked first.
    arguments = [*COMMANDS[command], "--checkpoint", str(tmp_path / "missing")]
    assert main([*arguments, "--device", "cuda"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Traceback" not in error
    assert error.startswith(
        f"transformer-lab {command}: error: --device: expected a device this machine has, got 'cuda', "
        "but torch.cuda.is_available() is False"
    ), error
    assert main([*arguments, "--device", "gpu"]) == 2
    assert "--device: expected one of auto, cpu, cuda, cuda:N (N: a GPU's index, from 0), got 'gpu'" in (
        capsys.readouterr().err
    )


def test_translate_couplet_and_classify_run_with_device_cpu_as_with_auto_here(
    translation_checkpoint: Path,
    couplet_checkpoint: Path,
    classification_checkpoint: Path,
    no_cuda: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for arguments in (
        ["translate", "--checkpoint", str(translation_checkpoint), *SENTENCES],
        ["translate", "--checkpoint", str(translation_checkpoint), "--nbest", "2", *SENTENCES],
        ["couplet", "--checkpoint", str(couplet_checkpoint), *UPPER_LINES],
        ["classify", "--checkpoint", str(classification_checkpoint), *NEWS],
    ):
        on_cpu = _printed([*arguments, "--device", "cpu"], capsys)
        assert on_cpu and on_cpu == _printed(arguments, capsys), arguments


def test_evaluate_runs_with_device_cpu_as_with_auto_here(
    translation_checkpoint: Path,
    couplet_checkpoint: Path,
    classification_checkpoint: Path,
    source_and_reference: list[str],
    no_cuda: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for arguments in (
        ["evaluate", "translation", "--checkpoint", str(translation_checkpoint), *source_and_reference],
        ["evaluate", "couplet", "--checkpoint", str(couplet_checkpoint), "--beam", "1"],
        ["evaluate", "classification", "--checkpoint", str(classification_checkpoint)],
    ):
        on_cpu = _printed([*arguments, "--device", "cpu"], capsys)
        assert on_cpu and on_cpu == _printed(arguments, capsys), arguments


def test_serve_loads_every_model_on_the_device(
    translation_checkpoint: Path, couplet_checkpoint: Path, classification_checkpoint: Path, no_cuda: None
) -> None:
    checkpoints = [
        f"translation={translation_checkpoint}",
        f"couplet={couplet_checkpoint}",
        f"classification={classification_checkpoint}",
    ]
    for device in ("cpu", "auto"):
        served = load_served_models(checkpoints, device=device)
        for model in served.values():
            handler: Any = model.handler  # every task's handler holds its predictor, which holds its model
            assert {parameter.device for parameter in handler.predictor.model.parameters()} == {torch.device("cpu")}
    with pytest.raises(ValueError, match=r"^device: expected a device this machine has, got 'cuda'"):
        load_served_models(checkpoints, device="cuda")


@pytest.mark.cuda
def test_on_cuda_the_commands_print_what_they_print_on_the_cpu(
    translation_checkpoint: Path,
    couplet_checkpoint: Path,
    classification_checkpoint: Path,
    source_and_reference: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # fp32 on both: auto would be bf16 on most GPUs and fp32 on many CPUs.
    for arguments in (
        ["translate", "--checkpoint", str(translation_checkpoint), *SENTENCES],
        ["translate", "--checkpoint", str(translation_checkpoint), "--nbest", "2", *SENTENCES],
        ["couplet", "--checkpoint", str(couplet_checkpoint), *UPPER_LINES],
        ["evaluate", "translation", "--checkpoint", str(translation_checkpoint), *source_and_reference],
        ["evaluate", "couplet", "--checkpoint", str(couplet_checkpoint), "--beam", "1"],
    ):
        on_cpu = _printed([*arguments, "--precision", "fp32", "--device", "cpu"], capsys)
        on_cuda = _printed([*arguments, "--precision", "fp32", "--device", "cuda"], capsys)
        assert on_cuda == on_cpu, arguments
        assert _printed([*arguments, "--precision", "fp32"], capsys) == on_cuda  # auto is the GPU
    # The classifier's probabilities are printed to 4 decimals; a GPU's float sums may round
    # the last one the other way, so the labels must agree and the probabilities be close.
    classify = ["classify", "--checkpoint", str(classification_checkpoint), "--precision", "fp32", *NEWS]
    lines = {device: _printed([*classify, "--device", device], capsys) for device in ("cpu", "cuda")}
    for line_cpu, line_cuda in zip(lines["cpu"], lines["cuda"], strict=True):
        (label_cpu, shares_cpu), (label_cuda, shares_cuda) = line_cpu.split("\t"), line_cuda.split("\t")
        assert label_cuda == label_cpu
        numbers = [[float(item.split("=")[1]) for item in shares.split(" ")] for shares in (shares_cpu, shares_cuda)]
        assert numbers[1] == pytest.approx(numbers[0], abs=2e-4)
    evaluate = ["evaluate", "classification", "--checkpoint", str(classification_checkpoint), "--precision", "fp32"]
    accuracy = {device: _printed([*evaluate, "--device", device], capsys)[1] for device in ("cpu", "cuda")}
    assert accuracy["cuda"] == accuracy["cpu"] and accuracy["cpu"].startswith("accuracy ")


@pytest.mark.cuda
def test_on_cuda_serve_keeps_its_models_and_their_attention_there(tmp_path: Path) -> None:
    # The pane decodes at the checkpoint's precision: fp32 here, to compare with the CPU.
    checkpoint = write_translation_checkpoint(tmp_path / "checkpoint", overrides=["decode.precision=fp32"])
    request = TranslateRequest(text=SENTENCES[0], strategy="beam", beam_size=2)
    answers = {}
    for device in ("cpu", "cuda"):
        (served,) = load_served_models([f"translation={checkpoint}"], device=device).values()
        handler: Any = served.handler  # a TranslationHandler
        assert {parameter.device.type for parameter in handler.predictor.model.parameters()} == {device}
        answers[device] = handler.translate(request)  # the best candidate's cross-attention included
    ids = {device: [candidate["ids"] for candidate in answer["candidates"]] for device, answer in answers.items()}
    assert ids["cuda"] == ids["cpu"]
    weights = {device: torch.tensor(answer["attention"]["weights"]) for device, answer in answers.items()}
    torch.testing.assert_close(weights["cuda"], weights["cpu"], rtol=0, atol=2e-4)
