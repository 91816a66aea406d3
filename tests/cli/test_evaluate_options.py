"""`evaluate`'s options come from the tasks' declarations: the same flags, kinds and values as when the command
spelled them itself, and a task registered at run time adds its own with no change to the command."""

from __future__ import annotations

import argparse
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.reliability.builders import write_translation_checkpoint
from transformer_lab.cli import build_parser, main
from transformer_lab.tasks import registry
from transformer_lab.tasks.evaluation import LENGTH_PENALTY, EvaluationOptions, EvaluationReport, TaskOption
from transformer_lab.tasks.synthetic import train as synthetic_train
from transformer_lab.tasks.task import Task

BLEU_TOKENIZERS = ("13a", "intl", "zh", "char", "ja-mecab", "ko-mecab", "flores101", "flores200", "none")
# What `evaluate` offered when the command declared every task's flags itself:
# flag -> (type, choices, metavar, action).
EXPECTED = {
    "-h": (None, None, None, "_HelpAction"),
    "--checkpoint": ("path_of", None, None, "_StoreAction"),
    "--split": (None, None, None, "_StoreAction"),
    "--data-dir": (None, None, None, "_StoreAction"),
    "--output": ("file_path_of", None, None, "_StoreAction"),
    "--beam": ("int", None, None, "_StoreAction"),
    "--precision": (None, ("auto", "fp32", "bf16", "int8"), None, "_StoreAction"),
    "--length-penalty": ("float", None, None, "_StoreAction"),
    "--beam-stop": (None, ("exact", "finished"), None, "_StoreAction"),
    "--device": (None, None, "{auto,cpu,cuda,cuda:N}", "_StoreAction"),
    "--no-mirror-repetition": (None, None, None, "_StoreTrueAction"),
    "--allow-upper-characters": (None, None, None, "_StoreTrueAction"),
    "--oblique-final-penalty": ("float", None, None, "_StoreAction"),
    "--tone-opposition-penalty": ("float", None, None, "_StoreAction"),
    "--part-of-speech-rerank": ("float", None, None, "_StoreAction"),
    "--rhythm-rerank": ("float", None, None, "_StoreAction"),
    "--source": ("file_path_of", None, "FILE", "_StoreAction"),
    "--reference": ("file_path_of", None, "FILE", "_StoreAction"),
    "--bleu-tokenize": (None, BLEU_TOKENIZERS, None, "_StoreAction"),
    "--ensemble": (None, None, "CHECKPOINT", "_AppendAction"),
    "--bleu-flavour": (None, ("sacrebleu", "papers"), None, "_StoreAction"),
    "--confusion-png": ("file_path_of", None, None, "_StoreAction"),
    "--skip-malformed": (None, None, None, "_StoreTrueAction"),
    "--test": ("file_path_of", None, "FILE", "_StoreAction"),
    "--text-field": (None, None, "NAME", "_AppendAction"),
    "--label-field": (None, None, "NAME", "_StoreAction"),
    "--file-format": (None, ("csv", "tsv", "jsonl"), None, "_StoreAction"),
}
COUPLET_COMMAND_RULES = {flag: EXPECTED[flag] for flag in list(EXPECTED)[10:16]}


