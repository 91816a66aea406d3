"""The demo and train subcommands on a tiny budget: they run, write their files, and resume."""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import shutil
from pathlib import Path

import pytest

from transformer_lab.cli import demo_command, main
from transformer_lab.training import load_trainer_state

TINY = [
    "--set",
    "data.num_train=256",
    "--set",
    "data.num_validation=20",
    "--set",
    "data.num_test=40",
    "--set",
    "data.max_length=5",
    "--set",
    "model.d_model=16",
    "--set",
    "model.nhead=2",
    "--set",
    "model.dim_feedforward=32",
    "--set",
    "train.max_steps=8",
    "--set",
    "train.epochs=0",
    "--set",
    "train.progress_bar=false",
]


def test_demo_prints_outputs_accuracy_and_writes_the_heat_map(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--out", str(tmp_path / "demo"), *TINY]) == 0
    output = capsys.readouterr().out
    assert "Exact match on 40 sequences never seen in training" in output
    assert (tmp_path / "demo" / "attention.png").stat().st_size > 0
    assert (tmp_path / "demo" / "best" / "model.safetensors").is_file()


def test_demo_refuses_a_folder_that_holds_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "keep.txt").write_text("precious", encoding="utf-8")
    assert main(["demo", "--out", str(tmp_path), *TINY]) == 2
    assert "already holds files" in capsys.readouterr().err
    assert (tmp_path / "keep.txt").read_text(encoding="utf-8") == "precious"


def test_demo_refuses_a_file_as_out_naming_the_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("precious", encoding="utf-8")
    assert main(["demo", "--out", str(tmp_path / "notes.txt"), *TINY]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"transformer-lab demo: error: --out: expected a new or empty folder, got {tmp_path / 'notes.txt'}, "
        "which is a file"
    ]


def test_two_demos_of_the_same_second_get_two_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Both took runs/demo-<time>, then trained into it together; the second failed saving best/ (ENOENT).
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(demo_command.time, "strftime", lambda pattern: "demo-20260101-120000")
    (tmp_path / "runs" / "demo-20260101-120000").mkdir(parents=True)  # the other demo's, just made and still empty
    assert main(["demo", *TINY]) == 0
    assert "into runs/demo-20260101-120000-2" in capsys.readouterr().out
    assert list((tmp_path / "runs" / "demo-20260101-120000").iterdir()) == []
    assert (tmp_path / "runs" / "demo-20260101-120000-2" / "best" / "model.safetensors").is_file()


def test_a_demo_in_a_read_only_folder_is_one_line_naming_the_folder_before_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was exit 1 after the "Training ... into" line: "failed: [Errno 30] Read-only file system: 'runs'".
    def read_only(path: Path, *arguments: object, **keywords: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(demo_command.time, "strftime", lambda pattern: "demo-20260101-120000")
    monkeypatch.setattr(Path, "mkdir", read_only)
    assert main(["demo", *TINY]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [
        "transformer-lab demo: error: could not write 'runs/demo-20260101-120000' (Read-only file system, EROFS); "
        "nothing of it was kept; --out names a folder elsewhere"
    ]


def test_a_demo_refused_before_training_leaves_no_folder_and_trains_only_the_copy_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # data.task=sort trained the sort task under the demo's "copy task" lines and heat map title.
    monkeypatch.chdir(tmp_path)
    assert main(["demo", *TINY, "--set", "data.task=sort"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.endswith("data.task: expected 'copy' (the task trained) or no setting, got 'sort'"), error
    assert main(["demo", *TINY, "--set", "train.best_metric=val_bleu"]) == 2
    assert "train.best_metric: expected one of val_loss, val_exact_match" in capsys.readouterr().err
    assert list((tmp_path / "runs").iterdir()) == []  # the default folders made for them are gone


def test_train_then_resume_continues_from_the_last_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), *TINY]) == 0
    assert main(["train", "reverse", "--out", str(out), *TINY]) == 2  # never silently overwritten
    assert "pass --resume" in capsys.readouterr().err
    longer = [argument.replace("train.max_steps=8", "train.max_steps=12") for argument in TINY]
    assert main(["train", "reverse", "--out", str(out), "--resume", *longer]) == 0
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert max(steps) == 12
    # A checkpoint folder (best/, an average) given as the run: said as what it is (was: "holds no checkpoint
    # (the run stopped before its first save) ... its metrics.jsonl is kept aside", then "holding README.md, ...").
    checkpoint = shutil.copytree(out / "best", tmp_path / "averaged")
    for given in (["--resume"], []):
        assert main(["train", "reverse", "--out", str(checkpoint), *given, *TINY]) == 2
        expected = "a run folder (its last/ is what a resume continues)" if given else "a new folder"
        error = capsys.readouterr().err.strip()
        assert error.endswith(
            f"expected {expected}, got {checkpoint}, a checkpoint folder (weights, no run around them)"
        )
    # A task that fine-tunes is told how (a synthetic one is not: it takes no --init-from).
    assert (
        main(
            [
                "train",
                "translation",
                "--train",
                str(tmp_path / "a.de"),
                str(tmp_path / "a.en"),
                "--out",
                str(checkpoint),
            ]
        )
        == 2
    )
    assert capsys.readouterr().err.strip().endswith(f"--init-from {checkpoint} --out NEW_FOLDER")


def test_resume_of_a_folder_no_run_wrote_says_so_and_of_a_run_stopped_before_its_first_save_says_to_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.txt").write_text("mine\n", encoding="utf-8")
    assert main(["train", "reverse", "--out", str(notes), "--resume", *TINY]) == 2
    # Was: "holds no checkpoint (the run stopped before its first save) ... (its metrics.jsonl is kept
    # aside)", advising a command that then refused the folder for notes.txt.
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            f"--resume: expected a run folder (its last/ is what a resume continues), got {notes} holding notes.txt, "
            "which no run writes; give the folder of the run to continue"
        )
    )
    stopped = tmp_path / "stopped"
    stopped.mkdir()
    (stopped / "metrics.jsonl").write_text('{"event": "train", "step": 1, "train_loss": 3.0, "lr": 0.001}\n')
    assert main(["train", "reverse", "--out", str(stopped), "--resume", *TINY]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("run the same command without --resume to start again (its metrics.jsonl is kept aside)")
    )
    assert main(["train", "reverse", "--out", str(stopped), *TINY]) == 0


