"""The classification task end to end: made-up topics (always) and real AG News rows (if present)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from tests.tasks.news_fixture import tiny_overrides, write_news_folder
from transformer_lab.cli import main
from transformer_lab.models.bfloat16 import bf16_for_inference
from transformer_lab.tasks.classification import evaluate as classification_evaluate
from transformer_lab.tasks.classification import predict as classification_predict
from transformer_lab.tasks.classification import train as classification_train
from transformer_lab.tasks.classification.predict import Classifier
from transformer_lab.training import apply_overrides

DATA_DIR = Path(os.environ.get("TRANSFORMER_LAB_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, classification_train.TrainResult]:
    data_dir = write_news_folder(tmp_path_factory.mktemp("news"))
    # Two step checkpoints kept (the preset keeps none), for the averaging test.
    config = apply_overrides(
        classification_train.default_config(), [*tiny_overrides(data_dir, epochs=10), "train.keep_last=2"]
    )
    out_dir = tmp_path_factory.mktemp("run")
    return data_dir, out_dir, classification_train.train(config, out_dir)


@pytest.mark.convergence
def test_training_beats_chance_on_held_out_rows(
    trained_run: tuple[Path, Path, classification_train.TrainResult],
) -> None:
    data_dir, out_dir, result = trained_run
    evaluations = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    accuracies = [row["val_accuracy"] for row in evaluations if row["event"] == "eval"]
    assert len(accuracies) == 10  # one per epoch
    assert max(accuracies) >= 0.8 > 0.25  # four balanced topics: chance is 25 %
    assert result.summary["best_value"] == max(accuracies)
    model, tokenizer, config = classification_train.load_classifier(out_dir)  # the run folder: its best/
    test = classification_evaluate.load_split(config, "test", str(data_dir))
    report, predictions = classification_evaluate.evaluate_classifier(model, tokenizer, test, config.class_names)
    assert report.accuracy >= 0.8 and len(predictions) == 80
    assert sum(report.support) == 80 and report.class_names == ("World", "Sports", "Business", "Sci/Tech")


def test_the_split_and_tokenizer_keep_validation_rows_out_of_training(
    trained_run: tuple[Path, Path, classification_train.TrainResult],
) -> None:
    _, out_dir, result = trained_run
    train_lines = set(result.data.train_line_numbers.tolist())
    validation_lines = {article.line_number for article in result.data.validation_articles}
    assert not train_lines & validation_lines and len(train_lines | validation_lines) == 240
    assert len(validation_lines) == 48  # 20 % of each class's 60 rows
    _, _, config = classification_train.load_classifier(out_dir / "best")
    assert config.data.train_file == "train.csv"  # the file used is recorded
    again = classification_evaluate.load_split(config, "validation")
    assert {article.line_number for article in again} == validation_lines


def test_the_checkpoint_reloads_to_the_same_predictions(
    trained_run: tuple[Path, Path, classification_train.TrainResult],
) -> None:
    _, out_dir, result = trained_run
    texts = ["Shares and profit of investors after the merger", "The striker and a goal on the league match"]
    first = Classifier(*classification_train.load_classifier(out_dir / "last")).classify(texts, precision="fp32")
    again = Classifier(*classification_train.load_classifier(out_dir / "last")).classify(texts, precision="fp32")
    assert first == again
    assert [prediction.label_name for prediction in again] == ["Business", "Sports"]
    for prediction in again:
        assert sum(prediction.probabilities.values()) == pytest.approx(1.0, abs=1e-5)
        assert prediction.probabilities[prediction.label_name] == max(prediction.probabilities.values())


def test_bf16_predictions_run_a_bf16_copy_close_to_fp32_and_leave_the_model_float(
    trained_run: tuple[Path, Path, classification_train.TrainResult],
) -> None:
    _, out_dir, _ = trained_run
    model, tokenizer, _ = classification_train.load_classifier(out_dir)
    token_ids = tokenizer.encode_batch(["Shares and profit after the merger", "A goal in the league match", "goal"])
    with torch.no_grad():
        exact = classification_predict.predict_probabilities(model, token_ids, precision="fp32")
        approximate = classification_predict.predict_probabilities(model, token_ids, precision="bf16")
        copied = classification_predict.predict_probabilities(bf16_for_inference(model), token_ids, precision="bf16")
    assert all(parameter.dtype == torch.float32 for parameter in model.parameters())
    assert torch.equal(approximate, copied)  # the copy it makes is the one bf16_for_inference makes
    assert approximate.dtype == torch.float32 and torch.allclose(approximate.sum(dim=1), torch.ones(3))
    assert 0 < float((approximate - exact).abs().max()) < 0.05


def test_predict_refuses_empty_and_too_long_texts_unless_truncating(
    trained_run: tuple[Path, Path, classification_train.TrainResult],
) -> None:
    _, out_dir, _ = trained_run
    model, tokenizer, config = classification_train.load_classifier(out_dir)
    long_text = "goal " * 300
    results = classification_predict.predict_each(
        model, tokenizer, config.class_names, ["", "  \t", "goal 🚀⚽", long_text]
    )
    assert "empty" in results[0] and "empty" in results[1]
    assert results[2].label_name in config.class_names and not results[2].truncated
    assert "more than the model reads (128" in results[3]
    classifier = Classifier(model, tokenizer, config)
    truncated = classifier.classify(long_text, precision="fp32", truncate=True)
    assert truncated.truncated and truncated.num_tokens > 128
    with pytest.raises(ValueError, match=r"texts\[1\]: the text is empty"):
        classifier.classify(["goal", " "], precision="fp32")


def test_resume_continues_with_the_saved_tokenizer(tmp_path: Path) -> None:
    data_dir = write_news_folder(tmp_path / "data", train_per_class=20, test_per_class=2)
    out_dir = tmp_path / "run"
    config = apply_overrides(classification_train.default_config(), tiny_overrides(data_dir, epochs=1))
    classification_train.train(config, out_dir)
    longer = apply_overrides(config, ["train.epochs=2"])
    result = classification_train.train(longer, out_dir, resume=True)
    assert result.summary["epochs_completed"] == 2
    saved = (out_dir / "last" / classification_train.TOKENIZER_FILE).read_text(encoding="utf-8")
    assert result.vocabulary.to_json() == saved


@pytest.mark.skipif(
    not (DATA_DIR / "ag_news" / "train_subset" / "train_subset_12k.csv").is_file(),
    reason=f"the AG News files are not in {DATA_DIR} (the team's shared data folder; or set TRANSFORMER_LAB_DATA)",
)
def test_a_few_hundred_real_rows_beat_chance(tmp_path: Path) -> None:
    overrides = [
        f"data.data_dir={DATA_DIR}",
        "data.num_train=600",
        "data.vocab_size=1000",
        "model.d_model=64",
        "model.dim_feedforward=128",
        "train.epochs=2",
        "train.warmup_steps=20",
        "train.progress_bar=false",
    ]
    result = classification_train.train(
        apply_overrides(classification_train.default_config(), overrides), tmp_path / "run"
    )
    assert len(result.data.train_store) == 540 and len(result.data.validation_articles) == 60
    assert result.summary["best_value"] >= 0.45  # chance is about 25 % (measured: 0.60)


def test_averaged_checkpoints_load_and_hold_the_mean_weights(
    trained_run: tuple[Path, Path, classification_train.TrainResult], tmp_path: Path
) -> None:
    _, out_dir, _ = trained_run
    steps = sorted(path for path in out_dir.iterdir() if path.name.startswith("step-"))
    assert len(steps) >= 2
    averaged_dir = tmp_path / "averaged"
    assert main(["average-checkpoints", "--run", str(out_dir), "--last", "2", "--out", str(averaged_dir)]) == 0
    model, _, config = classification_train.load_classifier(averaged_dir)  # "averaged_from" is metadata, not config
    first, second = (classification_train.load_classifier(step)[0].state_dict() for step in steps[-2:])
    for name, tensor in model.state_dict().items():
        assert torch.allclose(tensor, (first[name] + second[name]) / 2, atol=1e-6), name
    assert config.class_names == ("World", "Sports", "Business", "Sci/Tech")


def test_the_checkpoints_card_names_the_tasks_hub_type_and_the_presets_dataset(
    trained_run: tuple[Path, Path, classification_train.TrainResult],
) -> None:
    from transformer_lab.training.model_card import CARD_FILE, read_card

    _, out_dir, result = trained_run
    card = read_card(out_dir / "best")
    assert (card["hub_task"], card["data"]["dataset"], card["languages"]) == ("text-classification", "ag_news", ["en"])
    assert card["data"]["counts"]["training articles"] == len(result.data.train_store)
    assert "pipeline_tag: text-classification" in (out_dir / "best" / CARD_FILE).read_text(encoding="utf-8")
