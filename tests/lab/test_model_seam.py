"""The lab runs the model through its own encode/decode seam, so it studies the function the model computes."""

from __future__ import annotations

import torch

from transformer_lab.lab import mask_experiments
from transformer_lab.models import Seq2SeqTransformer


def test_the_lab_decoder_is_the_models_own_aligned_input_included() -> None:
    torch.manual_seed(0)
    model = Seq2SeqTransformer(
        20,
        20,
        d_model=16,
        nhead=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dim_feedforward=32,
        dropout=0.0,
        max_len=16,
        tie_embeddings="all",
        aligned_decoder_input=True,
    ).eval()
    src_ids = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])
    tgt_in_ids = torch.tensor([[2, 11, 12, 13], [2, 14, 15, 0]])
    with torch.no_grad():
        expected = model(src_ids, tgt_in_ids)  # [B, T, V]
        memory = mask_experiments._encode(model, src_ids)
        studied = mask_experiments._decode(model, memory, src_ids, tgt_in_ids)
    # The lab's old copy of the forward left out the aligned input and differed by far more.
    torch.testing.assert_close(studied, expected, rtol=0, atol=0)
    assert torch.equal(memory, model.encode(src_ids))
