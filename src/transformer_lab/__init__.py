"""transformer_lab: the Transformer of "Attention Is All You Need", from scratch in PyTorch.

``Translator``, ``Classifier`` and ``CoupletWriter`` (``transformer_lab.api``) hold a checkpoint ready to use;
they are imported on first use, so ``import transformer_lab`` stays light.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["Classifier", "CoupletWriter", "Translator", "__version__"]


def __getattr__(name: str) -> Any:
    if name in ("Translator", "Classifier", "CoupletWriter"):
        from transformer_lab import api

        return getattr(api, name)
    raise AttributeError(f"module 'transformer_lab' has no attribute {name!r}")