@pytest.mark.parametrize("damage", ["removed", "truncated"])
def test_a_resume_whose_best_folder_is_gone_or_damaged_says_so_and_writes_it_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    out = tmp_path / "run"
    every_four = [*TINY, "--set", "train.eval_every_steps=4"]
    assert main(["train", "reverse", "--out", str(out), *every_four]) == 0
    if damage == "removed":
        shutil.rmtree(out / "best")
    else:  # its own copy cut short (the saves hard-link one file into best/ and last/)
        weights = out / "best" / "model.safetensors"
        kept = weights.read_bytes()
        weights.unlink()
        weights.write_bytes(kept[:100])
    longer = [argument.replace("train.max_steps=8", "train.max_steps=12") for argument in every_four]
    capsys.readouterr()
    with caplog.at_level(logging.WARNING):
        assert main(["train", "reverse", "--out", str(out), "--resume", *longer]) == 0
    # Said, and best/ written again by the next validation (was: "best/: step 8" claimed, and none there).
    (warning,) = [line for line in caplog.messages if "gone or damaged" in line]
    assert warning.startswith(f"{out / 'best'}: the run's best so far (step ") and "starts over" in warning
    assert "does not exist" in warning if damage == "removed" else "truncated" in warning
    assert "best/: step 12" in capsys.readouterr().out
    assert main(["evaluate", "reverse", "--checkpoint", str(out / "best")]) == 0


def test_resume_without_last_advises_copying_a_step_folder_which_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    saves = ["--set", "train.eval_every_steps=4", "--set", "train.keep_last=2"]
    assert main(["train", "reverse", "--out", str(out), *TINY, *saves]) == 0
    shutil.rmtree(out / "last")
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(out), "--resume", *TINY, *saves]) == 2
    error = capsys.readouterr().err.strip()
    # It listed the folders and gave no way on; a synthetic task takes no --init-from, so none is advised.
    assert error.endswith(
        f"found only best, step-000004, step-000008; to continue from step-000008, copy it to last/ "
        f"(cp -r {out / 'step-000008'} {out / 'last'}) and resume"
    ), error
    shutil.copytree(out / "step-000008", out / "last")
    longer = [argument.replace("train.max_steps=8", "train.max_steps=12") for argument in TINY]
    assert main(["train", "reverse", "--out", str(out), "--resume", *longer, *saves]) == 0
    assert load_trainer_state(out / "last")["global_step"] == 12


def test_train_ends_with_a_readable_summary_or_with_json_for_scripts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", "reverse", "--out", str(tmp_path / "run"), *TINY]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"trained 8 steps \(\d+ epochs? completed, stopped by max_steps\) in \d+\.\d s", printed[0])
    best_step = load_trainer_state(tmp_path / "run" / "best")["global_step"]
    best = [line for line in printed if line.startswith("best/: ")]
    assert len(best) == 1 and best[0].startswith(f"best/: step {best_step}, val_exact_match ")
    # Rounded to four significant digits, not a JSON dump of 15-digit floats.
    assert not any(re.search(r"\d\.\d{5}", line) for line in printed) and "{" not in printed[0]

    assert main(["train", "reverse", "--out", str(tmp_path / "json"), "--json", *TINY]) == 0
    summary = json.loads(capsys.readouterr().out)  # the whole output is one object
    assert summary["steps"] == 8 and summary["best_metric"] == "val_exact_match" and "best_step" in summary
    assert summary["test_sequences"] > 0 and 0.0 <= summary["test_exact_match_greedy"] <= 1.0


