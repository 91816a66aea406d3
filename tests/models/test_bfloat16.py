"""bf16 inference: a bf16 copy close to the float model, the float model untouched, and decode() using it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from tests.models.helpers import small_model
from tests.reliability.builders import write_translation_checkpoint
from transformer_lab.cli import main
from transformer_lab.decoding import DecodeConfig, decode, decoding_model
from transformer_lab.models.bfloat16 import bf16_for_inference, holds_bf16
from transformer_lab.models.quantization import int8_for_inference


def test_the_copy_is_bf16_in_eval_mode_tied_and_close_and_the_float_model_is_untouched() -> None:
    model = small_model().train()  # the copy is in eval mode whatever the model's mode
    copy = bf16_for_inference(model)
    assert holds_bf16(copy) and not holds_bf16(model)
    assert not copy.training and model.training
    assert all(parameter.dtype == torch.float32 for parameter in model.parameters())
    assert copy.generator.weight is copy.tgt_embedding.embedding.weight  # tied weights stay one tensor
    assert copy.positional_encoding.table.dtype == torch.bfloat16
    src_ids = torch.randint(4, 40, (3, 7))
    tgt_in_ids = torch.randint(4, 40, (3, 5))
    model.eval()
    with torch.no_grad():
        exact, approximate = model(src_ids, tgt_in_ids), copy(src_ids, tgt_in_ids)
    assert approximate.dtype == torch.bfloat16
    error = (exact - approximate.float()).abs().max() / exact.abs().max()
    assert 0 < float(error) < 0.05  # different (bf16), but close


def test_models_it_cannot_convert_are_refused() -> None:
    with pytest.raises(ValueError, match="expected floating-point parameters to convert to bf16, got a ReLU with none"):
        bf16_for_inference(nn.ReLU())
    with pytest.raises(ValueError, match="expected a float model, got a Seq2SeqTransformer with int8 layers"):
        bf16_for_inference(int8_for_inference(small_model()))


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_decode_at_bf16_runs_a_bf16_copy_and_leaves_the_given_model_float(strategy: str) -> None:
    model = small_model()
    src_ids = torch.randint(4, 40, (3, 6))
    src_ids[1, 4:] = model.pad_id
    config = DecodeConfig(strategy=strategy, beam_size=3, max_len=10, precision="bf16")
    given_float = decode(model, src_ids, config)
    assert all(parameter.dtype == torch.float32 for parameter in model.parameters())
    # decode() copies the float model itself; a copy made once gives the same tokens.
    made_once = decoding_model(model, "bf16")
    assert holds_bf16(made_once)
    assert torch.equal(decode(made_once, src_ids, config).best_ids, given_float.best_ids)
    assert decoding_model(made_once, "bf16") is made_once  # already bf16: no second copy
    assert decoding_model(model, "fp32") is model


def test_translate_and_evaluate_take_precision_bf16(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkpoint = write_translation_checkpoint(tmp_path / "translation")
    figure = tmp_path / "attention.png"
    sentence = "Ein Mann fährt Fahrrad."
    assert main(["translate", "--checkpoint", str(checkpoint), "--precision", "bf16", sentence]) == 0
    assert capsys.readouterr().out.strip() != ""
    arguments = ["translate", "--checkpoint", str(checkpoint), "--precision", "bf16", "--plot-attention", str(figure)]
    assert main([*arguments, sentence]) == 0
    assert figure.stat().st_size > 0  # the attention of the bf16 copy, drawn
    source, reference = tmp_path / "test.de", tmp_path / "test.en"
    source.write_text(sentence + "\nZwei Hunde spielen im Schnee.\n", encoding="utf-8")
    reference.write_text("A man rides a bike.\nTwo dogs play in the snow.\n", encoding="utf-8")
    evaluate = ["evaluate", "translation", "--checkpoint", str(checkpoint), "--source", str(source)]
    assert main([*evaluate, "--reference", str(reference), "--precision", "bf16"]) == 0
    assert "beam 2 bf16" in capsys.readouterr().out


def test_an_int8_copy_is_decoded_as_it_is_at_bf16() -> None:
    quantized = int8_for_inference(small_model())
    assert decoding_model(quantized, "bf16") is quantized  # no bf16 copy of int8 layers
    src_ids = torch.randint(4, 40, (2, 5))
    output = decode(quantized, src_ids, DecodeConfig(strategy="greedy", max_len=6, precision="bf16"))
    assert output.best_ids.shape[0] == 2


def test_under_an_open_autocast_decoding_model_leaves_the_model_as_decode_runs_it() -> None:
    model = small_model()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert decoding_model(model, "bf16") is model  # decode runs it under that autocast, uncopied
    assert holds_bf16(decoding_model(model, "bf16"))


def test_decoding_sources_in_several_batches_copies_the_model_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from transformer_lab.decoding.sources import decode_sources
    from transformer_lab.models import bfloat16

    copies = []
    original = bfloat16.bf16_for_inference

    def counting_copy(model: nn.Module) -> nn.Module:
        copies.append(model)
        return original(model)

    monkeypatch.setattr(bfloat16, "bf16_for_inference", counting_copy)
    model = small_model()
    sources = [[5, 6, 7], [8, 9], [10, 11, 12, 13], [14], [15, 16]]
    config = DecodeConfig(strategy="greedy", max_len=6, precision="bf16")
    found = decode_sources(model, sources, config, batch_size=2)  # three batches
    assert len(copies) == 1 and copies[0] is model
    assert all(len(hypotheses) == 1 for hypotheses in found)


def test_decoding_many_batches_at_auto_resolves_the_precision_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from transformer_lab import hardware
    from transformer_lab.decoding.sources import decode_sources

    resolved: list[str] = []
    original = hardware.resolve_precision

    def counting_resolution(*arguments: object, **keywords: object) -> str:
        resolved.append(str(arguments[0]))
        return original(*arguments, **keywords)  # type: ignore[arg-type]

    monkeypatch.setattr(hardware, "resolve_precision", counting_resolution)
    sources = [[5, 6, 7], [8, 9], [10, 11, 12, 13], [14], [15, 16]]
    config = DecodeConfig(strategy="greedy", max_len=6, precision="auto")
    found = decode_sources(small_model(), sources, config, batch_size=2)  # three batches
    assert resolved == ["auto"]
    assert all(len(hypotheses) == 1 for hypotheses in found)
