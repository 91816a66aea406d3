"""The trained model both exporters' tests compare against, trained once for the folder.

A reverse-task model trained for 300 steps (about 10 s on one thread): its outputs depend
on the source, the positions and the cross-attention, so an exporter that got any of them
wrong changes them.
"""

from __future__ import annotations

import pytest
import torch

from transformer_lab.tasks.synthetic import train as synthetic_train
from transformer_lab.training import apply_overrides

REVERSE_RUN = [
    "data.num_train=4000",
    "data.num_validation=32",
    "data.num_test=64",
    "data.max_length=8",
    "data.batch_size=32",
    "model.d_model=32",
    "model.nhead=4",
    "model.num_encoder_layers=2",
    "model.num_decoder_layers=2",
    "model.dim_feedforward=64",
    "model.dropout=0.0",
    "train.epochs=0",
    "train.max_steps=300",
    "train.warmup_steps=100",
    "train.lr_factor=1.0",
    "train.eval_every_steps=300",
    "train.keep_last=0",
    "train.log_every_steps=1000",
    "train.progress_bar=false",
]


@pytest.fixture(scope="package")
def reverse_training(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The trained model (eval mode), its run folder, and 20 held-out sources with their targets."""
    root = tmp_path_factory.mktemp("reverse")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the run is then deterministic; the other tests get their threads back
    try:
        result = synthetic_train.train(
            apply_overrides(synthetic_train.default_config("reverse"), REVERSE_RUN), root / "run"
        )
    finally:
        torch.set_num_threads(threads)
    return {
        "model": result.model.eval(),
        "run": root / "run",
        "root": root,
        "sources": [source for source, _ in result.data.test[:20]],
        "targets": [target for _, target in result.data.test[:20]],
    }
