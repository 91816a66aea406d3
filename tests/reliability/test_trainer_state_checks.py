"""A ``trainer_state.pt`` of plain data but bad values: refused whole, one line naming the file and the field.

Every random state is tried on a scratch generator of its kind, every optimizer and
schedule field is checked for type and range, before the weights, the optimizer or
``metrics.jsonl`` change; the run folder stays byte for byte what it was.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.reliability.crash_driver import TINY, short_config
from transformer_lab.cli import main
from transformer_lab.tasks.synthetic import train as synthetic_train
from transformer_lab.training import load_trainer_state
from transformer_lab.training.checkpoint import TRAINER_STATE_FILE


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("trainer-state") / "run"
    synthetic_train.train(short_config(4), out)
    return out


def group(state: dict[str, Any]) -> dict[str, Any]:
    return state["optimizer"]["param_groups"][0]


def first_moments(state: dict[str, Any]) -> dict[str, Any]:
    return next(iter(state["optimizer"]["state"].values()))


def python_words(state: dict[str, Any]) -> list[int]:
    return state["rng"]["python"][1]


# name -> (how to spoil a real state, the field the message must name and what it says)
CORRUPTIONS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "torch random state one byte short": (
        lambda state: state["rng"].update(torch=state["rng"]["torch"][:-1]),
        r"rng\.torch: expected a state torch's CPU generator accepts \(Expected a CPUGeneratorImplState of size",
    ),
    "torch random state of zeros (invalid mt19937)": (
        lambda state: state["rng"].update(torch=torch.zeros_like(state["rng"]["torch"])),
        r"rng\.torch: expected a state torch's CPU generator accepts \(Invalid mt19937 state\)",
    ),
    "python random state one word short": (
        lambda state: python_words(state).pop(),
        r"rng\.python: expected a state Python's generator accepts \(state vector is the wrong size\)",
    ),
    "python random state with a position past the words": (
        lambda state: python_words(state).__setitem__(-1, 10**6),
        r"rng\.python: expected a state Python's generator accepts \(invalid state\)",
    ),
    "python random state with a negative word": (
        lambda state: python_words(state).__setitem__(0, -1),
        r"rng\.python: expected a state Python's generator accepts",
    ),
    "python random state of another version": (
        lambda state: state["rng"]["python"].__setitem__(0, 7),
        r"rng\.python: expected a state Python's generator accepts \(state with version 7",
    ),
    "python random state with a NaN cached gaussian": (
        lambda state: state["rng"]["python"].__setitem__(2, float("nan")),
        r"rng\.python: expected \[version, 625 ints, gauss_next None or a finite float\]",
    ),
    "a random state of an unknown kind": (
        lambda state: state["rng"].update(numpy=[1, 2, 3]),
        r"rng: expected only the random states \['torch', 'python', 'cuda'\], got .*numpy",
    ),
    "a CUDA random state that is not bytes": (
        lambda state: state["rng"].update(cuda=torch.zeros(3)),
        r"rng\.cuda: expected a 1-D uint8 tensor",
    ),
    "lr a string": (lambda state: group(state).update(lr="0.1"), r"param_groups\[0\]\.lr: expected a finite number"),
    "lr negative": (lambda state: group(state).update(lr=-1.0), r"param_groups\[0\]\.lr: expected a number >= 0"),
    "lr NaN": (lambda state: group(state).update(lr=float("nan")), r"param_groups\[0\]\.lr: expected a finite"),
    "lr missing": (lambda state: group(state).pop("lr"), r"param_groups\[0\]\.lr: expected the hyperparameter 'lr'"),
    "betas of three": (
        lambda state: group(state).update(betas=(0.9, 0.98, 0.5)),
        r"param_groups\[0\]\.betas: expected a list of 2 item",
    ),
    "a beta of 1.5": (
        lambda state: group(state).update(betas=(1.5, 0.98)),
        r"param_groups\[0\]\.betas\[0\]: expected a number in \[0, 1\)",
    ),
    "eps a list": (lambda state: group(state).update(eps=[1e-9]), r"param_groups\[0\]\.eps: expected a finite number"),
    "weight decay negative": (
        lambda state: group(state).update(weight_decay=-0.1),
        r"param_groups\[0\]\.weight_decay: expected a number >= 0",
    ),
    "amsgrad a number": (lambda state: group(state).update(amsgrad=1), r"param_groups\[0\]\.amsgrad: expected a bool"),
    "foreach a string": (
        lambda state: group(state).update(foreach="yes"),
        r"param_groups\[0\]\.foreach: expected None or a bool",
    ),
    "parameter ids repeated": (
        lambda state: group(state)["params"].__setitem__(1, group(state)["params"][0]),
        r"param_groups\[0\]\.params: expected \d+ distinct parameter ids",
    ),
    "a negative step count in the moments": (
        lambda state: first_moments(state).update(step=torch.tensor(-3.0)),
        r"optimizer\.state\[0\]\.step: expected a finite number >= 0",
    ),
    "integer moments": (
        lambda state: first_moments(state).update(exp_avg=first_moments(state)["exp_avg"].long()),
        r"optimizer\.state\[0\]\.exp_avg: expected a floating-point tensor",
    ),
    "schedule's last rate a string": (
        lambda state: state["scheduler"].update(_last_lr="fast"),
        r"scheduler\._last_lr: expected a list of 1 item",
    ),
    "schedule's base rates too many": (
        lambda state: state["scheduler"].update(base_lrs=[1.0, 1.0]),
        r"scheduler\.base_lrs: expected a list of 1 item",
    ),
    "schedule's step count negative": (
        lambda state: state["scheduler"].update(_step_count=-1),
        r"scheduler\._step_count: expected a number >= 0",
    ),
    "schedule's lambdas not None": (
        lambda state: state["scheduler"].update(lr_lambdas=[True]),
        r"scheduler\.lr_lambdas\[0\]: expected None",
    ),
    "best value NaN": (lambda state: state.update(best_value=float("nan")), r"best_value: expected a finite float"),
    "best metric a number": (lambda state: state.update(best_metric=3), r"best_metric: expected a metric name"),
    "best step negative": (lambda state: state.update(best_step=-1), r"best_step: expected an int >= 0 or None"),
    "best tie loss infinite": (
        lambda state: state.update(best_tie_loss=float("inf")),
        r"best_tie_loss: expected a finite float or None",
    ),
    "a rank's random state spoilt": (
        lambda state: state.update(
            rng_by_rank=[state["rng"], {**state["rng"], "torch": torch.zeros_like(state["rng"]["torch"])}]
        ),
        r"rng_by_rank\[1\]\.torch: expected a state torch's CPU generator accepts \(Invalid mt19937",
    ),
    "train config a list": (lambda state: state.update(train_config=[1]), r"train_config: expected a mapping"),
}


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def spoil(trained: Path, out: Path, name: str) -> None:
    shutil.copytree(trained, out)
    state = load_trainer_state(out / "last")
    CORRUPTIONS[name][0](state)
    torch.save(state, out / "last" / TRAINER_STATE_FILE)


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_a_bad_field_is_refused_naming_the_file_and_the_field_and_nothing_changes(
    trained: Path, tmp_path: Path, name: str
) -> None:
    out = tmp_path / "run"
    spoil(trained, out, name)
    before = snapshot(out)
    with pytest.raises(ValueError, match=CORRUPTIONS[name][1]) as error:
        synthetic_train.train(short_config(6), out, resume=True)
    assert str(error.value).startswith(f"{out / 'last' / TRAINER_STATE_FILE}: ")
    assert snapshot(out) == before


def test_the_real_state_passes_every_check_and_resumes(trained: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(trained, out)
    synthetic_train.train(short_config(6), out, resume=True)
    assert load_trainer_state(out / "last")["global_step"] == 6


@pytest.mark.parametrize("name", ["torch random state of zeros (invalid mt19937)", "lr a string"])
def test_the_command_line_says_it_in_one_line_with_exit_2(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    out = tmp_path / "run"
    spoil(trained, out, name)
    before = snapshot(out)
    # The run's own settings (a resume with other data is refused before the state is read).
    settings = [part for setting in [*TINY, "train.max_steps=6"] for part in ("--set", setting)]
    code = main(["train", "copy", "--out", str(out), "--resume", *settings])
    error = capsys.readouterr().err.strip()
    assert code == 2
    assert error.count("\n") == 0 and "Traceback" not in error
    assert str(out / "last" / TRAINER_STATE_FILE) in error
    # The lock file is the one thing a refused command may leave; the run's files are untouched.
    after = snapshot(out)
    after.pop(".lock", None)
    before.pop(".lock", None)
    assert after == before
