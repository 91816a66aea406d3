"""TransformerClassifier: padding never leaks into the pooled vector."""

from __future__ import annotations

import pytest
import torch

from transformer_lab.models import TransformerClassifier


@pytest.mark.parametrize("pooling", ["mean", "first"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_extra_padding_changes_no_logit(pooling: str, norm_first: bool) -> None:
    model = TransformerClassifier(
        20, 4, d_model=16, nhead=2, num_layers=2, dim_feedforward=32, pooling=pooling, norm_first=norm_first
    ).eval()
    ids = torch.tensor([[4, 5, 6, 0], [7, 8, 9, 10]])
    logits = model(ids)
    assert logits.shape == (2, 4)
    padded = torch.cat([ids, torch.zeros(2, 5, dtype=torch.long)], dim=1)
    assert torch.allclose(model(padded), logits, atol=1e-5)


def test_all_padding_row_is_refused() -> None:
    model = TransformerClassifier(20, 4, d_model=16, nhead=2, num_layers=1, dim_feedforward=32)
    with pytest.raises(ValueError, match="all-padding row"):
        model(torch.tensor([[0, 0], [4, 5]]))


@pytest.mark.parametrize("training", [False, True])
def test_pooling_ignores_what_the_padded_positions_hold(training: bool) -> None:
    """Padded positions' vectors never reach the logits, with dropout on (train) or off (eval).

    The padding id's embedding row is what every padded position carries; rewriting it
    must leave the logits bit-for-bit the same under the same random state (same dropout
    masks), and the training loss must give that row no gradient.
    """
    model = TransformerClassifier(30, 4, d_model=16, nhead=2, num_layers=2, dim_feedforward=32, dropout=0.3)
    model.train(training)
    ids = torch.tensor([[4, 5, 6, 0, 0], [7, 8, 9, 10, 11], [12, 0, 0, 0, 0]])  # right-padded with pad_id 0
    torch.manual_seed(1)
    logits = model(ids)
    with torch.no_grad():
        model.embedding.weight[0].normal_(0.0, 10.0)
    torch.manual_seed(1)
    assert torch.equal(model(ids), logits)
    model.zero_grad()
    torch.manual_seed(1)
    torch.nn.functional.cross_entropy(model(ids), torch.tensor([0, 1, 2])).backward()
    assert torch.count_nonzero(model.embedding.weight.grad[0]) == 0
    assert torch.count_nonzero(model.embedding.weight.grad[4]) > 0


def test_mean_pooling_is_the_same_wherever_extra_padding_sits_in_the_batch() -> None:
    """A row's logits do not depend on how long the other rows (and so its padding) are."""
    model = TransformerClassifier(30, 4, d_model=16, nhead=2, num_layers=2, dim_feedforward=32).eval()
    alone = model(torch.tensor([[4, 5, 6]]))
    beside_long = model(torch.tensor([[4, 5, 6, 0, 0, 0, 0, 0], [7, 8, 9, 10, 11, 12, 13, 14]]))[:1]
    assert torch.allclose(alone, beside_long, atol=1e-5)
