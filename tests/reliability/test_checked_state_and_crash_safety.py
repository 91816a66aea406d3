"""Crash safety at every moment of a save, and stored state that is checked before use."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
import torch

from tests.reliability.crash_driver import short_config
from tests.reliability.tiny_runs import tiny_copy_options
from transformer_lab.cli import main
from transformer_lab.tasks.synthetic import train as synthetic_train
from transformer_lab.training import load_trainer_state
from transformer_lab.training.checkpoint import TRAINER_STATE_FILE
from transformer_lab.training.run import run_folder as run_folder_module


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("round-two") / "run"
    synthetic_train.train(short_config(6), out)
    return out


def test_a_kill_while_pruning_leaves_no_partial_step_folder_and_resume_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run"
    real_delete = run_folder_module._delete_tree

    class Killed(BaseException):
        pass

    def die_after_the_first_file(path: Path) -> None:
        first = next(entry for entry in sorted(path.iterdir()) if entry.is_file())
        first.unlink()
        raise Killed  # as a SIGKILL would, mid-deletion

    monkeypatch.setattr(run_folder_module, "_delete_tree", die_after_the_first_file)
    with pytest.raises(Killed):
        synthetic_train.train(short_config(16), out)  # keep_last=2: the third save prunes
    monkeypatch.setattr(run_folder_module, "_delete_tree", real_delete)
    leftovers = [path.name for path in out.iterdir() if path.name.endswith(".pruned")]
    assert leftovers, "the kill should have left the folder being pruned"
    for folder in out.iterdir():
        if folder.name.startswith("step-"):  # every folder under a checkpoint's name is whole
            synthetic_train.load(folder)
            assert load_trainer_state(folder)["global_step"] > 0
    synthetic_train.train(short_config(16), out, resume=True)
    assert not [path for path in out.iterdir() if path.name.endswith(".pruned")]
    assert load_trainer_state(out / "last")["global_step"] == 16


def test_a_folder_killed_before_its_first_checkpoint_starts_afresh_keeping_its_log(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"event": "train", "step": 1}\n', encoding="utf-8")
    (out / ".last.tmp-abc123").mkdir()  # a save that never finished
    assert main(["train", "copy", "--out", str(out), "--resume"]) == 2  # nothing to resume: said plainly
    arguments = ["train", "copy", "--out", str(out), *tiny_copy_options()]
    assert main(arguments) == 0
    assert (out / "metrics.jsonl.interrupted-1").read_text(encoding="utf-8") == '{"event": "train", "step": 1}\n'
    assert (out / "last").is_dir() and not (out / ".last.tmp-abc123").exists()
    with pytest.raises(ValueError, match="already holds a run; pass --resume"):
        run_folder_module.prepare_new_run(out)
    other = tmp_path / "someone-elses"
    other.mkdir()
    (other / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ValueError, match="holding notes.txt; choose a new folder"):
        run_folder_module.prepare_new_run(other)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_out_is_refused_before_training(tmp_path: Path) -> None:
    out = tmp_path / "locked"
    out.mkdir()
    out.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with pytest.raises(ValueError, match="expected a folder this user can write"):
            run_folder_module.check_writable(out)
    finally:
        out.chmod(stat.S_IRWXU)


def test_a_read_only_out_is_refused_before_training_even_for_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run"

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(run_folder_module.tempfile, "NamedTemporaryFile", refuse)
    with pytest.raises(
        ValueError, match=r"--out: expected a folder this user can write, got .*run \(Permission denied\)"
    ):
        run_folder_module.check_writable(out)


CORRUPTIONS = {
    "empty optimizer state": (lambda state: state.update(optimizer={}), r"optimizer: expected an optimizer state_dict"),
    "string for the random state": (lambda state: state.update(rng="seed"), r"rng: expected a mapping"),
    "string for torch's random state": (
        lambda state: state["rng"].update(torch="x"),
        r"rng\.torch: expected a 1-D uint8",
    ),
    "empty schedule": (lambda state: state.update(scheduler={}), r"scheduler: expected a schedule state_dict"),
    "negative step": (lambda state: state.update(global_step=-50), r"global_step: expected an int >= 0, got int -50"),
    "moments of the wrong shape": (
        lambda state: next(iter(state["optimizer"]["state"].values())).update(exp_avg=torch.zeros(3, 3)),
        r"optimizer\.state\[0\]\.exp_avg: expected a tensor of the parameter's shape",
    ),
    "one parameter group too many": (
        lambda state: state["optimizer"]["param_groups"].append(dict(state["optimizer"]["param_groups"][0])),
        r"optimizer\.param_groups: expected a list of 1 parameter group",
    ),
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_a_trainer_state_of_the_wrong_structure_is_refused_before_anything_changes(
    trained: Path, tmp_path: Path, name: str
) -> None:
    out = tmp_path / "run"
    shutil.copytree(trained, out)
    corrupt, message = CORRUPTIONS[name]
    state = load_trainer_state(out / "last")
    corrupt(state)
    torch.save(state, out / "last" / TRAINER_STATE_FILE)
    log_before = (out / "metrics.jsonl").read_bytes()
    weights_before = (out / "last" / "model.safetensors").read_bytes()
    with pytest.raises(ValueError, match=message) as error:
        synthetic_train.train(short_config(8), out, resume=True)
    assert str(out / "last" / TRAINER_STATE_FILE) in str(error.value)
    assert (out / "metrics.jsonl").read_bytes() == log_before  # the log is never cut on a bad state
    assert (out / "last" / "model.safetensors").read_bytes() == weights_before


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("dim_feedforward", 10**12, r"dim_feedforward: expected an int in \[1, 1,048,576\], got 1000000000000"),
        (
            "dim_feedforward",
            10**6,
            r"expected weights of the shapes .*linear1\.weight: stored \[32, 16\], model \[1000000, 16\]",
        ),
        ("max_len", 10**10, r"max_len: expected an int in \[1, 65,536\], got 10000000000"),
        ("d_model", 4096, r"stored \[\d+, 16\], model \[\d+, 4096\]"),
        ("num_encoder_layers", 10_000, r"num_encoder_layers: expected an int in \[1, 1,024\], got 10000"),
        ("num_decoder_layers", 200, r"got [\d,]+ of them missing from the file \(first \['transformer\.decoder"),
    ],
)
def test_sizes_in_config_json_are_checked_against_the_weights_before_anything_is_allocated(
    trained: Path, tmp_path: Path, field: str, value: int, message: str
) -> None:
    import json
    import resource
    import time

    folder = tmp_path / "last"
    shutil.copytree(trained / "last", folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config["model"][field] = value
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    started = time.perf_counter()
    with pytest.raises(ValueError, match=message) as error:
        synthetic_train.load(folder)
    assert "config.json" in str(error.value)
    assert time.perf_counter() - started < 5.0
    # Nothing of the asked size was built: 1e7 x 16 floats alone would be 640 MB.
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before < 200_000


@pytest.mark.parametrize("penalty", [1e308, -1000.0, 10.5, float("inf")])
def test_an_extreme_length_penalty_is_refused_with_its_range(penalty: float) -> None:
    from transformer_lab.decoding import DecodeConfig, beam_search

    with pytest.raises(ValueError, match=r"length_penalty: expected a float in \[0, 10\]"):
        DecodeConfig(length_penalty=penalty)
    with pytest.raises(ValueError, match=r"length_penalty: expected a float in \[0, 10\]"):
        beam_search(object(), torch.tensor([[4, 5]]), 2, 5, length_penalty=penalty)  # type: ignore[arg-type]


def test_the_beam_has_a_stated_cap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.reliability.builders import write_translation_checkpoint
    from transformer_lab.api import Translator
    from transformer_lab.decoding import DecodeConfig

    assert DecodeConfig(beam_size=64).beam_size == 64
    with pytest.raises(ValueError, match=r"beam_size: expected at most 64 .*given 10000"):
        DecodeConfig(beam_size=10_000)
    checkpoint = write_translation_checkpoint(tmp_path / "translation")
    # The command line names the option typed, the API its keyword (not the config's field).
    assert main(["translate", "--checkpoint", str(checkpoint), "--beam", "10000", "Ein Mann."]) == 2
    assert "error: --beam: expected at most 64, got 10000" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"^beam: expected at most 64, got 65$"):
        Translator(checkpoint).translate("Ein Mann.", beam=65)


def test_duplicate_class_names_are_refused_naming_the_file_and_the_name(tmp_path: Path) -> None:
    from transformer_lab.data.ag_news import CLASSES_FILE, read_classes_file, resolve_ag_news_dir

    folder = tmp_path / "ag_news"
    folder.mkdir()
    (folder / "classes.txt").write_text("World\nSports\nWorld\nSci/Tech\n", encoding="utf-8")
    with pytest.raises(
        ValueError, match=r"classes\.txt: line 3: expected distinct class names, got 'World' again \(line 1\)"
    ):
        read_classes_file(resolve_ag_news_dir(tmp_path) / CLASSES_FILE)


def test_the_unseen_characters_note_escapes_what_a_terminal_would_act_on() -> None:
    from transformer_lab.data import Vocabulary
    from transformer_lab.data.couplet import check_upper_line

    vocabulary = Vocabulary.build([list("春风")])
    error, note = check_upper_line("春\x00风\x07\u200b雨", vocabulary, max_len=32)
    assert error is None and note is not None
    assert not any(character in note for character in "\x00\x07\u200b")
    assert "\\u0000" in note and "\\u0007" in note and "\\u200b" in note and "雨" in note


def test_weights_with_nan_load_with_a_warning_naming_them(
    trained: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "last"
    shutil.copytree(trained / "last", folder)
    weights = load_file(str(folder / "model.safetensors"))
    name = sorted(weights)[0]
    weights[name] = torch.full_like(weights[name], float("nan"))
    save_file(weights, str(folder / "model.safetensors"))
    with caplog.at_level("WARNING"):
        synthetic_train.load(folder)
    assert any("NaN or inf" in record.getMessage() and name in record.getMessage() for record in caplog.records)
    caplog.clear()
    with caplog.at_level("WARNING"):
        synthetic_train.load(trained / "last")
    assert not any("NaN or inf" in record.getMessage() for record in caplog.records)


def test_average_checkpoints_skips_an_incomplete_step_folder_by_name(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    steps = sorted(path for path in run.iterdir() if path.name.startswith("step-"))
    (steps[-1] / "model.safetensors").unlink()  # what an old, non-atomic prune could leave
    assert main(["average-checkpoints", "--run", str(run), "--last", "1", "--out", str(tmp_path / "avg")]) == 0
    assert f"skipping {steps[-1]}" in capsys.readouterr().err
    synthetic_train.load(tmp_path / "avg")


def test_average_checkpoints_leaves_out_the_temporary_a_killed_write_left(trained: Path, tmp_path: Path) -> None:
    # An evaluate killed while writing its hypotheses (or the card) leaves a hidden temporary in one step folder.
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    steps = sorted(path for path in run.iterdir() if path.name.startswith("step-"))
    (steps[0] / ".hypotheses.test.greedy.txt.991ea993.tmp").write_text("a partial line", encoding="utf-8")
    out = tmp_path / "avg"
    # Was: "sources: expected the same tokenizer and vocabulary files in every checkpoint, got [...tmp...]".
    assert main(["average-checkpoints", "--run", str(run), "--last", str(len(steps)), "--out", str(out)]) == 0
    assert not [path.name for path in out.iterdir() if path.name.startswith(".")]
    synthetic_train.load(out)
