"""The model card: its front matter parses, evaluate's scores replace their own entry, bad cards are named."""

import os

import pytest
import yaml
from torch import nn

from transformer_lab.training.averaging import average_checkpoints
from transformer_lab.training.checkpoint import save_checkpoint
from transformer_lab.training.model_card import CARD_FILE, add_test_scores, card_facts, read_card, render_card

CONFIG = {
    "task": "classification",
    "card": {"hub_task": "text-classification", "dataset": "ag_news", "languages": ["en"]},
    "data_counts": {"training articles": 900, "validation articles": 100},
    "data": {"train_files": ["news.csv"], "valid_files": []},
    "model": {"d_model": 64, "num_layers": 2, "num_classes": 4, "unused": 1},
    "train": {"precision": "fp32"},
}


def facts():
    return card_facts(
        CONFIG,
        parameters=1234,
        step=40,
        epoch=2,
        training_seconds=75.25,
        machine="Some CPU",
        threads=2,
        validation={"val_accuracy": 0.875},
        validation_step=40,
    )


def test_a_card_round_trips_through_its_front_matter(tmp_path):
    (tmp_path / CARD_FILE).write_text(render_card(facts()), encoding="utf-8")
    assert read_card(tmp_path) == facts()
    front = yaml.safe_load((tmp_path / CARD_FILE).read_text(encoding="utf-8").split("---\n")[1])
    assert "language" not in front and front["datasets"] == ["news.csv"]
    assert front["transformer_lab"]["model"] == {"parameters": 1234, "d_model": 64, "num_layers": 2, "num_classes": 4}
    (result,) = front["model-index"][0]["results"]
    assert result["task"]["type"] == "text-classification"
    assert result["metrics"] == [{"type": "accuracy", "value": 0.875, "name": "val_accuracy"}]


def test_a_validation_of_an_earlier_step_is_no_result_of_these_weights(tmp_path):
    # last/ saved at a stop (step 49) between validations (the last at step 40): its model index listed step 40's
    # scores as the weights' own.
    later = {**facts(), "training": {**facts()["training"], "steps": 49}}
    card = render_card(later)
    front = yaml.safe_load(card.split("---\n")[1])
    assert front["model-index"][0]["results"] == []
    assert "| validation (step 40) | - | val_accuracy | 0.88 |" in card  # still in the table, with its step


def test_test_scores_replace_their_own_entry_and_leave_a_hard_linked_copy_alone(tmp_path):
    card = tmp_path / "best" / CARD_FILE
    card.parent.mkdir()
    card.write_text(render_card(facts()), encoding="utf-8")
    (tmp_path / "last").mkdir()
    os.link(card, tmp_path / "last" / CARD_FILE)
    add_test_scores(tmp_path / "best", "test", "argmax", {"accuracy": 0.5})
    add_test_scores(tmp_path / "best", "test", "int8", {"accuracy": 0.4})
    add_test_scores(tmp_path / "best", "test", "argmax", {"accuracy": 0.6})
    tests = read_card(tmp_path / "best")["test"]
    assert tests == [
        {"split": "test", "search": "int8", "metrics": {"accuracy": 0.4}},
        {"split": "test", "search": "argmax", "metrics": {"accuracy": 0.6}},
    ]
    assert read_card(tmp_path / "last")["test"] == []
    assert sorted(path.name for path in (tmp_path / "best").iterdir()) == [CARD_FILE]  # no temporary left


def test_scores_under_other_names_for_the_same_split_and_search_stay_beside_the_new_ones(tmp_path):
    (tmp_path / CARD_FILE).write_text(render_card(facts()), encoding="utf-8")
    add_test_scores(tmp_path, "test", "greedy", {"bleu": 40.0, "chrf": 60.0})
    add_test_scores(tmp_path, "test", "greedy", {"bleu_papers": 41.0, "chrf": 60.5})
    assert read_card(tmp_path)["test"] == [
        {"split": "test", "search": "greedy", "metrics": {"bleu": 40.0, "chrf": 60.5, "bleu_papers": 41.0}}
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("# no front matter\n", "expected YAML front matter between '---' lines"),
        ("---\nkey: [unclosed\n---\n", "README.md: front matter: line 3: expected YAML, got an error"),
        ("---\nlanguage: en\n---\n", "expected a front matter section 'transformer_lab'"),
    ],
)
def test_a_bad_card_is_one_line_naming_the_file(tmp_path, text, problem):
    (tmp_path / CARD_FILE).write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=problem) as error:
        add_test_scores(tmp_path, "test", "greedy", {"bleu": 1.0})
    assert str(tmp_path / CARD_FILE) in str(error.value) and "\n" not in str(error.value)


