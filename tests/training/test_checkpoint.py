"""Checkpoint folders: round trip, tied weights, safe loading, atomic replacement."""

import os

import pytest
import torch
from torch import nn

from transformer_lab.training import checkpoint as checkpoint_module
from transformer_lab.training import (
    copy_checkpoint,
    load_checkpoint_config,
    load_model_weights,
    load_trainer_state,
    read_extra_file,
    save_checkpoint,
)


class TiedModel(nn.Module):
    """Embedding and output projection share one weight, as with weight tying."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(7, 4)
        self.hidden = nn.Linear(4, 4)
        self.output = nn.Linear(4, 7, bias=False)
        self.output.weight = self.embedding.weight

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self.output(torch.tanh(self.hidden(self.embedding(token_ids))))


def test_round_trip_preserves_outputs_config_extras_and_ties(tmp_path):
    model = TiedModel()
    state = {"step": 3, "values": [1.5, "a", None, (1, 2)], "tensor": torch.arange(4)}
    folder = save_checkpoint(
        tmp_path / "checkpoint",
        model,
        {"model": {"d_model": 4}, "name": "tiny"},
        extra_files={"vocabulary.txt": "<pad>\nhello\n", "merges.bin": b"\x00\x01"},
        trainer_state=state,
    )
    assert sorted(os.listdir(tmp_path)) == ["checkpoint"]  # no temporary leftovers
    restored = TiedModel()
    token_ids = torch.tensor([[1, 2, 3]])
    assert not torch.equal(restored(token_ids), model(token_ids))
    load_model_weights(folder, restored)
    assert torch.equal(restored(token_ids), model(token_ids))
    assert restored.output.weight is restored.embedding.weight
    assert load_checkpoint_config(folder) == {"model": {"d_model": 4}, "name": "tiny"}
    assert read_extra_file(folder, "vocabulary.txt").decode() == "<pad>\nhello\n"
    assert read_extra_file(folder, "merges.bin") == b"\x00\x01"
    loaded = load_trainer_state(folder)
    assert loaded["step"] == 3 and loaded["values"] == [1.5, "a", None, (1, 2)]
    assert torch.equal(loaded["tensor"], torch.arange(4))


def test_a_config_json_that_repeats_a_key_is_refused_naming_it(tmp_path):
    # json.loads keeps the last of a repeated key, so this checkpoint's config read as d_model 8.
    folder = save_checkpoint(tmp_path / "checkpoint", TiedModel(), {"model": {"d_model": 4}})
    (folder / "config.json").write_text('{"model": {"d_model": 4, "d_model": 8}}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"config\.json': key 'd_model' appears twice$"):
        load_checkpoint_config(folder)


def test_missing_things_are_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="expected a checkpoint folder"):
        load_checkpoint_config(tmp_path / "absent")
    folder = save_checkpoint(tmp_path / "checkpoint", TiedModel(), {})
    with pytest.raises(FileNotFoundError, match="expected the trainer state 'trainer_state.pt'"):
        load_trainer_state(folder)
    with pytest.raises(FileNotFoundError, match="expected the extra file 'vocab.txt'"):
        read_extra_file(folder, "vocab.txt")


def test_strict_loading_names_mismatches(tmp_path):
    folder = save_checkpoint(tmp_path / "checkpoint", nn.Linear(2, 3), {})
    with pytest.raises(ValueError, match="missing from the file"):
        load_model_weights(folder, nn.Sequential(nn.Linear(2, 3)))


def test_refuses_objects_that_weights_only_loading_would_refuse(tmp_path):
    refused = r"trainer_state: expected only .* got object at trainer_state\['bad'\]"
    with pytest.raises(ValueError, match=refused):
        save_checkpoint(tmp_path / "checkpoint", nn.Linear(2, 2), {}, trainer_state={"bad": object()})
    with pytest.raises(ValueError, match="config: expected JSON-serialisable"):
        save_checkpoint(tmp_path / "checkpoint", nn.Linear(2, 2), {"bad": object()})
    with pytest.raises(ValueError, match="extra_files"):
        save_checkpoint(tmp_path / "checkpoint", nn.Linear(2, 2), {}, extra_files={"../x": "y"})
    assert not (tmp_path / "checkpoint").exists()


def test_failure_mid_write_keeps_previous_checkpoint(tmp_path, monkeypatch):
    old_model = nn.Linear(3, 3)
    folder = save_checkpoint(tmp_path / "last", old_model, {"version": 1}, trainer_state={"step": 1})

    def broken_torch_save(obj, file):
        file.write(b"half a file")
        raise OSError("disk full")  # as a write of the serialised state would

    monkeypatch.setattr(checkpoint_module.torch, "save", broken_torch_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(folder, nn.Linear(3, 3), {"version": 2}, trainer_state={"step": 2})
    assert sorted(os.listdir(tmp_path)) == ["last"]
    assert load_checkpoint_config(folder) == {"version": 1}
    monkeypatch.undo()
    assert load_trainer_state(folder) == {"step": 1}
    restored = load_model_weights(folder, nn.Linear(3, 3))
    assert torch.equal(restored.weight, old_model.weight)


def test_failure_during_swap_restores_previous(tmp_path, monkeypatch):
    folder = save_checkpoint(tmp_path / "last", nn.Linear(2, 2), {"version": 1})
    real_rename = os.rename

    def rename_failing_on_the_new_folder(source, target):
        if ".last.tmp-" in str(source):
            raise OSError("power cut")
        return real_rename(source, target)

    monkeypatch.setattr(checkpoint_module.os, "rename", rename_failing_on_the_new_folder)
    with pytest.raises(OSError, match="power cut"):
        save_checkpoint(folder, nn.Linear(2, 2), {"version": 2})
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["last"]
    assert load_checkpoint_config(folder) == {"version": 1}


def test_leftovers_of_a_hard_crash_are_recovered(tmp_path):
    folder = save_checkpoint(tmp_path / "last", nn.Linear(2, 2), {"version": 1})
    # A crash (no cleanup) after renaming the old folder aside, with a half-written new one.
    os.rename(folder, tmp_path / ".last.old-abc")
    (tmp_path / ".last.tmp-xyz").mkdir()
    (tmp_path / ".last.tmp-xyz" / "config.json").write_text("{half")
    with pytest.raises(FileNotFoundError, match=r"previous checkpoint is complete at .*\.last\.old-abc"):
        load_checkpoint_config(folder)
    save_checkpoint(folder, nn.Linear(2, 2), {"version": 2})
    assert sorted(os.listdir(tmp_path)) == ["last"]
    assert load_checkpoint_config(folder) == {"version": 2}


def test_copy_checkpoint_is_independent_of_later_saves(tmp_path):
    model = nn.Linear(2, 2)
    source = save_checkpoint(tmp_path / "last", model, {"version": 1}, extra_files={"a.txt": "a"})
    copy = copy_checkpoint(source, tmp_path / "best")
    save_checkpoint(source, nn.Linear(2, 2), {"version": 2})
    assert load_checkpoint_config(copy) == {"version": 1}
    assert read_extra_file(copy, "a.txt") == b"a"
    assert torch.equal(load_model_weights(copy, nn.Linear(2, 2)).weight, model.weight)


def test_the_weights_file_holds_what_safetensors_save_model_writes(tmp_path) -> None:
    from safetensors import safe_open
    from safetensors.torch import save_model

    from transformer_lab.models import ModelConfig, Seq2SeqTransformer
    from transformer_lab.training.checkpoint import model_file_bytes

    model = Seq2SeqTransformer.from_config(
        ModelConfig(
            src_vocab_size=30,
            tgt_vocab_size=30,
            d_model=16,
            nhead=2,
            num_encoder_layers=1,
            num_decoder_layers=1,
            dim_feedforward=32,
            tie_embeddings="all",
        )
    )
    save_model(model, str(tmp_path / "reference.safetensors"))
    (tmp_path / "ours.safetensors").write_bytes(model_file_bytes(model))
    files = {}
    for name in ("reference", "ours"):
        with safe_open(str(tmp_path / f"{name}.safetensors"), framework="pt") as file:
            files[name] = (file.metadata(), {key: file.get_tensor(key) for key in file.keys()})
    (reference_metadata, reference), (our_metadata, ours) = files["reference"], files["ours"]
    assert our_metadata == reference_metadata and len(reference_metadata) >= 2  # the tied names, stored once
    assert sorted(ours) == sorted(reference)
    assert all(torch.equal(ours[key], reference[key]) for key in reference)
