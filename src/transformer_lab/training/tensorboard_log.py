"""``metrics.jsonl``'s scalars as TensorBoard event files, for a run watched while it trains.

With ``train.tensorboard`` the Trainer mirrors every row it logs into ``out_dir/tensorboard/``
through ``torch.utils.tensorboard``: a ``train`` row's loss, learning rate, gradient norm
and tokens/s under ``train/``, an ``eval`` row's metrics under ``eval/``, each at the row's
optimizer step. ``tensorboard --logdir RUN`` shows them. A resumed run starts a new event
file that tells TensorBoard to drop the old file's points after the resumed step (its
``purge_step``), as ``metrics.jsonl`` drops their rows.

The ``tensorboard`` package is an optional extra (``pip install -e ".[tensorboard]"``);
without it, asking for the log is one error naming that extra.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from transformer_lab.extras import require_extra

__all__ = ["TENSORBOARD_FOLDER", "TensorBoardLog", "require_tensorboard"]

TENSORBOARD_FOLDER = "tensorboard"
# Row keys that place a row rather than measure something.
_POSITION_KEYS = ("event", "step", "epoch")


def require_tensorboard() -> None:
    """Raise a one-line ``MissingExtraError`` naming the extra unless the tensorboard package is importable."""
    require_extra("tensorboard", "train.tensorboard (event files for TensorBoard)")


class TensorBoardLog:
    """Writes the numeric fields of ``metrics.jsonl`` rows as scalars ``<event>/<field>`` at the row's step.

    Args:
        out_dir: the run folder; the events go to ``out_dir/tensorboard/``.
        purge_step: earlier event files' points from this step on are dropped (a resumed run's next step).
    """

    def __init__(self, out_dir: str | Path, purge_step: int | None = None) -> None:
        require_tensorboard()
        from torch.utils.tensorboard import SummaryWriter

        self.folder = Path(out_dir) / TENSORBOARD_FOLDER
        self._writer = SummaryWriter(str(self.folder), purge_step=purge_step, flush_secs=30)

    def append(self, row: Mapping[str, Any]) -> None:
        """Add one row's numbers (bools, None and text are not scalars and are left out)."""
        step = int(row["step"])
        event = str(row.get("event", "train"))
        for name, value in row.items():
            if name in _POSITION_KEYS or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if math.isfinite(value):
                self._writer.add_scalar(f"{event}/{name}", float(value), step)
        if event != "train":
            self._writer.flush()  # evaluations are rare and worth seeing at once

    def close(self) -> None:
        self._writer.close()
