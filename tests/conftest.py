"""Shared fixtures: every test starts from the same random state."""

import random

import pytest
import torch


@pytest.fixture(autouse=True)
def fixed_seed() -> None:
    random.seed(0)
    torch.manual_seed(0)