def test_bad_override_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["train", "copy", "--out", str(tmp_path / "x"), "--set", "model.no_such_field=3"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "no_such_field" in error[0]


def test_an_option_the_tasks_data_lacks_is_one_line_naming_the_option(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    arguments = ["train", "classification", "--out", str(tmp_path / "x"), "--source-language", "de"]
    assert main(arguments) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "--source-language: data.source_language: unknown key for" in error[0]


def test_precision_flag_sets_bf16_in_the_saved_config(tmp_path: Path) -> None:
    out = tmp_path / "bf16"
    assert main(["train", "copy", "--out", str(out), "--precision", "bf16", *TINY]) == 0
    saved = json.loads((out / "last" / "config.json").read_text(encoding="utf-8"))
    assert saved["train"]["precision"] == "bf16"


def test_every_task_trains_from_its_preset_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `config copy --preset default` prints the preset; `train copy --preset default` starts from it.
    assert main(["train", "copy", "--out", str(tmp_path / "named"), "--preset", "default", *TINY]) == 0
    saved = json.loads((tmp_path / "named" / "last" / "config.json").read_text(encoding="utf-8"))
    assert saved["data"]["task"] == "copy"
    # The closing score is the last weights', printed after best/'s line: said so (was: read as best/'s).
    assert "held-out sequences (greedy, the last step's weights, last/): " in capsys.readouterr().out


def test_time_budget_flag_plans_the_run_and_records_the_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], caplog
) -> None:
    from transformer_lab.training import time_budget

    # A clock that moves 1 s each time it is read, so the run is short and its plan exact.
    readings = iter(range(10**6))
    monkeypatch.setattr(time_budget, "now", lambda: float(next(readings)))
    out = tmp_path / "budget"
    # TINY's max_steps=8 would cap the plan (and end the run inside the measurement): 1,000 does not.
    uncapped = [*TINY, "--set", "train.max_steps=1000"]
    with caplog.at_level(logging.INFO):
        assert (
            main(["train", "copy", "--out", str(out), "--time-budget", "45s", *uncapped, "--set", "train.epochs=50"])
            == 0
        )
    # Epochs given beside a budget are said not to cap the run (was: dropped without a word).
    assert (
        "--set train.epochs=50 with a time budget: the budget sets the run's length; the epochs set only the "
        "configured run whose cool-down the plan scales; to cap the run, give train.max_steps" in caplog.messages
    )
    saved = json.loads((out / "last" / "config.json").read_text(encoding="utf-8"))
    assert saved["train"]["time_budget"] == "45s"
    plan = saved["time_budget_plan"]
    assert plan["budget_seconds"] == 45.0 and plan["measured_steps"] >= 1
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert max(steps) == plan["total_steps"] < 1000

    with pytest.raises(SystemExit) as exit_:
        main(["train", "copy", "--out", str(tmp_path / "short"), "--time-budget", "20s", *TINY])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "argument --time-budget: " in error[0] and "30 s" in error[0], error


