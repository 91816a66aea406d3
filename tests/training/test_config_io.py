"""TrainConfig validation and the generic dict / override helpers on nested dataclasses."""

import dataclasses
import json
from typing import Literal, Optional

import pytest

from transformer_lab.training import TrainConfig, apply_overrides, config_from_dict, config_to_dict
from transformer_lab.training.config_io import Setting, merge_settings, parse_override, settings_of


@dataclasses.dataclass
class ModelSection:
    d_model: int = 32
    dropout: float = 0.1
    tie_weights: bool = True
    norm: Literal["pre", "post"] = "post"
    max_len: Optional[int] = None
    name: str = "tiny"
    betas: tuple[float, float] = (0.9, 0.98)
    layer_sizes: list[int] = dataclasses.field(default_factory=lambda: [1, 2])


@dataclasses.dataclass
class RunConfig:
    model: ModelSection = dataclasses.field(default_factory=ModelSection)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)


def test_round_trip_through_json():
    config = RunConfig(model=ModelSection(max_len=64), train=TrainConfig(precision="bf16"))
    data = json.loads(json.dumps(config_to_dict(config)))
    assert data["model"]["betas"] == [0.9, 0.98]
    assert config_from_dict(RunConfig, data) == config


def test_from_dict_rejects_unknown_keys_and_wrong_types():
    with pytest.raises(ValueError, match=r"model\.d_modle: unknown key"):
        config_from_dict(RunConfig, {"model": {"d_modle": 3}})
    with pytest.raises(ValueError, match=r"train\.warmup_steps: expected an int, got '10'"):
        config_from_dict(RunConfig, {"train": {"warmup_steps": "10"}})
    with pytest.raises(ValueError, match=r"model\.tie_weights: expected a bool, got 1"):
        config_from_dict(RunConfig, {"model": {"tie_weights": 1}})
    with pytest.raises(ValueError, match=r"train\.precision: expected one of \['auto', 'fp32', 'bf16'\]"):
        config_from_dict(RunConfig, {"train": {"precision": "fp16"}})
    with pytest.raises(ValueError, match=r"model\.betas: expected 2 items"):
        config_from_dict(RunConfig, {"model": {"betas": [0.9]}})
    # Absent keys take defaults; an int is accepted for a float.
    assert config_from_dict(RunConfig, {"train": {"lr_factor": 2}}).train.lr_factor == 2.0


def test_overrides_parse_by_field_type():
    config = RunConfig()
    updated = apply_overrides(
        config,
        [
            "train.lr_factor=2.0",
            "model.d_model=64",
            "model.tie_weights=false",
            "model.norm=pre",
            "model.max_len=128",
            "model.name=big one",
            "model.betas=0.8,0.99",
            "model.layer_sizes=[3, 4, 5]",
            "train.progress_bar=off",
        ],
    )
    assert updated.train.lr_factor == 2.0 and updated.model.d_model == 64
    assert updated.model.tie_weights is False and updated.model.norm == "pre"
    assert updated.model.max_len == 128 and updated.model.name == "big one"
    assert updated.model.betas == (0.8, 0.99) and updated.model.layer_sizes == [3, 4, 5]
    assert updated.train.progress_bar is False
    assert apply_overrides(updated, ["model.max_len=none"]).model.max_len is None
    assert config == RunConfig()  # the original is untouched


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ("train.lr_factr=2", r"train\.lr_factr: unknown key for TrainConfig"),
        ("model.d_model=6.5", r"model\.d_model: expected an int, got '6\.5'"),
        ("model.tie_weights=maybe", r"model\.tie_weights: expected a bool"),
        ("train.precision=fp16", r"train\.precision: expected one of \['auto', 'fp32', 'bf16'\]"),
        ("model.max_len=lots", r"model\.max_len: expected Optional\[int\]|model\.max_len: expected"),
        ("train=3", r"train: is a section \(TrainConfig\)"),
        ("model.d_model.x=3", r"model\.d_model: is a value of type int, not a section"),
        ("train.grad_accum_steps=0", r"train\.grad_accum_steps: expected an int >= 1, got 0$"),
        ("lr_factor", r"overrides: expected 'key=value', got 'lr_factor'"),
        ("=3", r"overrides: expected a dotted key"),
    ],
)
def test_override_errors_name_the_key(override, match):
    with pytest.raises(ValueError, match=match):
        apply_overrides(RunConfig(), [override])


