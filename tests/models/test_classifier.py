"""TransformerClassifier: padding never leaks into the pooled vector."""

from __future__ import annotations

import pytest
import torch

from transformer_lab.models import TransformerClassifier


@pytest.mark.parametrize("pooling", ["mean", "first"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_extra_padding_changes_no_logit(pooling: str, norm_first: bool) -> None:
    model = TransformerClassifier(20, 4, d_model=16, nhead=2, num_layers=2, dim_feedforward=32, pooling=pooling, norm_first=norm_first).eval()
    ids = torch.tensor([[4, 5, 6, 0], [7, 8, 9, 10]])
    logits = model(ids)
    assert logits.shape == (2, 4)
    padded = torch.cat([ids, torch.zeros(2, 5, dtype=torch.long)], dim=1)
    assert torch.allclose(model(padded), logits, atol=1e-5)


def test_all_padding_row_is_refused() -> None:
    model = TransformerClassifier(20, 4, d_model=16, nhead=2, num_layers=1, dim_feedforward=32)
    with pytest.raises(ValueError, match="all-padding row"):
        model(torch.tensor([[0, 0], [4, 5]]))