def command_parser(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    subparsers = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return subparsers.choices[command]


def signatures(parser: argparse.ArgumentParser) -> dict[str, tuple[object, ...]]:
    return {
        action.option_strings[0]: (
            getattr(action.type, "__name__", None),
            tuple(action.choices) if action.choices else None,
            action.metavar,
            type(action).__name__,
        )
        for action in parser._actions
        if action.option_strings
    }


def help_flags(task: str, capsys: pytest.CaptureFixture[str]) -> set[str]:
    with pytest.raises(SystemExit):
        main(["evaluate", task, "--help"])
    return set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", capsys.readouterr().out.split("options:")[1]))


def test_evaluate_offers_the_options_it_offered_before(capsys: pytest.CaptureFixture[str]) -> None:
    assert signatures(command_parser("evaluate")) == EXPECTED
    for task in registry.tasks_evaluating():
        assert help_flags(task, capsys) == set(EXPECTED) | {"--help"}
    assert COUPLET_COMMAND_RULES.items() <= signatures(command_parser("couplet")).items()


def test_the_help_names_the_tasks_that_read_each_option() -> None:
    helps = {
        action.option_strings[0]: action.help for action in command_parser("evaluate")._actions if action.option_strings
    }
    readers = "couplet, copy, reverse, sort, translation"
    assert helps["--beam"] == f"{readers}: beam size (1 = greedy; default: the checkpoint's)"
    assert helps["--source"].startswith("translation: score the translations of this file's lines")
    assert helps["--rhythm-rerank"].startswith("couplet: beam search: re-rank")
    assert helps["--text-field"].startswith("classification: with --test: a text field")


def evaluate_echo(checkpoint: Path, split: str | None, options: EvaluationOptions) -> EvaluationReport:
    raise ValueError(f"echo: {dict(options.task_options)}")


def echo_task(*options: TaskOption) -> Task:
    """A task registered at run time whose evaluation says which of its ``options`` it was given."""
    return Task(
        name="echo",
        presets={"default": lambda: synthetic_train.default_config("copy")},
        train=synthetic_train.train,
        load=synthetic_train.load,
        checkpoint_task=synthetic_train.TASK_NAME,
        reads_data=False,
        evaluate=evaluate_echo,
        evaluation_split="test",
        evaluation_options=options,
    )


def a_checkpoint_folder(tmp_path: Path) -> str:
    """A folder the command takes for a checkpoint (its config.json); the echo task reads nothing of it."""
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    return str(tmp_path)


def test_a_task_registered_at_run_time_declares_its_own_evaluate_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = a_checkpoint_folder(tmp_path)
    with registry.registered(echo_task(TaskOption("--echo-count", "how many times", int, metavar="N"))):
        assert signatures(command_parser("evaluate"))["--echo-count"] == ("int", None, "N", "_StoreAction")
        assert main(["evaluate", "echo", "--checkpoint", checkpoint, "--echo-count", "3"]) != 0
        assert "echo: {'--echo-count': 3}" in capsys.readouterr().err
        assert main(["evaluate", "translation", "--checkpoint", checkpoint, "--echo-count", "3"]) == 2
        assert "--echo-count: expected only with the echo task, got it with translation" in capsys.readouterr().err


def test_a_value_that_equals_false_is_a_value_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # "--length-penalty 0" turns the penalty off; 0 == False must not make it look absent.
    checkpoint = a_checkpoint_folder(tmp_path)
    with registry.registered(echo_task(LENGTH_PENALTY, TaskOption("--echo-count", "how many times", int))):
        assert main(["evaluate", "echo", "--checkpoint", checkpoint, "--length-penalty", "0", "--echo-count", "0"]) != 0
        assert "echo: {'--length-penalty': 0.0, '--echo-count': 0}" in capsys.readouterr().err


def test_a_beam_search_setting_with_a_greedy_search_is_refused_not_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiny = ["data.num_train=64", "data.num_validation=4", "data.num_test=4", "model.d_model=16", "model.nhead=2"]
    tiny += ["train.max_steps=1", "train.progress_bar=false"]
    run = tmp_path / "run"
    assert main(["train", "copy", "--out", str(run), *[part for item in tiny for part in ("--set", item)]]) == 0
    capsys.readouterr()
    evaluate = ["evaluate", "copy", "--checkpoint", str(run), "--output", str(tmp_path / "outputs.tsv")]
    for setting in (["--length-penalty", "1.0"], ["--beam-stop", "finished"]):
        # The copy preset decodes greedily; --beam 1 asks for it. Was: exit 0, the setting never used.
        for search in ([], ["--beam", "1"]):
            assert main([*evaluate, *search, *setting]) == 2
            error = capsys.readouterr().err
            assert error.count("\n") == 1 and not (tmp_path / "outputs.tsv").exists()
            assert f"{setting[0]}: expected beam search, which it steers, got a greedy search" in error
            assert f"give --beam N (N >= 2) or leave {setting[0]} out" in error
        assert main([*evaluate, "--beam", "2", *setting]) == 0
        assert "beam 2" in capsys.readouterr().out
        (tmp_path / "outputs.tsv").unlink()


def save_other_weights(checkpoint: Path, scratch: Path) -> None:
    """What a run's save does to ``checkpoint`` while it is evaluated: another weights file under the name."""
    weights = checkpoint / "model.safetensors"
    shutil.copyfile(weights, scratch / "saved")
    os.replace(scratch / "saved", weights)


def test_scores_of_a_checkpoint_replaced_while_it_was_evaluated_stay_off_its_card(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A run saving best/ while `evaluate --checkpoint RUN` decoded: the scores of the old weights went onto
    # the card of the new ones.
    from tests.reliability.tiny_runs import tiny_copy_options
    from transformer_lab.tasks.synthetic import evaluate as synthetic_evaluate
    from transformer_lab.training.model_card import CARD_FILE

    run = tmp_path / "run"
    assert main(["train", "copy", "--out", str(run), *tiny_copy_options(4, train__eval_every_steps=2)]) == 0
    card_before = (run / "best" / CARD_FILE).read_text(encoding="utf-8")
    decode = synthetic_evaluate.decode_pairs

    def replaced_while_decoding(*arguments: object, **keywords: object) -> object:
        outputs = decode(*arguments, **keywords)  # type: ignore[arg-type]
        save_other_weights(run / "best", tmp_path)
        return outputs

    monkeypatch.setattr(synthetic_evaluate, "decode_pairs", replaced_while_decoding)
    capsys.readouterr()
    assert main(["evaluate", "copy", "--checkpoint", str(run)]) == 0
    printed = capsys.readouterr().out
    assert (
        f"model card: not updated ({run / 'best'} was replaced by other weights while this evaluation ran)" in printed
    )
    assert (run / "best" / CARD_FILE).read_text(encoding="utf-8") == card_before


@pytest.mark.parametrize("change", ["replaced", "removed"])
def test_outputs_of_a_checkpoint_replaced_or_removed_while_it_was_decoded_are_not_written_into_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], change: str
) -> None:
    # The outputs of the old weights landed in the folder of the new ones (best/ saved anew), and a step
    # folder the run pruned meanwhile failed the command after the whole decoding, the scores lost.
    from tests.reliability.tiny_runs import tiny_copy_options
    from transformer_lab.tasks.synthetic import evaluate as synthetic_evaluate

    run = tmp_path / "run"
    assert main(["train", "copy", "--out", str(run), *tiny_copy_options(4, train__eval_every_steps=2)]) == 0
    checkpoint = run / "best"
    decode = synthetic_evaluate.decode_pairs

    def changed_while_decoding(*arguments: object, **keywords: object) -> object:
        outputs = decode(*arguments, **keywords)  # type: ignore[arg-type]
        if change == "removed":
            shutil.rmtree(checkpoint)  # a pruned step folder
        else:
            save_other_weights(checkpoint, tmp_path)
        return outputs

    monkeypatch.setattr(synthetic_evaluate, "decode_pairs", changed_while_decoding)
    capsys.readouterr()
    assert main(["evaluate", "copy", "--checkpoint", str(checkpoint)]) == 0
    printed = capsys.readouterr().out
    assert "exact match" in printed  # the scores are printed all the same
    assert (
        f"outputs: not written ({checkpoint} was replaced by other weights, or removed, while this evaluation ran; "
        "--output names a file elsewhere)"
    ) in printed
    assert not checkpoint.exists() or not list(checkpoint.glob("outputs.*"))
    if change == "replaced":
        # A given --output elsewhere is written whatever happened to the checkpoint; one into its folder is not.
        output = tmp_path / "outputs.tsv"
        assert main(["evaluate", "copy", "--checkpoint", str(checkpoint), "--output", str(output)]) == 0
        assert f"outputs: {output}" in capsys.readouterr().out and output.is_file()
        inside = checkpoint / "mine.tsv"
        assert main(["evaluate", "copy", "--checkpoint", str(checkpoint), "--output", str(inside)]) == 0
        assert "outputs: not written" in capsys.readouterr().out and not inside.exists()


