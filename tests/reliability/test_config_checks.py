"""``config.json`` is checked whole before anything is built, and ``--resume`` continues only the run it names.

Every model field is checked for type, sign and range as the config is read; layer counts
and sizes are compared with the weights' header (names and shapes) before any layer is
allocated; the special ids must be the vocabulary's own; ``train --resume`` refuses another
task, another synthetic task, another file format or other training files, in one line.
"""

from __future__ import annotations

import json
import re
import resource
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.tiny_runs import tiny_copy_options
from transformer_lab.cli import main
from transformer_lab.tasks.synthetic import train as synthetic_train
from transformer_lab.tasks.translation import train as translation_train
from transformer_lab.training import load_trainer_state
from transformer_lab.training.checkpoint import CONFIG_FILE


@pytest.fixture(scope="module")
def copy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("config-checks") / "copy"
    assert main(["train", "copy", "--out", str(out), *tiny_copy_options(max_steps=2)]) == 0
    return out


def edited(source: Path, folder: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    shutil.copytree(source, folder)
    config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    edit(config)
    (folder / CONFIG_FILE).write_text(json.dumps(config), encoding="utf-8")
    return folder


def model_field(name: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda config: config["model"].update({name: value})


# field, value, what the message says (after "config.json: ")
BAD_FIELDS = [
    ("dim_feedforward", -5, r"dim_feedforward: expected an int in \[1, 1,048,576\], got -5"),
    ("dim_feedforward", 0, r"dim_feedforward: expected an int in \[1, 1,048,576\], got 0"),
    ("d_model", -16, r"d_model: expected an int in \[2, 65,536\], got -16"),
    ("d_model", 15, r"d_model: expected an even int"),
    ("d_model", "16", r"model\.d_model: expected an int, got '16'"),
    ("nhead", 0, r"nhead: expected an int in \[1, 16\], got 0"),
    ("nhead", 3, r"nhead: expected a divisor of d_model=16, got 3"),
    ("num_encoder_layers", 10_000, r"num_encoder_layers: expected an int in \[1, 1,024\], got 10000"),
    ("num_decoder_layers", -1, r"num_decoder_layers: expected an int in \[1, 1,024\], got -1"),
    ("num_decoder_layers", 2.5, r"model\.num_decoder_layers: expected an int, got 2\.5"),
    ("dropout", 1.5, r"dropout: expected a float in \[0, 1\), got 1\.5"),
    ("dropout", -0.1, r"dropout: expected a float in \[0, 1\), got -0\.1"),
    ("max_len", 0, r"max_len: expected an int in \[1, 65,536\], got 0"),
    ("max_len", 10**10, r"max_len: expected an int in \[1, 65,536\], got 10000000000"),
    ("activation", "tanh", r"model\.activation: expected a str|activation: expected one of \['relu', 'gelu'\]"),
    ("tie_embeddings", "both", r"model\.tie_embeddings: expected one of \['none', 'decoder', 'all'\]"),
    ("norm_first", "yes", r"model\.norm_first: expected a bool"),
    ("src_vocab_size", -3, r"src_vocab_size: expected an int in \[0, 1,048,576\], got -3"),
    ("tgt_vocab_size", 10**9, r"tgt_vocab_size: expected an int in \[0, 1,048,576\], got 1000000000"),
    ("pad_id", -1, r"pad_id: expected a token id in \[0, 13\]"),
    ("eos_id", 14, r"eos_id: expected a token id in \[0, 13\] \(tgt_vocab_size=14\), got 14"),
    ("dim_feedforward", 1 << 20, r"model: expected at most 4,294,967,296 parameters|linear1\.weight"),
]


@pytest.mark.parametrize(("field", "value", "message"), BAD_FIELDS, ids=[f"{f}={v!r}" for f, v, _ in BAD_FIELDS])
def test_every_model_field_is_checked_before_anything_is_built(
    copy_run: Path, tmp_path: Path, field: str, value: Any, message: str
) -> None:
    folder = edited(copy_run / "last", tmp_path / "last", model_field(field, value))
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    started = time.perf_counter()
    with pytest.raises(ValueError, match=message) as error:
        synthetic_train.load(folder)
    assert str(folder / CONFIG_FILE) in str(error.value)
    assert time.perf_counter() - started < 2.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before < 100_000


def test_a_model_too_large_for_any_machine_is_refused_naming_its_sizes(copy_run: Path, tmp_path: Path) -> None:
    def huge(config: dict[str, Any]) -> None:
        config["model"].update(d_model=65_536, nhead=2, dim_feedforward=1 << 20)

    folder = edited(copy_run / "last", tmp_path / "last", huge)
    with pytest.raises(ValueError, match=r"config\.json: model: expected at most 4,294,967,296 parameters, got a"):
        synthetic_train.load(folder)


def test_a_layer_count_the_weights_lack_is_refused_from_the_header(copy_run: Path, tmp_path: Path) -> None:
    folder = edited(copy_run / "last", tmp_path / "last", model_field("num_encoder_layers", 3))
    with pytest.raises(
        ValueError,
        match=r"config\.json: .*model\.safetensors.*got 2\d of them missing from the file "
        r"\(first \['transformer\.encoder\.layers\.1\.",
    ):
        synthetic_train.load(folder)


def test_a_layer_count_the_weights_lack_is_one_line_from_the_command_line(
    translation_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = edited(translation_checkpoint, tmp_path / "last", model_field("num_decoder_layers", 40))
    assert main(["translate", "--checkpoint", str(folder), "Ein Hund."]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "missing from the file" in error and str(folder / CONFIG_FILE) in error


@pytest.mark.parametrize(("field", "value"), [("eos_id", 5), ("bos_id", 1), ("pad_id", 3)])
def test_special_ids_other_than_the_tokenizers_are_refused(
    translation_checkpoint: Path, tmp_path: Path, field: str, value: int
) -> None:
    folder = edited(translation_checkpoint, tmp_path / "last", model_field(field, value))
    expected = {"eos_id": (3, "<eos>"), "bos_id": (2, "<bos>"), "pad_id": (0, "<pad>")}[field]
    with pytest.raises(ValueError) as error:
        translation_train.load_translator(folder)
    assert str(error.value) == (
        f"{folder / CONFIG_FILE}: model.{field}: expected {expected[0]}, the id of {expected[1]} in "
        f"{folder / 'tokenizer.json'}, got {value}"
    )


def test_special_ids_of_a_copy_task_checkpoint_are_checked_too(copy_run: Path, tmp_path: Path) -> None:
    folder = edited(copy_run / "last", tmp_path / "last", model_field("eos_id", 5))
    with pytest.raises(ValueError, match=r"config\.json: model\.eos_id: expected 3, the id of <eos>"):
        synthetic_train.load(folder)


def test_a_special_id_set_for_training_is_refused_not_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(["train", "copy", "--out", str(out), *tiny_copy_options(model__eos_id=5)]) == 2
    assert "model.eos_id: expected 3, the id of <eos>" in capsys.readouterr().err
    assert not (out / "last").exists()


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != ".lock"
    }


def test_resume_refuses_another_synthetic_task(
    copy_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    shutil.copytree(copy_run, out)
    before = snapshot(out)
    assert main(["train", "reverse", "--out", str(out), "--resume", *tiny_copy_options(max_steps=4)]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error
    assert f"--resume: {out / 'last' / CONFIG_FILE}: expected the data the run was started with" in error
    assert "data.task: 'copy' in the run, 'reverse' now" in error
    assert snapshot(out) == before


def test_resume_refuses_another_task(copy_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    shutil.copytree(copy_run, out)
    before = snapshot(out)
    source, target = tmp_path / "a.de", tmp_path / "a.en"
    source.write_text("ein Hund\n" * 20, encoding="utf-8")
    target.write_text("a dog\n" * 20, encoding="utf-8")
    code = main(["train", "translation", "--out", str(out), "--resume", "--train", str(source), str(target)])
    assert code == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error
    assert "expected a run of the task this command trains ('translation'), got a run of 'synthetic'" in error
    assert snapshot(out) == before


TINY_TRANSLATION = [
    *("--set", "data.vocab_size=300", "--set", "data.min_frequency=1", "--set", "data.max_tokens=256"),
    *("--set", "model.d_model=16", "--set", "model.nhead=2", "--set", "model.num_encoder_layers=1"),
    *("--set", "model.num_decoder_layers=1", "--set", "model.dim_feedforward=32", "--set", "model.max_len=32"),
    *("--set", "train.max_steps=1", "--set", "train.warmup_steps=1", "--set", "train.cooldown_steps=0"),
    *("--set", "train.progress_bar=false", "--set", "decode.max_len=8", "--set", "data.num_carved_validation=4"),
]
# The same on the preset's data folder, whose validation split is its own: nothing is carved.
TINY_MULTI30K = TINY_TRANSLATION[:-2]
assert TINY_TRANSLATION[-2:] == ["--set", "data.num_carved_validation=4"]


def numbered(sentence: str, count: int = 30) -> str:
    """``count`` lines of ``sentence`` told apart by a number: a carve leaves a held-out sentence's repeats out."""
    return "".join(f"{sentence} {number}\n" for number in range(count))


def test_resume_refuses_other_training_files_and_another_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {}
    for name, (german, english) in {"a": ("ein Hund", "a dog"), "b": ("zwei Katzen", "two cats")}.items():
        files[name] = (tmp_path / f"{name}.de", tmp_path / f"{name}.en")
        files[name][0].write_text(numbered(german), encoding="utf-8")
        files[name][1].write_text(numbered(english), encoding="utf-8")
    (tmp_path / "a.tsv").write_text(
        "".join(f"ein Hund {number}\ta dog {number}\n" for number in range(30)), encoding="utf-8"
    )
    out = tmp_path / "run"
    first = ["train", "translation", "--out", str(out), "--train", *map(str, files["a"]), *TINY_TRANSLATION]
    assert main(first) == 0
    capsys.readouterr()
    before = snapshot(out)
    other = ["train", "translation", "--out", str(out), "--resume", "--train", *map(str, files["b"]), *TINY_TRANSLATION]
    assert main(other) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "data.train_files: [" in error and "b.de" in error and "in the run" in error
    tsv = ["train", "translation", "--out", str(out), "--resume", "--train", str(tmp_path / "a.tsv"), *TINY_TRANSLATION]
    assert main(tsv) == 2
    assert "data.train_files" in capsys.readouterr().err
    assert snapshot(out) == before
    same = ["train", "translation", "--out", str(out), "--resume", "--train", *map(str, files["a"]), *TINY_TRANSLATION]
    assert main([*same, "--set", "train.max_steps=2"]) == 0


def test_resume_without_last_advises_a_step_folder_to_resume_from_or_to_fine_tune_and_both_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.de").write_text(numbered("ein Hund"), encoding="utf-8")
    (tmp_path / "a.en").write_text(numbered("a dog"), encoding="utf-8")
    out = tmp_path / "run"
    command = ["train", "translation", "--train", str(tmp_path / "a.de"), str(tmp_path / "a.en"), *TINY_TRANSLATION]
    saves = ["--set", "train.eval_every_steps=1", "--set", "train.keep_last=2"]
    assert main([*command, "--out", str(out), *saves, "--set", "train.max_steps=2"]) == 0
    shutil.rmtree(out / "last")
    capsys.readouterr()
    assert main([*command, "--out", str(out), "--resume", *saves, "--set", "train.max_steps=2"]) == 2
    error = capsys.readouterr().err.strip()
    # It listed the folders and gave no way on.
    step = out / "step-000002"
    assert error.endswith(
        f"found only best, step-000001, step-000002; to continue from step-000002, copy it to last/ "
        f"(cp -r {step} {out / 'last'}) and resume, or start a new run from its weights with --init-from {step} "
        "--out NEW_FOLDER (a fine-tune: a new optimizer and the fine-tuning schedule)"
    ), error
    # Each way works: a new run from the step folder, and the step folder copied to last/ resumed.
    assert main([*command, "--out", str(tmp_path / "new"), "--init-from", str(step)]) == 0
    shutil.copytree(step, out / "last")
    assert main([*command, "--out", str(out), "--resume", *saves, "--set", "train.max_steps=3"]) == 0
    assert load_trainer_state(out / "last")["global_step"] == 3


def test_resume_from_another_folder_reads_the_files_the_run_read_not_the_same_relative_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder, (german, english) in {"first": ("ein Hund", "a dog"), "other": ("zwei Katzen", "two cats")}.items():
        (tmp_path / folder / "d").mkdir(parents=True)
        (tmp_path / folder / "d" / "t.de").write_text(numbered(german), encoding="utf-8")
        (tmp_path / folder / "d" / "t.en").write_text(numbered(english), encoding="utf-8")
    out = tmp_path / "run"
    monkeypatch.chdir(tmp_path / "first")
    assert main(["train", "translation", "--out", str(out), "--train", "d/t.de", "d/t.en", *TINY_TRANSLATION]) == 0
    capsys.readouterr()
    recorded = json.loads((out / "last" / CONFIG_FILE).read_text(encoding="utf-8"))["data"]["train_files"]
    assert recorded == [str(tmp_path / "first" / "d" / "t.de"), str(tmp_path / "first" / "d" / "t.en")]
    before = snapshot(out)
    # The same relative names from another folder are other files: refused (was: trained on them).
    monkeypatch.chdir(tmp_path / "other")
    resume = ["train", "translation", "--out", str(out), "--resume", *TINY_TRANSLATION, "--set", "train.max_steps=2"]
    assert main([*resume, "--train", "d/t.de", "d/t.en"]) == 2
    error = capsys.readouterr().err
    assert "data.train_files" in error and str(tmp_path / "other" / "d" / "t.de") in error
    assert snapshot(out) == before
    # The run's own files, named from elsewhere, continue it (was: refused, the old names read from here).
    monkeypatch.chdir(tmp_path)
    assert main([*resume, "--train", "first/d/t.de", "first/d/t.en"]) == 0


def test_resume_refuses_its_prepared_folder_prepared_again_from_other_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = {"a": ("ein Hund", "a dog"), "b": ("zwei Katzen", "two cats")}
    files = {name: (tmp_path / f"{name}.de", tmp_path / f"{name}.en") for name in texts}
    for name, (german, english) in texts.items():
        files[name][0].write_text(numbered(german), encoding="utf-8")
        files[name][1].write_text(numbered(english), encoding="utf-8")
    folder = tmp_path / "prepared"
    settings = ["--no-progress", "--set", "data.num_carved_validation=4"]

    def prepare(name: str, tokenizer: list[str]) -> None:
        shutil.rmtree(folder, ignore_errors=True)
        prepare = ["prepare", "translation", "--train", *map(str, files[name]), "--out", str(folder), *settings]
        assert main([*prepare, *tokenizer]) == 0

    prepare("a", ["--set", "data.min_frequency=1"])
    # One tokenizer for every corpus below: only the corpus differs, which no tokenizer check can see.
    tokenizer = ["--set", f"data.tokenizer_file={shutil.copy(folder / 'tokenizer.json', tmp_path / 'bpe.json')}"]
    prepare("a", tokenizer)
    out = tmp_path / "run"
    model = [*("--set", "model.d_model=16", "--set", "model.nhead=2", "--set", "model.dim_feedforward=32")]
    model += ["--set", "train.max_steps=1", "--set", "train.progress_bar=false", "--set", "decode.max_len=8"]
    assert main(["train", "translation", "--prepared", str(folder), "--out", str(out), *model]) == 0
    resume = ["train", "translation", "--resume", "--prepared", str(folder), "--out", str(out), *model]
    resume += ["--set", "train.max_steps=2"]
    before = snapshot(out)
    refusal = f"--resume: data.prepared_dir: expected the corpus the run started on, got {folder}, which was prepared"
    prepare("b", tokenizer)  # the same folder, from other files (was: the run trained on them)
    capsys.readouterr()
    assert main(resume) == 2
    a_files, b_files = (", ".join(map(str, files[name])) for name in "ab")
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and error.endswith(
        f"{refusal} again from {b_files} (the run's corpus from {a_files}); resume with that corpus, "
        "or train into a new --out"
    )
    files["a"][0].write_text(numbered("ein Hund", 29) + "eine Katze\n", encoding="utf-8")
    prepare("a", tokenizer)  # the same files, changed since the run started
    capsys.readouterr()
    assert main(resume) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and f"{refusal} again from {files['a'][0]} after it changed (another sha256" in error
    assert snapshot(out) == before
    files["a"][0].write_text(numbered("ein Hund"), encoding="utf-8")
    prepare("a", tokenizer)  # prepared again as it was: the corpus the run started on
    assert main(resume) == 0


def test_resume_follows_its_prepared_folder_moved_elsewhere_and_refuses_another_corpus_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {name: (tmp_path / f"{name}.de", tmp_path / f"{name}.en") for name in "ab"}
    for name, (german, english) in {"a": ("ein Hund", "a dog"), "b": ("zwei Katzen", "two cats")}.items():
        files[name][0].write_text(numbered(german), encoding="utf-8")
        files[name][1].write_text(numbered(english), encoding="utf-8")
    settings = ["--no-progress", "--set", "data.num_carved_validation=4", "--set", "data.min_frequency=1"]
    for name in "ab":
        prepare = ["prepare", "translation", "--train", *map(str, files[name]), "--out", str(tmp_path / name)]
        assert main([*prepare, *settings]) == 0
    out = tmp_path / "run"
    model = [*("--set", "model.d_model=16", "--set", "model.nhead=2", "--set", "model.dim_feedforward=32")]
    model += ["--set", "train.max_steps=1", "--set", "train.progress_bar=false", "--set", "decode.max_len=8"]
    assert main(["train", "translation", "--prepared", str(tmp_path / "a"), "--out", str(out), *model]) == 0
    moved = tmp_path / "bigger-disk" / "a"
    moved.parent.mkdir()
    shutil.move(tmp_path / "a", moved)  # the same corpus, elsewhere
    resume = ["train", "translation", "--resume", "--out", str(out), *model, "--set", "train.max_steps=2"]
    before = snapshot(out)
    capsys.readouterr()
    assert main([*resume, "--prepared", str(tmp_path / "b")]) == 2  # another corpus in another folder
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "--resume: data.prepared_dir: expected the corpus the run started on" in error
    assert snapshot(out) == before
    # Was: "data.prepared_dir: '.../a' in the run, '.../bigger-disk/a' now", so a moved corpus could not be resumed.
    assert main([*resume, "--prepared", str(moved)]) == 0
    saved = json.loads((out / "last" / CONFIG_FILE).read_text(encoding="utf-8"))
    assert saved["data"]["prepared_dir"] == str(moved)


def test_resume_refuses_a_linked_data_file_pointed_since_at_other_contents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # t.de -> v1.de, the "current version" link a data folder keeps; then pointed at v2.de.
    versions = {name: tmp_path / f"{name}.de" for name in ("v1", "v2", "v1-copy")}
    versions["v1"].write_text(numbered("ein Hund"), encoding="utf-8")
    versions["v2"].write_text(numbered("eine Katze"), encoding="utf-8")
    versions["v1-copy"].write_text(numbered("ein Hund"), encoding="utf-8")
    link, target = tmp_path / "t.de", tmp_path / "t.en"
    link.symlink_to(versions["v1"].name)
    target.write_text(numbered("a dog"), encoding="utf-8")
    out = tmp_path / "run"
    command = ["train", "translation", "--out", str(out), "--train", str(link), str(target), *TINY_TRANSLATION]
    assert main(command) == 0
    resume = [*command, "--resume", "--set", "train.max_steps=2"]
    before = snapshot(out)
    link.unlink()
    link.symlink_to(versions["v2"].name)
    capsys.readouterr()
    # Was: exit 0, the cache prepared v2.de and the run went on from its step on the other data.
    assert main(resume) == 2
    error = capsys.readouterr().err.strip()
    assert (
        "\n" not in error
        and (
            f"--resume: expected the data files the run started on, got other contents: {link} now leads to "
            f"{versions['v2']}, which the run never read"
        )
        in error
    )
    assert snapshot(out) == before
    link.unlink()
    link.symlink_to(versions["v1-copy"].name)  # other file, the same bytes: the run's data
    assert main(resume) == 0


def test_resume_refuses_its_own_files_changed_since_the_run_began(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = (tmp_path / "t.de", tmp_path / "t.en")
    files[0].write_text(numbered("ein Hund"), encoding="utf-8")
    files[1].write_text(numbered("a dog"), encoding="utf-8")
    out = tmp_path / "run"
    command = ["train", "translation", "--out", str(out), "--train", *map(str, files), *TINY_TRANSLATION]
    assert main(command) == 0
    resume = [*command, "--resume", "--set", "train.max_steps=2"]
    before = snapshot(out)
    files[0].write_text(numbered("ein Hund", 29) + "eine Katze\n", encoding="utf-8")
    capsys.readouterr()
    # Was: the cache prepared the file again and the run went on from its step on the other data, exit 0.
    assert main(resume) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and error.endswith(
        f"--resume: expected the data files the run started on, got other contents: {files[0]} changed size "
        "(350 -> 349 bytes); restore it, or train into a new --out (--init-from fine-tunes the run on the new data)"
    )
    assert snapshot(out) == before
    files[0].write_text(numbered("ein Hund"), encoding="utf-8")  # restored: the same bytes, a new mtime
    assert main(resume) == 0


def test_resume_refuses_the_multi30k_files_changed_since_the_run_began(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The preset's corpus is read whole, not prepared: was not compared at all, the run went on, exit 0.
    folder = tmp_path / "data" / "multi30k"
    for split in ("train", "val"):
        (folder / f"{split}.de").parent.mkdir(parents=True, exist_ok=True)
        (folder / f"{split}.de").write_text(numbered("ein Hund"), encoding="utf-8")
        (folder / f"{split}.en").write_text(numbered("a dog"), encoding="utf-8")
    out = tmp_path / "run"
    command = ["train", "translation", "--out", str(out), "--data-dir", str(tmp_path / "data"), *TINY_MULTI30K]
    assert main(command) == 0
    resume = [*command, "--resume", "--set", "train.max_steps=2"]
    before = snapshot(out)
    (folder / "train.en").write_text(numbered("a dog", 29) + "a cat\n", encoding="utf-8")
    capsys.readouterr()
    assert main(resume) == 2
    changed = f"got other contents: {folder / 'train.en'} changed size (260 -> 257 bytes); restore it, or train"
    assert f"--resume: expected the data files the run started on, {changed}" in capsys.readouterr().err
    assert snapshot(out) == before
    (folder / "train.en").write_text(numbered("a dog"), encoding="utf-8")
    assert main(resume) == 0


DATA_CHANGED = "expected the data the run was started with (and its seed)"
MODEL_CHANGED = "expected the model the run was started with"


@pytest.mark.parametrize(
    ("setting", "refusal", "difference"),
    [
        ("data.num_train=32", DATA_CHANGED, "data.num_train: 64 in the run, 32 now"),
        ("data.seed=7", DATA_CHANGED, "data.seed: 1234 in the run, 7 now"),
        ("train.seed=5", DATA_CHANGED, "train.seed: 0 in the run, 5 now"),
        ("data.batch_size=16", DATA_CHANGED, "data.batch_size: 64 in the run, 16 now"),
        # Taken silently before: config.json said gelu for the steps trained with relu.
        ("model.activation=gelu", MODEL_CHANGED, "model.activation: 'relu' in the run, 'gelu' now"),
        ("model.norm_first=true", MODEL_CHANGED, "model.norm_first: False in the run, True now"),
        ("model.dropout=0.1", MODEL_CHANGED, "model.dropout: 0.0 in the run, 0.1 now"),
        ("model.d_model=32", MODEL_CHANGED, "model.d_model: 16 in the run, 32 now"),
    ],
)
def test_resume_refuses_other_data_model_or_seed_settings(
    copy_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], setting: str, refusal: str, difference: str
) -> None:
    out = tmp_path / "run"
    shutil.copytree(copy_run, out)
    before = snapshot(out)
    name, value = setting.split("=")
    options = tiny_copy_options(max_steps=4, **{name.replace(".", "__"): value})
    assert main(["train", "copy", "--out", str(out), "--resume", *options]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error
    assert f"--resume: {out / 'last' / CONFIG_FILE}: {refusal}" in error
    assert difference in error and "trainer_state" not in error
    assert snapshot(out) == before
    saved = json.loads((out / "last" / CONFIG_FILE).read_text(encoding="utf-8"))
    assert str(saved[name.split(".")[0]][name.split(".")[1]]).lower() != value  # the run's value is kept


def test_resume_with_max_steps_below_the_steps_taken_is_refused(
    copy_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    shutil.copytree(copy_run, out)
    before = snapshot(out)
    # The run took 2 steps; it exited 0 saying it "stopped by max_steps" at 1, having trained nothing.
    assert main(["train", "copy", "--out", str(out), "--resume", *tiny_copy_options(max_steps=1)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.endswith(
        "train.max_steps: expected at least the 2 steps the run in "
        f"{out / 'last'} has taken (more to train further), got 1"
    )
    assert snapshot(out) == before


def test_resume_with_fewer_epochs_than_the_run_has_begun_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As for max_steps: it exited 0 saying it "stopped by epochs", having trained nothing.
    out = tmp_path / "run"

    def train(epochs: int, max_steps: int, *extra: str) -> int:
        options = tiny_copy_options(max_steps=max_steps, train__epochs=epochs, data__batch_size=16)
        return main(["train", "copy", "--out", str(out), *options, *extra])

    assert train(3, 6) == 0  # 4 steps an epoch: stopped at batch 2 of the second
    capsys.readouterr()
    before = snapshot(out)
    assert train(1, 0, "--resume") == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            f"train.epochs: expected at least the 2 epoch(s) the run in {out / 'last'} has begun "
            "(more to train further), got 1"
        )
    )
    assert snapshot(out) == before
    assert train(2, 0, "--resume") == 0
    assert load_trainer_state(out / "last")["global_step"] == 8
    capsys.readouterr()
    before = snapshot(out)
    assert train(1, 0, "--resume") == 2
    assert "the 2 epoch(s) the run in" in capsys.readouterr().err and snapshot(out) == before
    assert train(2, 0, "--resume") == 0  # the same command again: nothing left to train, as for max_steps


def test_resume_lists_every_differing_vocabulary_setting_and_continues_with_the_same_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = tmp_path / "a.de", tmp_path / "a.en"
    source.write_text(numbered("ein Hund", 15) + numbered("zwei Katzen", 15), encoding="utf-8")
    target.write_text(numbered("a dog", 15) + numbered("two cats", 15), encoding="utf-8")
    first = ["train", "translation", "--out", str(tmp_path / "run"), "--train", str(source), str(target)]
    assert main([*first, *TINY_TRANSLATION]) == 0
    capsys.readouterr()
    before = snapshot(tmp_path / "run")
    other = ["--set", "data.lowercase=true", "--set", "data.min_frequency=2", "--set", "data.vocab_size=280"]
    assert main([*first, "--resume", *TINY_TRANSLATION, *other]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error
    for difference in (
        "data.vocab_size: 300 in the run, 280 now",
        "data.lowercase: False in the run, True now",
        "data.min_frequency: 1 in the run, 2 now",
    ):
        assert difference in error, error
    assert snapshot(tmp_path / "run") == before
    # The model is compared as the run wrote it: vocabulary sizes filled in, another activation refused.
    assert main([*first, "--resume", *TINY_TRANSLATION, "--set", "model.activation=gelu"]) == 2
    assert "model.activation: 'relu' in the run, 'gelu' now" in capsys.readouterr().err
    assert snapshot(tmp_path / "run") == before
    # Only where the data and its caches live may differ.
    moved = ["--set", f"data.cache_dir={tmp_path / 'elsewhere'}", "--set", "train.max_steps=2"]
    assert main([*first, "--resume", *TINY_TRANSLATION, *moved]) == 0


# Edits of the run's last/config.json that the comparison walked past: a section missing is no
# difference to a key-by-key comparison, and a key unknown or of another type was never read.
EDITED_LAST_CONFIGS = [
    (
        "model section removed, resumed with another activation",
        lambda config: config.pop("model"),
        {"model__activation": "gelu"},
        r"expected data, model, train and decode, as training writes them, got none for model; was the file edited\?",
    ),
    (
        "data section removed",
        lambda config: config.pop("data"),
        {},
        r"expected data, model, train and decode, as training writes them, got none for data;",
    ),
    (
        "an unknown key",
        lambda config: config["train"].update(warmup=10),
        {},
        r"train\.warmup: unknown key for TrainConfig; expected one of \[",
    ),
    (
        "a value of another type",
        lambda config: config["data"].update(num_train="64"),
        {},
        r"data\.num_train: expected an int, got '64'$",
    ),
]


@pytest.mark.parametrize(
    ("edit", "settings", "message"),
    [case[1:] for case in EDITED_LAST_CONFIGS],
    ids=[case[0] for case in EDITED_LAST_CONFIGS],
)
def test_resume_reads_the_runs_config_whole_and_refuses_one_edited_by_hand(
    copy_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[dict[str, Any]], None],
    settings: dict[str, str],
    message: str,
) -> None:
    out = tmp_path / "run"
    shutil.copytree(copy_run, out, ignore=shutil.ignore_patterns("last"))
    edited(copy_run / "last", out / "last", edit)
    before = snapshot(out)
    assert main(["train", "copy", "--out", str(out), "--resume", *tiny_copy_options(max_steps=4, **settings)]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "Traceback" not in error
    assert re.search(f"error: --resume: {re.escape(str(out / 'last' / CONFIG_FILE))}: {message}", error), error
    assert snapshot(out) == before


def test_a_library_resume_refuses_a_run_config_without_its_model_section(copy_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(copy_run, out, ignore=shutil.ignore_patterns("last"))
    edited(copy_run / "last", out / "last", lambda config: config.pop("model"))
    config = synthetic_train.default_config("copy")
    with pytest.raises(
        ValueError,
        match=r"last/config\.json: model: expected a JSON object of settings, as training writes it, got none$",
    ):
        synthetic_train.train(config, out, resume=True)


def test_resume_puts_back_the_best_checkpoint_a_stopped_save_left_aside(copy_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(copy_run, out)
    best = snapshot(out / "best")
    # SIGKILL between a save's two renames: best/ renamed aside, the new one never renamed in.
    (out / "best").rename(out / ".best.old-k2j4x9")
    # A resume that trains no further step saves no best/, which would have put it back first.
    assert main(["train", "copy", "--out", str(out), "--resume", *tiny_copy_options(max_steps=2)]) == 0
    assert snapshot(out / "best") == best
    assert not list(out.glob(".best.old-*"))


@pytest.mark.parametrize(
    ("task", "setting", "message"),
    [
        (
            "translation",
            ["--set", "model.src_vocab_size=999"],
            "model.src_vocab_size: expected none (the task sets it from the source vocabulary), got 999",
        ),
        (
            "classification",
            ["--set", "model.num_classes=7"],
            "model.num_classes: expected none (the task sets it from the labels' classes), got 7",
        ),
        (
            "classification",
            ["--set", "class_names=[x,y]"],
            "class_names: expected none (the task reads them from the labels, or the checkpoint's), got ('x', 'y')",
        ),
        (
            "translation",
            ["--config", "{tmp}/run.yaml"],
            "--config {tmp}/run.yaml: model.tgt_vocab_size: expected none (the task sets it from the target "
            "vocabulary), got 5",
        ),
    ],
)
def test_a_setting_the_data_decides_is_refused_not_replaced_without_a_word(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], task: str, setting: list[str], message: str
) -> None:
    # Was: accepted, then replaced by the vocabulary's size, the labels' classes or names, exit 0.
    (tmp_path / "run.yaml").write_text("model:\n  tgt_vocab_size: 5\n", encoding="utf-8")
    arguments = [part.format(tmp=tmp_path) for part in setting]
    assert main(["train", task, *arguments, "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    assert capsys.readouterr().err.strip() == f"transformer-lab train: error: {message.format(tmp=tmp_path)}"
    assert not (tmp_path / "run").exists()


def test_resume_with_another_search_says_so_and_records_it(
    copy_run: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Was silent: validations before and after the resume scored two searches, best/ chosen among both.
    out = tmp_path / "run"
    shutil.copytree(copy_run, out)
    saved = json.loads((out / "last" / CONFIG_FILE).read_text(encoding="utf-8"))["decode"]
    assert saved["strategy"] == "greedy"  # the copy preset's
    beam = 3 if saved["beam_size"] != 3 else 4
    options = tiny_copy_options(max_steps=3, decode__strategy="beam", decode__beam_size=beam)
    with caplog.at_level("WARNING"):
        assert main(["train", "copy", "--out", str(out), "--resume", *options]) == 0
    said = [record.getMessage() for record in caplog.records if "another search" in record.getMessage()]
    assert said == [
        f"--resume: {out / 'last' / CONFIG_FILE}: resuming with another search (decode.strategy: 'greedy' in the "
        f"run, 'beam' now; decode.beam_size: {saved['beam_size']} in the run, {beam} now): the validations from "
        "here on decode with it, and the checkpoints record it"
    ]
    assert json.loads((out / "last" / CONFIG_FILE).read_text(encoding="utf-8"))["decode"]["beam_size"] == beam