def test_an_override_is_read_once_the_same_way_for_every_reader():
    # Fine-tuning reads the keys through parse_override too, so a spaced key means the same field.
    assert parse_override(" model.d_model =64") == (("model", "d_model"), "64")
    assert parse_override("data.source_language= de ") == (("data", "source_language"), " de ")
    assert apply_overrides(RunConfig(), ["model.d_model =64"]).model.d_model == 64
    with pytest.raises(ValueError, match=r"overrides: expected a dotted key before '=', got 'model\.\.x=1'"):
        parse_override("model..x=1")


def test_settings_are_merged_once_the_later_winning_and_the_changes_named_by_origin():
    settings = [
        *settings_of(RunConfig()),
        Setting("model", {"d_model": 48, "dropout": 0.3}, "--config run.yaml"),
        Setting("model.d_model", "64", "--set", text=True),
    ]
    config, changed = merge_settings(RunConfig, settings)
    assert (config.model.d_model, config.model.dropout, config.model.name) == (64, 0.3, "tiny")
    assert {key: setting.origin for key, setting in changed.items()} == {
        "model.d_model": "--set",
        "model.dropout": "--config run.yaml",
    }
    # A bad value is refused even where a later source replaces it, naming its source.
    with pytest.raises(ValueError, match=r"^a: model\.d_model: expected an int, got 'x'$"):
        merge_settings(RunConfig, [Setting("model.d_model", "x", "a"), Setting("model.d_model", 8, "b")])
    with pytest.raises(ValueError, match=r"^--config run\.yaml: model\.d_model: expected an int, got 'sixty'$"):
        merge_settings(RunConfig, [Setting("model", {"d_model": "sixty"}, "--config run.yaml")])
    # The field's own check is said once, under the whole key; a check of several fields names the change too.
    with pytest.raises(ValueError, match=r"^flags: train\.grad_accum_steps: expected an int >= 1, got 0$"):
        merge_settings(RunConfig, [Setting("train.grad_accum_steps", 0, "flags")])
    with pytest.raises(
        ValueError, match=r"^b: train\.max_steps: the value 0 was rejected: epochs, max_steps: expected at least one"
    ):
        merge_settings(RunConfig, [Setting("train.epochs", 0, "a"), Setting("train.max_steps", 0, "b")])


@pytest.mark.parametrize(
    ("key", "data", "text"),
    [("model.betas", [0.8, 0.99], "(0.8, 0.99)"), ("model.max_len", 64, " 64 "), ("model.tie_weights", False, "off")],
)
def test_one_ladder_reads_a_value_and_a_set_text_alike(key, data, text):
    from_data = merge_settings(RunConfig, [Setting(key, data, "--config run.yaml")])[0]
    assert from_data == merge_settings(RunConfig, [Setting(key, text, "--set", text=True)])[0] != RunConfig()


def test_train_config_validation():
    with pytest.raises(ValueError, match="precision"):
        TrainConfig(precision="fp16")
    with pytest.raises(ValueError, match="best_mode"):
        TrainConfig(best_mode="lowest")
    with pytest.raises(ValueError, match="epochs, max_steps"):
        TrainConfig(epochs=0, max_steps=0)
    with pytest.raises(ValueError, match="label_smoothing"):
        TrainConfig(label_smoothing=1.5)
    assert TrainConfig(epochs=0, max_steps=10).max_steps == 10


def test_a_json_list_given_by_set_is_read_as_json() -> None:
    # Was split at its commas with its quotes kept: '"t.de"' named no file, and "a,b.de" could not be given.
    from transformer_lab.tasks.translation import train as translation_train

    config = translation_train.default_config()
    given = apply_overrides(config, ['data.train_files=["a,b.de", "a,b.en"]']).data.train_files
    assert given == ("a,b.de", "a,b.en")
    assert apply_overrides(config, ["data.train_files=[t.de, t.en]"]).data.train_files == ("t.de", "t.en")
    assert apply_overrides(RunConfig(), ["model.layer_sizes=[3, 4]"]).model.layer_sizes == [3, 4]
