"""The smallest copy-task run the reliability tests train: a few steps of a one-layer model."""

from __future__ import annotations


def tiny_copy_options(max_steps: int = 2, **settings: object) -> list[str]:
    """``--set`` options for a copy run of ``max_steps`` steps; ``settings`` adds or overrides (``train__x=1``)."""
    values: dict[str, object] = {
        "train.max_steps": max_steps,
        "train.epochs": 0,
        "data.num_train": 64,
        "model.d_model": 16,
        "model.nhead": 2,
        "model.num_encoder_layers": 1,
        "model.num_decoder_layers": 1,
        "model.dim_feedforward": 32,
        "train.progress_bar": "false",
    }
    values.update({key.replace("__", "."): value for key, value in settings.items()})
    return [part for key, value in values.items() for part in ("--set", f"{key}={value}")]