def test_outputs_are_written_when_another_link_to_the_same_weights_goes_away(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Saves hard-link one weights file into best/, last/ and a step folder; a save of last/ or a pruned step
    # removes a link, which changes the file's ctime, and the same weights were taken for replaced ones.
    from tests.reliability.tiny_runs import tiny_copy_options
    from transformer_lab.tasks.synthetic import evaluate as synthetic_evaluate

    run = tmp_path / "run"
    assert main(["train", "copy", "--out", str(run), *tiny_copy_options(2)]) == 0
    checkpoint = run / "last"
    os.link(checkpoint / "model.safetensors", tmp_path / "other-link")
    decode = synthetic_evaluate.decode_pairs

    def link_removed_while_decoding(*arguments: object, **keywords: object) -> object:
        outputs = decode(*arguments, **keywords)  # type: ignore[arg-type]
        os.unlink(tmp_path / "other-link")
        return outputs

    monkeypatch.setattr(synthetic_evaluate, "decode_pairs", link_removed_while_decoding)
    capsys.readouterr()
    assert main(["evaluate", "copy", "--checkpoint", str(checkpoint)]) == 0
    printed = capsys.readouterr().out
    assert "not written" not in printed and "model card: not updated" not in printed
    assert list(checkpoint.glob("outputs.*"))


def test_an_output_onto_another_checkpoints_file_or_the_runs_log_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Only the scored checkpoint's own files were guarded: --output onto a step's weights or config, or onto
    # the run's metrics.jsonl, replaced them with hypotheses, exit 0.
    from tests.reliability.tiny_runs import tiny_copy_options

    run = tmp_path / "run"
    options = tiny_copy_options(4, train__eval_every_steps=2, train__keep_last=2)
    assert main(["train", "copy", "--out", str(run), *options]) == 0
    step = run / "step-000002"
    before = {path: path.read_bytes() for path in [*step.iterdir(), run / "metrics.jsonl"]}
    for target, what in (
        (step / "model.safetensors", "the step-000002 checkpoint's model.safetensors"),
        (step / "config.json", "the step-000002 checkpoint's config.json"),
        (run / "metrics.jsonl", "the run's metrics log"),
    ):
        capsys.readouterr()
        assert main(["evaluate", "copy", "--checkpoint", str(run / "last"), "--output", str(target)]) == 2
        assert (
            capsys.readouterr()
            .err.strip()
            .endswith(f"--output: expected a file other than {what} {target}, got {target}")
        )
    assert {path: path.read_bytes() for path in before} == before
    # A file of one's own beside them is written.
    assert main(["evaluate", "copy", "--checkpoint", str(run / "last"), "--output", str(step / "mine.tsv")]) == 0


def test_a_source_without_its_reference_names_the_one_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkpoint = write_translation_checkpoint(tmp_path / "checkpoint")
    (tmp_path / "test.de").write_text("Ein Mann.\n", encoding="utf-8")
    for given, missing in (("--source", "--reference"), ("--reference", "--source")):
        assert main(["evaluate", "translation", "--checkpoint", str(checkpoint), given, str(tmp_path / "test.de")]) == 2
        # Was: "..., got one", leaving the user to find which.
        assert capsys.readouterr().err.strip().endswith(f"got {given} without {missing}")