def test_a_default_dataset_names_its_language_and_files_name_none():
    couplet = card_facts(
        {"task": "couplet", "card": {"dataset": "couplet", "languages": ["zh"]}, "data": {"data_dir": "/data"}},
        parameters=1,
        step=1,
        epoch=0,
        training_seconds=1.0,
        machine="CPU",
        threads=1,
        validation={},
        validation_step=None,
    )
    assert (couplet["languages"], couplet["data"]["dataset"]) == (["zh"], "couplet")
    assert facts()["languages"] == []  # the user's news.csv: its language is not known
    text = render_card(couplet)
    front = yaml.safe_load(text.split("---\n")[1])
    assert front["language"] == ["zh"] and front["pipeline_tag"] == "text2text-generation"  # the default type


def test_an_averaged_checkpoint_gets_a_card_without_its_last_sources_scores(tmp_path):
    sources = []
    for index, value in enumerate((1.0, 3.0)):
        model = nn.Linear(2, 2)
        nn.init.constant_(model.weight, value)
        card = render_card(facts()).encode("utf-8")
        folder = save_checkpoint(tmp_path / f"step-{index + 1}", model, dict(CONFIG), extra_files={CARD_FILE: card})
        add_test_scores(folder, "test", "greedy", {"accuracy": 0.5 + index})
        sources.append(folder)  # each source's card holds validation and test scores
    target = average_checkpoints(sources, tmp_path / "averaged", nn.Linear(2, 2))
    averaged = read_card(target)
    assert averaged["training"]["averaged_from"] == ["step-1", "step-2"]
    assert averaged["validation"] == {"step": None, "metrics": {}} and averaged["test"] == []
    assert averaged["data"] == facts()["data"] and averaged["model"] == facts()["model"]
    text = (target / CARD_FILE).read_text(encoding="utf-8")
    assert "the mean of 2 checkpoints of that run (step-1 .. step-2)" in text
    add_test_scores(target, "test", "greedy", {"accuracy": 0.9})  # evaluate records the average's own scores
    assert read_card(target)["test"][0]["metrics"] == {"accuracy": 0.9}
    assert read_card(sources[-1])["test"][0]["metrics"] == {"accuracy": 1.5}


def test_the_training_line_counts_in_english():
    one = card_facts(
        CONFIG,
        parameters=1234,
        step=1,
        epoch=1,
        training_seconds=3.0,
        machine="Some CPU",
        threads=1,
        validation={},
        validation_step=None,
    )
    assert "- 1 optimizer step, 1 epoch completed, 3 s (0.1 minutes) of training\n" in render_card(one)
    assert "- 40 optimizer steps, 2 epochs completed, 75 s (1.3 minutes) of training\n" in render_card(facts())


def edited_card(tmp_path, edit):
    card = facts()
    edit(card)
    (tmp_path / CARD_FILE).write_text(render_card(facts()), encoding="utf-8")
    text = (tmp_path / CARD_FILE).read_text(encoding="utf-8")
    front = yaml.safe_load(text.split("---\n")[1])
    front["transformer_lab"] = card
    (tmp_path / CARD_FILE).write_text("---\n" + yaml.safe_dump(front) + "---\n", encoding="utf-8")


@pytest.mark.parametrize(
    ("edit", "field", "expected"),
    [
        (lambda card: card.update(test="notalist"), "test", "a list, got 'notalist'"),
        (lambda card: card.update(test=[{"split": 1, "search": "x", "metrics": {}}]), "test[0].split", "text, got 1"),
        (lambda card: card.update(test=["x"]), "test[0]", "a mapping of names, got 'x'"),
        (lambda card: card["validation"].update(metrics={"bleu": "high"}), "validation.metrics.bleu", "a finite"),
        (lambda card: card["training"].update(seconds="long"), "training.seconds", "a finite number, got 'long'"),
        (lambda card: card["training"].pop("machine"), "training", "the key 'machine'"),
        (lambda card: card["data"].update(files="news.csv"), "data.files", "a list, got 'news.csv'"),
        (lambda card: card["model"].update(d_model="big"), "model.d_model", "a finite number, got 'big'"),
        (lambda card: card.update(languages="en"), "languages", "a list, got 'en'"),
        (lambda card: card.update(task=["x"] * 1000), "task", "text, got ['x', 'x', 'x', 'x', 'x', 'x', ...]"),
    ],
)
def test_a_card_field_of_the_wrong_type_is_named_with_its_file_when_read(tmp_path, edit, field, expected):
    edited_card(tmp_path, edit)
    before = (tmp_path / CARD_FILE).read_bytes()
    with pytest.raises(ValueError) as error:
        add_test_scores(tmp_path, "test", "greedy", {"bleu": 1.0})
    assert str(error.value).startswith(f"{tmp_path / CARD_FILE}: transformer_lab.{field}: expected {expected}")
    assert "\n" not in str(error.value) and len(str(error.value)) < 400
    assert (tmp_path / CARD_FILE).read_bytes() == before


def test_a_card_is_read_as_bounded_yaml(tmp_path):
    aliases = "".join(f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 7))
    (tmp_path / CARD_FILE).write_text("---\nx0: &a0 [1]\n" + aliases + "---\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"README\.md: front matter: line \d+: expected at most 100,000 values"):
        read_card(tmp_path)
