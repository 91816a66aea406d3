"""The residual blocks a Transformer layer is made of, post-norm or pre-norm, written once.

Every layer (the encoder's two sublayers, the decoder's three), the decoder's
single-position step (:mod:`~transformer_lab.nn.decoder_step`) and the exported ONNX graphs
(:mod:`transformer_lab.export.onnx`) run their sublayers through :func:`residual_sublayers`,
so that the order of norm, sublayer and sum is decided in one place.

Shape legend: E d_model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from torch import Tensor

__all__ = ["Sublayer", "residual_sublayers"]

# A norm or a sublayer: [.., E] -> [.., E].
Sublayer = Callable[[Tensor], Tensor]


def residual_sublayers(x: Tensor, blocks: Sequence[tuple[Sublayer, Sublayer]], norm_first: bool) -> Tensor:
    """``x`` through each ``(norm, sublayer)`` pair of ``blocks`` in turn, each in its residual block.

    ``norm_first=False`` is the paper's post-norm, ``x = norm(x + sublayer(x))``;
    ``norm_first=True`` the pre-norm of the Annotated Transformer, ``x = x + sublayer(norm(x))``.

    Shape:
        x ``[.., E]`` -> ``[.., E]``.
    """
    for norm, sublayer in blocks:
        x = x + sublayer(norm(x)) if norm_first else norm(x + sublayer(x))
    return x
