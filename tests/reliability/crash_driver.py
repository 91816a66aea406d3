"""A tiny copy-task training run that SIGKILLs itself at a chosen moment (run as a subprocess).

    python crash_driver.py OUT_DIR [--resume] [--kill-in-save N | --kill-between-renames N | --kill-at-step S]

--kill-in-save N          die while the N-th weights file of this process is half written
--kill-between-renames N  die at the N-th save that has renamed the old folder aside and not
                          yet renamed the new one in (the one window where the name is absent)
--kill-at-step S          die right after optimizer step S, between checkpoints

The run is deterministic (fixed seeds, one thread), so the test can compare it with an
uninterrupted run of the same config (``tiny_config``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
from pathlib import Path

import torch

from transformer_lab.tasks.synthetic import train as synthetic_train
from transformer_lab.training import apply_overrides
from transformer_lab.training import checkpoint as checkpoint_module
from transformer_lab.training import trainer as trainer_module

TINY = [
    "data.num_train=96",
    "data.num_validation=8",
    "data.num_test=8",
    "data.max_length=5",
    "data.batch_size=16",
    "model.d_model=16",
    "model.nhead=2",
    "model.num_encoder_layers=1",
    "model.num_decoder_layers=1",
    "model.dim_feedforward=32",
    "model.dropout=0.1",  # dropout draws on the RNG, so resume must restore it exactly
    "train.epochs=0",
    "train.max_steps=16",
    "train.warmup_steps=4",
    "train.eval_every_steps=3",
    "train.keep_last=2",
    "train.log_every_steps=1",
    "train.progress_bar=false",
]


def tiny_config() -> synthetic_train.SyntheticConfig:
    return apply_overrides(synthetic_train.default_config("copy"), TINY)


def short_config(max_steps: int) -> synthetic_train.SyntheticConfig:
    """:func:`tiny_config` stopped after ``max_steps`` optimizer steps."""
    config = tiny_config()
    return dataclasses.replace(config, train=dataclasses.replace(config.train, max_steps=max_steps))


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _kill_in_save(number: int) -> None:
    real_save_model = checkpoint_module.save_model
    calls = {"count": 0}

    def save_model_then_die(model: torch.nn.Module, filename: str, *args: object, **kwargs: object) -> None:
        real_save_model(model, filename, *args, **kwargs)
        calls["count"] += 1
        if calls["count"] == number:
            data = Path(filename).read_bytes()
            Path(filename).write_bytes(data[: len(data) // 2])  # half a file on disk, then death
            _die()

    checkpoint_module.save_model = save_model_then_die


def _kill_between_renames(number: int) -> None:
    real_rename = os.rename
    calls = {"count": 0}

    def rename_or_die(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
        source, target = Path(source), Path(target)
        swapping_in = source.name.startswith(f".{target.name}.tmp-")
        old_aside = any(path.name.startswith(f".{target.name}.old-") for path in target.parent.iterdir())
        if swapping_in and old_aside and not target.exists():
            calls["count"] += 1
            if calls["count"] == number:
                _die()
        real_rename(source, target)

    checkpoint_module.os.rename = rename_or_die  # the module's `os` is the os module itself


def _kill_at_step(step: int) -> None:
    real_step = trainer_module.Trainer._optimizer_step

    def step_then_maybe_die(self: trainer_module.Trainer, contributed: int) -> bool:
        stepped = real_step(self, contributed)
        if stepped and self.global_step == step:
            _die()
        return stepped

    trainer_module.Trainer._optimizer_step = step_then_maybe_die


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--kill-in-save", type=int)
    parser.add_argument("--kill-between-renames", type=int)
    parser.add_argument("--kill-at-step", type=int)
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    if arguments.kill_in_save:
        _kill_in_save(arguments.kill_in_save)
    if arguments.kill_between_renames:
        _kill_between_renames(arguments.kill_between_renames)
    if arguments.kill_at_step:
        _kill_at_step(arguments.kill_at_step)
    synthetic_train.train(tiny_config(), arguments.out_dir, resume=arguments.resume)


if __name__ == "__main__":
    main()
