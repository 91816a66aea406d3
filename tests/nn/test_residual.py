"""residual_sublayers: the paper's post-norm and the pre-norm, the order every layer, the step and the graphs share."""

from __future__ import annotations

import torch
from torch import nn

from transformer_lab.nn.residual import residual_sublayers


def test_post_norm_and_pre_norm_follow_their_formulas() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8)  # [B, L, E]
    norms = [nn.LayerNorm(8) for _ in range(2)]
    sublayers = [nn.Linear(8, 8) for _ in range(2)]
    for norm in norms:  # non-trivial affine parameters, so that the order shows
        nn.init.normal_(norm.weight)
        nn.init.normal_(norm.bias)
    blocks = list(zip(norms, sublayers))
    with torch.no_grad():
        post = norms[1](norms[0](x + sublayers[0](x)) + sublayers[1](norms[0](x + sublayers[0](x))))
        middle = x + sublayers[0](norms[0](x))
        pre = middle + sublayers[1](norms[1](middle))
        assert torch.equal(residual_sublayers(x, blocks, norm_first=False), post)
        assert torch.equal(residual_sublayers(x, blocks, norm_first=True), pre)
        assert not torch.allclose(post, pre)  # the two orders are different functions
