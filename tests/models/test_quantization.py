"""int8 inference: a quantized copy close to the float model, the float model untouched."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from tests.models.helpers import small_model
from tests.reliability.builders import write_translation_checkpoint
from transformer_lab.cli import main
from transformer_lab.decoding import greedy_search
from transformer_lab.models.quantization import int8_for_inference


def test_the_int8_copy_quantizes_the_feed_forward_and_generator_and_stays_close() -> None:
    model = small_model()
    quantized = int8_for_inference(model)
    quantized_names = {
        name for name, module in quantized.named_modules() if type(module).__module__.startswith("torch.ao")
    }
    assert "generator" in quantized_names
    assert {"transformer.encoder.layers.0.linear1", "transformer.decoder.layers.1.linear2"} <= quantized_names
    # The float model is unchanged: still nn.Linear everywhere, its tied generator intact.
    assert all(type(module) is nn.Linear for name, module in model.named_modules() if name in quantized_names)
    assert model.generator.weight is model.tgt_embedding.embedding.weight
    src_ids = torch.randint(4, 40, (3, 7))
    tgt_in_ids = torch.randint(4, 40, (3, 5))
    with torch.no_grad():
        exact, approximate = model(src_ids, tgt_in_ids), quantized(src_ids, tgt_in_ids)
    error = (exact - approximate).abs().max() / exact.abs().max()
    assert 0 < float(error) < 0.05  # different (int8), but close
    assert greedy_search(quantized, src_ids, max_len=6).best_ids.shape[0] == 3


def test_a_model_of_another_float_dtype_is_quantized_from_a_float32_copy() -> None:
    # A model in float64: was "expected scalar type Float but found Double" from inside torch at the first product.
    model = small_model()
    src_ids, tgt_in_ids = torch.randint(4, 40, (3, 7)), torch.randint(4, 40, (3, 5))
    with torch.no_grad():
        expected = int8_for_inference(model)(src_ids, tgt_in_ids)
        found = int8_for_inference(model.double())(src_ids, tgt_in_ids)
    assert found.dtype == torch.float32 and torch.allclose(found, expected, atol=1e-4)
    assert next(model.parameters()).dtype == torch.float64  # the model itself is left as it is


def test_a_model_without_those_layers_is_refused() -> None:
    with pytest.raises(ValueError, match="expected Linear layers named linear1, linear2, generator"):
        int8_for_inference(nn.Sequential(nn.ReLU()))


def test_translate_and_evaluate_take_precision_int8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkpoint = write_translation_checkpoint(tmp_path / "translation")
    assert main(["translate", "--checkpoint", str(checkpoint), "--precision", "int8", "Ein Mann fährt Fahrrad."]) == 0
    assert capsys.readouterr().out.strip() != ""
    source, reference = tmp_path / "test.de", tmp_path / "test.en"
    source.write_text("Ein Mann fährt Fahrrad.\nZwei Hunde spielen im Schnee.\n", encoding="utf-8")
    reference.write_text("A man rides a bike.\nTwo dogs play in the snow.\n", encoding="utf-8")
    arguments = [
        "evaluate",
        "translation",
        "--checkpoint",
        str(checkpoint),
        "--source",
        str(source),
        "--reference",
        str(reference),
    ]
    assert main([*arguments, "--precision", "int8"]) == 0
    assert "beam 2 int8" in capsys.readouterr().out
    assert [*checkpoint.glob("hypotheses.test.de.*.beam2int8.txt")]  # beside the fp32 ones, not over them
