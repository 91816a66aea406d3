"""The random states a training run depends on: captured into a checkpoint, restored on resume.

A run draws from torch's CPU generator (dropout, initialisation), the CUDA generator of its
device when it trains there, and Python's ``random``. NumPy's is not captured: this package
does not use it. :class:`RandomState` holds one snapshot of them; :meth:`RandomState.to_dict`
is the form stored in ``trainer_state.pt`` (``{"torch", "python"[, "cuda"]}``), plain
tensors and lists, so that ``weights_only`` loading accepts it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
from collections.abc import Iterator, Mapping
from typing import Any

import torch

__all__ = ["RandomState", "isolated_rng", "seed_all"]


@dataclasses.dataclass(frozen=True)
class RandomState:
    """One snapshot of torch's, Python's and (on a CUDA device) CUDA's random generators.

    ``python_state`` is ``random.getstate()`` as ``[version, list of 625 ints, gauss_next]``:
    lists, not tuples, because that is what the checkpoints hold.
    """

    torch_state: torch.Tensor
    python_state: list[Any]
    cuda_state: torch.Tensor | None = None

    @classmethod
    def capture(cls, device: torch.device) -> RandomState:
        """The generators' states now; CUDA's only when ``device`` is a CUDA device."""
        version, internal_state, gauss_next = random.getstate()
        cuda_state = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        return cls(torch.get_rng_state(), [version, list(internal_state), gauss_next], cuda_state)

    def restore(self, device: torch.device) -> None:
        """Set the generators back to this snapshot (CUDA's when both it and ``device`` are CUDA)."""
        # A state loaded with map_location onto a GPU must come back to the CPU for set_rng_state.
        torch.set_rng_state(self.torch_state.cpu())
        version, internal_state, gauss_next = self.python_state
        random.setstate((version, tuple(internal_state), gauss_next))
        if device.type == "cuda" and self.cuda_state is not None:
            torch.cuda.set_rng_state(self.cuda_state.cpu(), device)

    def to_dict(self) -> dict[str, Any]:
        """The checkpoint form: ``{"torch": tensor, "python": [...]}``, plus ``"cuda"`` if captured."""
        state: dict[str, Any] = {"torch": self.torch_state, "python": self.python_state}
        if self.cuda_state is not None:
            state["cuda"] = self.cuda_state
        return state

    @classmethod
    def from_dict(cls, state: Mapping[str, Any]) -> RandomState:
        """The inverse of :meth:`to_dict`; ``TrainerState.read`` has checked the fields."""
        return cls(state["torch"], list(state["python"]), state.get("cuda"))


def seed_all(seed: int) -> None:
    """Seed torch's generators (CPU and every CUDA device) and Python's ``random`` with ``seed``."""
    random.seed(seed)
    torch.manual_seed(seed)


@contextlib.contextmanager
def isolated_rng(device: torch.device) -> Iterator[None]:
    """Run a block with torch's (and ``device``'s CUDA) and Python's random states restored afterwards.

    Evaluation draws random numbers too (a sampler, a shuffled subset); restoring them
    makes evaluating, or not, leave the training trajectory unchanged.
    """
    python_state = random.getstate()
    devices = []
    if device.type == "cuda":
        devices = [device.index if device.index is not None else torch.cuda.current_device()]
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(python_state)
