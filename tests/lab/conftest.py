"""Fixtures of the lab tests: a tiny model and batch, a tiny checkpoint."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from transformer_lab.lab.mask_experiments import LabSetup, build_lab_setup
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.tasks.synthetic.train import SyntheticConfig, resolve
from transformer_lab.training import config_to_dict, save_checkpoint


@pytest.fixture(scope="module")
def tiny_setup() -> LabSetup:
    """A random 2-layer model (d_model 16, 2 heads) and a synthetic batch with padding."""
    return build_lab_setup(batch_size=5, d_model=16, nhead=2, num_layers=2, seed=0)


def write_tiny_checkpoint(folder: Path, max_len: int | None = None) -> Path:
    """A synthetic-task checkpoint folder as the Trainer writes it (random weights); ``max_len``: its table's."""
    config = SyntheticConfig()
    config = dataclasses.replace(
        config,
        model=dataclasses.replace(
            config.model, d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=32
        ),
    )
    config = resolve(config)
    if max_len is not None:  # after resolve, which raises it to fit the task's sequences
        config = dataclasses.replace(config, model=dataclasses.replace(config.model, max_len=max_len))
    torch.manual_seed(0)
    model = Seq2SeqTransformer.from_config(config.model)
    return save_checkpoint(folder, model, {"task": "synthetic", **config_to_dict(config)})


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_checkpoint(tmp_path_factory.mktemp("checkpoint") / "last")
