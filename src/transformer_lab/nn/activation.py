"""The feed-forward activation, named as torch names it."""

from __future__ import annotations

from typing import Callable, Union

import torch.nn.functional as F
from torch import Tensor

Activation = Union[str, Callable[[Tensor], Tensor]]

_BY_NAME: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu}


def resolve_activation(activation: Activation) -> Callable[[Tensor], Tensor]:
    """``"relu"`` / ``"gelu"`` to the function; a callable (function or module) passes through."""
    if isinstance(activation, str):
        if activation not in _BY_NAME:
            raise ValueError(f"activation must be 'relu', 'gelu' or a callable, got {activation!r}")
        return _BY_NAME[activation]
    if not callable(activation):
        raise ValueError(f"activation must be 'relu', 'gelu' or a callable, got {type(activation).__name__}")
    return activation
