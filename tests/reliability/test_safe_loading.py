"""Loading a checkpoint never unpickles arbitrary objects.

A pickle whose ``__reduce__`` creates a marker file is planted in place of each file of a
checkpoint; each load is refused with a ValueError naming the file, and the marker never
appears. A control shows the payload is real: plain ``pickle.loads`` does create it. A
static check holds the library to ``torch.load(..., weights_only=True)`` and no pickle
loading anywhere.
"""

from __future__ import annotations

import ast
import pickle
import re
from pathlib import Path

import pytest
import torch

from tests.reliability.builders import write_translation_checkpoint
from transformer_lab.cli import main
from transformer_lab.data.tokenizer_pair import JOINT_TOKENIZER_FILE
from transformer_lab.tasks.translation import train as translation_train
from transformer_lab.training import (
    CONFIG_FILE,
    MODEL_FILE,
    TRAINER_STATE_FILE,
    TrainConfig,
    Trainer,
    load_trainer_state,
    save_checkpoint,
)

SOURCE = Path(__file__).resolve().parents[2] / "src" / "transformer_lab"


class CreatesMarker:
    """Unpickling this calls ``open(marker, "w")``: the file appearing proves code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (open, (str(self.marker), "w"))


def malicious_bytes(marker: Path, how: str) -> bytes:
    payload = {"global_step": 1, "optimizer": CreatesMarker(marker)}
    if how == "torch.save":
        path = marker.with_name("payload.pt")
        torch.save(payload, path)
        return path.read_bytes()
    return pickle.dumps(payload, protocol=2)


@pytest.mark.parametrize("how", ["torch.save", "pickle.dumps"])
def test_the_payload_is_real(tmp_path: Path, how: str) -> None:
    marker = tmp_path / "marker"
    data = malicious_bytes(marker, how)
    if how == "torch.save":
        (tmp_path / "unsafe.pt").write_bytes(data)
        torch.load(tmp_path / "unsafe.pt", weights_only=False)
    else:
        pickle.loads(data)
    assert marker.exists()


@pytest.mark.parametrize("how", ["torch.save", "pickle.dumps"])
def test_planted_trainer_state_is_refused_and_never_runs(tmp_path: Path, how: str) -> None:
    marker = tmp_path / "marker"
    model = torch.nn.Linear(2, 2)
    folder = save_checkpoint(tmp_path / "run" / "last", model, {}, trainer_state={"global_step": 1})
    (folder / TRAINER_STATE_FILE).write_bytes(malicious_bytes(marker, how))
    with pytest.raises(ValueError, match=r"trainer_state\.pt'?: refused: expected only tensors"):
        load_trainer_state(folder)
    with pytest.raises(ValueError, match=r"trainer_state\.pt'?: refused"):
        Trainer(
            model,
            TrainConfig(max_steps=1),
            tmp_path / "run",
            lambda m, b: m(b).sum(),
            lambda epoch: [],
            d_model=2,
            resume=True,
        )
    assert not marker.exists()


@pytest.mark.parametrize("planted", [MODEL_FILE, CONFIG_FILE, JOINT_TOKENIZER_FILE])
def test_planted_pickle_in_place_of_weights_config_or_tokenizer_is_refused(
    tmp_path: Path, planted: str, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "marker"
    folder = write_translation_checkpoint(tmp_path / "checkpoint")
    (folder / planted).write_bytes(malicious_bytes(marker, "torch.save"))
    with pytest.raises(ValueError, match=re.escape(planted)):
        translation_train.load_translator(folder)
    assert main(["translate", "--checkpoint", str(folder), "Hallo"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and planted in error[0]
    assert not marker.exists()


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else "?"


def test_the_library_loads_no_pickle_except_weights_only() -> None:
    """Every torch.load in src/ passes weights_only=True; nothing calls pickle.load(s)."""
    torch_loads = 0
    for path in sorted(SOURCE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for call in _calls(tree):
            name = _dotted(call.func)
            assert name not in ("pickle.load", "pickle.loads", "pickle.Unpickler"), f"{path}: {name}"
            if name == "torch.load":
                torch_loads += 1
                flags = {keyword.arg: keyword.value for keyword in call.keywords}
                value = flags.get("weights_only")
                assert (
                    isinstance(value, ast.Constant) and value.value is True
                ), f"{path}:{call.lineno}: torch.load without weights_only=True"
    assert torch_loads >= 1  # the trainer state is read somewhere, and was checked
