"""Shared fixtures: every test starts from the same random state, and a small checkpoint of each task."""

import os
import random
import signal
from pathlib import Path

import pytest
import torch

from tests.reliability.builders import (
    train_classification_checkpoint,
    train_couplet_checkpoint,
    write_translation_checkpoint,
)

# Tests use tiny models: on a shared 2-core machine one thread is far faster than several
# competing ones, and the numbers do not depend on it. The CLI's main() keeps what
# OMP_NUM_THREADS says, so the commands the tests run stay on one thread too.
os.environ["OMP_NUM_THREADS"] = "1"
torch.set_num_threads(1)

# A suite started in a shell's background (`make test &`) inherits SIGINT ignored, and so would
# every command it starts; the tests of Ctrl-C send SIGINT and expect what a terminal gives.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def prepared_corpus_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Corpora that training prepares go to a folder of the test session, never the user's cache."""
    monkeypatch.setenv("TRANSFORMER_LAB_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture(autouse=True)
def no_user_data_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default data folder is one of the test session that holds nothing, never the user's downloads.

    (Through TRANSFORMER_LAB_DATA, not XDG_CACHE_HOME: matplotlib keeps its font cache there.)
    """
    monkeypatch.setenv("TRANSFORMER_LAB_DATA", str(tmp_path_factory.getbasetemp() / "no-data"))
    monkeypatch.delenv("TRANSFORMER_LAB_MIRROR", raising=False)


@pytest.fixture(autouse=True)
def fixed_seed() -> None:
    random.seed(0)
    torch.manual_seed(0)


# Tests that need an NVIDIA GPU are marked `cuda` (registered in pyproject.toml; `make
# test-gpu` runs only them). Where CUDA is absent they are skipped, saying why, so the
# CPU suite stays what it is on every machine.
_NO_CUDA = "needs CUDA, and torch.cuda.is_available() is False here (make test-gpu runs these on a GPU machine)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(pytest.mark.skip(reason=_NO_CUDA))


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def device(request: pytest.FixtureRequest) -> torch.device:
    """Each device a property must hold on: the CPU always, and a CUDA GPU (the test marked `cuda`)."""
    return torch.device(request.param)


# A small trained checkpoint of each task, built once per test module that asks for it.
@pytest.fixture(scope="module")
def translation_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_translation_checkpoint(tmp_path_factory.mktemp("translation") / "checkpoint")


@pytest.fixture(scope="module")
def couplet_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_couplet_checkpoint(tmp_path_factory.mktemp("couplet"))


@pytest.fixture(scope="module")
def classification_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_classification_checkpoint(tmp_path_factory.mktemp("classification"))
