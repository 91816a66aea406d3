"""Checks of the modules' constructor arguments and inputs, each error naming the argument.

The kinds are torch's: a value of the wrong type is a ``TypeError``, a value out of range
a ``ValueError``. Constructor checks run once; the input checks run at every call, so they
compare types and dtypes only and never read a tensor's values.
"""

from __future__ import annotations

import math
import numbers
from typing import TypeGuard

import torch
from torch import Tensor

__all__ = [
    "is_int",
    "check_size",
    "check_layer_sizes",
    "check_num_layers",
    "check_optional_size",
    "check_dropout",
    "check_epsilon",
    "check_flag",
    "check_optional_flag",
    "check_tensor",
    "check_input_dtype",
    "check_input",
]


def is_int(value: object) -> TypeGuard[int]:
    """Whether ``value`` is an int of Python or numpy; a bool is not (``True`` heads would be one head)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_flag(name: str, value: object) -> bool:
    """``value`` as a bool, if it is one (Python's or numpy's): ``batch_first="no"`` is a true string, and was
    read as True."""
    numpy_bool = type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_")
    if not (isinstance(value, bool) or numpy_bool):
        raise TypeError(f"{name}: expected a bool, got {value!r}")
    return bool(value)


def check_optional_flag(name: str, value: object) -> bool | None:
    """``value`` as a bool, or None (a forward's "decide for me"); anything else, a true string too, is refused."""
    if value is None:
        return None
    try:
        return check_flag(name, value)
    except TypeError:
        raise TypeError(f"{name}: expected a bool or None, got {value!r}") from None


def check_size(name: str, value: object) -> int:
    """``value`` as an int, if it is an int (not a bool) of at least 1."""
    if not is_int(value):
        raise TypeError(f"{name}: expected an int >= 1, got {value!r}")
    if value < 1:
        raise ValueError(f"{name}: expected an int >= 1, got {value!r}")
    return int(value)


def check_layer_sizes(
    d_model: object, nhead: object, dim_feedforward: object, layer_norm_eps: object
) -> tuple[int, int, int]:
    """An encoder or decoder layer's ``d_model``, ``nhead`` and ``dim_feedforward`` as ints, ``layer_norm_eps`` checked.

    Under the layer's own names, before MultiheadAttention would name them embed_dim and num_heads.
    """
    sizes = check_size("d_model", d_model), check_size("nhead", nhead), check_size("dim_feedforward", dim_feedforward)
    check_epsilon("layer_norm_eps", layer_norm_eps)
    return sizes


def check_num_layers(num_layers: object) -> int:
    """An encoder or decoder stack's ``num_layers``, itself, if it is an int (not a bool) >= 1."""
    if not is_int(num_layers):
        raise TypeError(f"num_layers: expected an int >= 1, got {num_layers!r}")
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    return num_layers


def check_optional_size(name: str, value: object) -> int | None:
    """``value`` as an int >= 1, or None."""
    if value is None:
        return None
    if not is_int(value):
        raise TypeError(f"{name}: expected an int >= 1 or None, got {value!r}")
    if value < 1:
        raise ValueError(f"{name}: expected an int >= 1 or None, got {value!r}")
    return int(value)


def check_dropout(name: str, value: object) -> float:
    """``value`` as a float, if it is a number in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a float in [0, 1), got {value!r}")
    if not 0.0 <= float(value) < 1.0:
        raise ValueError(f"{name}: expected a float in [0, 1), got {value!r}")
    return float(value)


def check_epsilon(name: str, value: object) -> None:
    """Refuse anything but a finite number >= 0 (a LayerNorm's ``eps`` is added to the variance)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a float >= 0, got {value!r}")
    if not (math.isfinite(value) and float(value) >= 0.0):
        raise ValueError(f"{name}: expected a finite float >= 0, got {value!r}")


def check_tensor(name: str, value: object) -> None:
    """Refuse anything but a tensor (a numpy array or a list has none of the attributes used after)."""
    if not isinstance(value, Tensor):
        kind = type(value)
        kind_name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
        raise TypeError(f"{name}: expected a torch.Tensor, got {kind_name}")


def check_input_dtype(name: str, tensor: Tensor, weight: object, module: str) -> None:
    """Refuse an input whose dtype differs from ``weight``'s, one of the module's parameters, unless autocast casts it.

    Otherwise the first matrix product fails with "mat1 and mat2 must have the same dtype",
    naming neither the input nor the module. A ``weight`` that is no tensor (a quantized
    layer's is a method, and takes float inputs) is not compared.
    """
    if not isinstance(weight, Tensor):
        return
    expected = weight.dtype
    if tensor.dtype != expected and not torch.is_autocast_enabled(tensor.device.type):
        # Only a floating module makes sense: an integer input is to be converted, never the module.
        remedy = f"convert the input, or the module with .to({tensor.dtype})" if tensor.is_floating_point() else ""
        raise ValueError(
            f"{name}: expected dtype {expected} (the dtype of the {module}'s parameters), got {tensor.dtype}; "
            + (remedy or "convert the input")
        )


def check_input(name: str, value: object, weight: object, module: str) -> None:
    """:func:`check_tensor`, then :func:`check_input_dtype`; callers test the common case inline first."""
    check_tensor(name, value)
    assert isinstance(value, Tensor)  # check_tensor raised otherwise
    check_input_dtype(name, value, weight, module)
