"""resolve_device: auto is CUDA where present, else the CPU; a device this machine lacks is one clear error."""

from __future__ import annotations

import pytest
import torch

from transformer_lab.devices import resolve_device
from transformer_lab.training.distributed import DataParallel


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine as one without CUDA, whatever it has."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine as one with a single CUDA GPU, whatever it has (nothing is placed on it)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)


def test_auto_follows_what_this_machine_has() -> None:
    expected = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("auto") == expected


def test_without_cuda_auto_is_the_cpu_and_cuda_is_refused_by_name(no_cuda: None) -> None:
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cpu") == resolve_device(torch.device("cpu")) == torch.device("cpu")
    assert resolve_device(torch.device("cpu", 0)) == torch.device("cpu")  # torch's own name of the one CPU
    for asked in ("cuda", "cuda:0", torch.device("cuda", 0)):
        with pytest.raises(
            ValueError,
            match=r"^--device: expected a device this machine has, got 'cuda(:0)?', "
            r"but torch\.cuda\.is_available\(\) is False",
        ):
            resolve_device(asked, name="--device")


def test_with_one_gpu_auto_and_cuda_are_it_and_a_second_index_is_refused(one_gpu: None) -> None:
    assert resolve_device("auto") == resolve_device("cuda") == torch.device("cuda")
    assert resolve_device("cuda:0") == torch.device("cuda", 0)
    assert resolve_device("cpu") == torch.device("cpu")  # asked for, the CPU is taken even beside a GPU
    with pytest.raises(
        ValueError, match=r"^device: expected a CUDA index below 1 \(this machine's GPU count\), got 'cuda:1'"
    ):
        resolve_device("cuda:1")


@pytest.mark.parametrize("asked", ["gpu", "CPU", "cuda:", "cuda:-1", "cuda:0:1", " cpu", "mps", "", 0, None])
def test_anything_else_names_the_choices(asked: object) -> None:
    with pytest.raises(ValueError, match=r"^device: expected one of auto, cpu, cuda, cuda:N.*got"):
        resolve_device(asked)  # type: ignore[arg-type]


def test_under_torchrun_cuda_is_the_ranks_own_gpu_before_the_model_moves(monkeypatch: pytest.MonkeyPatch) -> None:
    # Was a bare "cuda" for every rank's first move: each opened a context and left memory on GPU 0.
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert DataParallel.launch_device(torch.device("cuda")) == torch.device("cuda")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert DataParallel.launch_device(torch.device("cuda")) == torch.device("cuda", 1)
    assert DataParallel.launch_device(torch.device("cpu")) == torch.device("cpu")