def test_tensorboard_flag_writes_event_files_beside_the_log(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    out = tmp_path / "board"
    assert main(["train", "copy", "--out", str(out), "--tensorboard", *TINY]) == 0
    assert json.loads((out / "last" / "config.json").read_text(encoding="utf-8"))["train"]["tensorboard"] is True
    assert [path.name.split(".")[0] for path in (out / "tensorboard").iterdir()] == ["events"]


def test_no_progress_flag_turns_the_bar_off_as_prepares_does(tmp_path: Path) -> None:
    """``train --no-progress``, as ``prepare --no-progress`` (was: refused as unrecognized; only --set said it)."""
    with_bar = TINY[: TINY.index("train.progress_bar=false") - 1]
    assert main(["train", "copy", "--out", str(tmp_path / "quiet"), "--no-progress", *with_bar]) == 0
    saved = json.loads((tmp_path / "quiet" / "last" / "config.json").read_text(encoding="utf-8"))
    assert saved["train"]["progress_bar"] is False
    # Not given, the preset's bar stays (and so does --tensorboard's preset value).
    assert main(["train", "copy", "--out", str(tmp_path / "bar"), *with_bar]) == 0
    saved = json.loads((tmp_path / "bar" / "last" / "config.json").read_text(encoding="utf-8"))
    assert saved["train"]["progress_bar"] is True and saved["train"]["tensorboard"] is False


@pytest.mark.parametrize("source", ["--set", "--config"])
def test_a_synthetic_run_trains_the_task_named_on_the_command_line(
    tmp_path: Path, source: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # data.task is the synthetic config's own field; set to another task, it would train that one as "copy".
    (tmp_path / "task.yaml").write_text("data: {task: sort}\n", encoding="utf-8")
    given = ["--set", "data.task=sort"] if source == "--set" else ["--config", str(tmp_path / "task.yaml")]
    assert main(["train", "copy", "--out", str(tmp_path / "run"), *TINY, *given]) == 2
    error = capsys.readouterr().err.strip()
    assert error.endswith("data.task: expected 'copy' (the task trained) or no setting, got 'sort'"), error
    assert not (tmp_path / "run").exists()
    assert main(["train", "copy", "--out", str(tmp_path / "same"), *TINY, "--set", "data.task=copy"]) == 0


def test_a_best_metric_the_task_does_not_report_is_refused_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Found only at the first validation, it cost the steps before it, with no checkpoint kept.
    out = tmp_path / "run"
    assert main(["train", "copy", "--out", str(out), *TINY, "--set", "train.best_metric=val_bleu"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.endswith("train.best_metric: expected one of val_loss, val_exact_match for this task, got 'val_bleu'")
    assert not out.exists()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        # The preset's mode is max (for val_exact_match): with val_loss it kept the highest loss as best/.
        (
            ["train.best_metric=val_loss"],
            "expected 'min' with train.best_metric 'val_loss' (lower is better), got 'max'",
        ),
        (
            ["train.best_mode=min"],
            "expected 'max' with train.best_metric 'val_exact_match' (higher is better), got 'min'",
        ),
    ],
)
def test_a_best_mode_against_the_direction_of_the_best_metric_is_refused_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], settings: list[str], message: str
) -> None:
    out = tmp_path / "run"
    overrides = [argument for setting in settings for argument in ("--set", setting)]
    assert main(["train", "copy", "--out", str(out), *TINY, *overrides]) == 2
    error = capsys.readouterr().err.strip()
    assert error.endswith(f"train.best_mode: {message}, which would keep its worst value as best/"), error
    assert not out.exists()
    both = ["--set", "train.best_metric=val_loss", "--set", "train.best_mode=min"]
    assert main(["train", "copy", "--out", str(out), *TINY, *both, "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["best_metric"] == "val_loss"


def test_an_option_and_a_set_of_its_key_are_taken_where_they_mean_one_value() -> None:
    # Refused where they differ (one would be dropped without a word); one budget in two spellings is one value.
    import argparse

    from transformer_lab.cli.overrides import resolved_config
    from transformer_lab.tasks.synthetic import train as synthetic_train
    from transformer_lab.training.config_io import Setting

    def resolved(flag: str, override: str) -> object:
        arguments = argparse.Namespace(config=None, overrides=[f"train.time_budget={override}"])
        option = Setting("train.time_budget", flag, "--time-budget")
        config, _ = resolved_config(synthetic_train.default_config(), arguments, flags=[option])
        return config.train.time_budget

    assert resolved("1h", "60m") == "60m"
    assert resolved("90m", "1h30m") == "1h30m"
    with pytest.raises(ValueError, match=r"^--time-budget and --set train\.time_budget: expected one value, got two"):
        resolved("2h", "1h")


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "copy", "--out", "A", "--out", "B"],
        ["train", "translation", "--train", "a.de", "a.en", "--train", "b.de", "b.en", "--out", "A"],
        ["translate", "--checkpoint", "C", "--beam", "2", "--beam=3", "Hallo"],
    ],
    ids=["--out", "--train", "--beam"],
)
def test_an_option_of_one_value_given_twice_is_refused(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: the last kept and the first dropped without a word (--train b alone trained on; --out B written).
    monkeypatch.chdir(tmp_path)
    flag = {"train": "--out", "translate": "--beam"}[argv[0]] if "--train" not in argv[2:] else "--train"
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip() == (
        f"transformer-lab {argv[0]}: error: {flag}: expected once, got it 2 times (the last would replace the "
        f"others) (see transformer-lab {argv[0]} --help)"
    )
    assert list(tmp_path.iterdir()) == []
    # A switch given twice says the same twice: not refused.
    assert main(["explain", "--full", "--full"]) == 0


def test_a_beam_setting_beside_a_greedy_search_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Was recorded in config.json and never used (the copy preset searches greedily); the server refuses it.
    out = tmp_path / "run"
    for setting in ("decode.beam_size=8", "decode.length_penalty=1.0"):
        assert main(["train", "copy", "--out", str(out), "--set", setting]) == 2
        key = setting.split("=")[0]
        assert capsys.readouterr().err.strip() == (
            f"transformer-lab train: error: {key}: expected it only with decode.strategy beam, which it steers, got "
            "a greedy search (set decode.strategy=beam, or leave it out)"
        )
    assert not out.exists()
