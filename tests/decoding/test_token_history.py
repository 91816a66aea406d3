"""The token history follows each row back through its parents, after one read."""

from __future__ import annotations

import pytest
import torch

from transformer_lab.decoding.token_history import TokenHistory


def test_rows_are_traced_back_through_reorders_and_dropped_rows() -> None:
    history = TokenHistory()
    assert history.read().tokens == []
    # Step 0: two rows from bos, tokens 5 and 6. Step 1: row 0 continues row 1 (6 -> 7),
    # row 1 continues row 1 (6 -> 8), row 2 continues row 0 (5 -> 9). Step 2: only
    # rows 2 and 0 of step 1 stay (a sentence left), then take 10 and 11.
    history.append(torch.tensor([5, 6]), torch.tensor([0, 0]))
    history.append(torch.tensor([7, 8, 9]), torch.tensor([1, 1, 0]))
    history.append(torch.tensor([10, 11]), torch.tensor([2, 0]))
    assert len(history) == 3
    trace = history.read()
    assert [trace.ids(3, row) for row in range(2)] == [[5, 9, 10], [6, 7, 11]]
    assert [trace.ids(2, row) for row in range(3)] == [[6, 7], [6, 8], [5, 9]]
    assert trace.ids(1, 1) == [6] and trace.ids(0, 0) == []


def test_tokens_and_parents_must_match() -> None:
    with pytest.raises(ValueError, match="tokens and parents"):
        TokenHistory().append(torch.tensor([1, 2]), torch.tensor([0]))
