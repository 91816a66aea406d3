"""Files that are not what they claim are refused by name, and files that are not ours are never written.

A model card edited out of shape is named with its field (and ``evaluate`` keeps its
scores); a run folder's ``.lock`` that is a symbolic link, a FIFO, a hard link or a
stranger's text is left alone and refused; checkpoints with another tokenizer of the same
size are not averaged; a figure's path that is a folder is refused, not written beside.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.reliability.builders import (
    train_classification_checkpoint,
    train_couplet_checkpoint,
    write_translation_checkpoint,
)
from tests.reliability.tiny_runs import tiny_copy_options
from transformer_lab.cli import main
from transformer_lab.tasks.translation import train as translation_train
from transformer_lab.training.model_card import CARD_FILE
from transformer_lab.training.run.run_lock import LOCK_FILE, RunFolderLock


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "Traceback" not in error, error
    return error


def test_evaluate_keeps_its_scores_and_names_the_field_of_a_card_edited_out_of_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = train_classification_checkpoint(tmp_path)
    card = checkpoint / CARD_FILE
    text = card.read_text(encoding="utf-8")
    assert "  test: []\n" in text
    card.write_text(text.replace("  test: []\n", "  test: notalist\n"), encoding="utf-8")
    before = card.read_bytes()
    capsys.readouterr()
    arguments = ["evaluate", "classification", "--checkpoint", str(checkpoint), "--data-dir", str(tmp_path / "data")]
    assert main(arguments) == 0
    captured = capsys.readouterr()
    assert "accuracy" in captured.out
    error = captured.err.strip()
    assert "\n" not in error and "Traceback" not in error, error
    assert f"model card: not updated: {card}: transformer_lab.test: expected a list, got 'notalist'" in error
    assert card.read_bytes() == before


def test_a_lock_that_is_a_symbolic_link_is_never_followed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    precious = tmp_path / "notes.txt"
    precious.write_text("a week of notes\n", encoding="utf-8")
    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_FILE).symlink_to(precious)
    assert main(["train", "copy", "--out", str(out), *tiny_copy_options()]) == 2
    error = one_error_line(capsys)
    assert f"--out: {out / LOCK_FILE}: expected the lock file a run writes there, got a symbolic link" in error
    assert precious.read_text(encoding="utf-8") == "a week of notes\n"
    assert (out / LOCK_FILE).is_symlink() and not (out / "last").exists()
    # average-checkpoints asks who holds the folder: it does not follow the link either.
    assert main(["average-checkpoints", "--run", str(tmp_path / "absent"), "--out", str(out)]) == 2
    assert "expected a new folder" in one_error_line(capsys)


@pytest.mark.parametrize("kind", ["fifo", "hard link", "other text"])
def test_a_lock_file_we_did_not_write_is_refused_and_left_as_it_is(tmp_path: Path, kind: str) -> None:
    out = tmp_path / "run"
    out.mkdir()
    lock = out / LOCK_FILE
    other = tmp_path / "other.txt"
    if kind == "fifo":
        os.mkfifo(lock)  # opening it for reading alone would block forever
    elif kind == "hard link":
        other.write_text("process 1 on somewhere (since 2026-01-01 00:00:00)", encoding="utf-8")
        os.link(other, lock)
    else:
        lock.write_text("my shopping list\n", encoding="utf-8")
    before = None if kind == "fifo" else lock.read_bytes()
    expected = {"fifo": "not a plain file", "hard link": "a file with 2 names", "other text": "got other text"}[kind]
    with pytest.raises(ValueError, match=f"expected the lock file a run writes there.*{expected}"):
        RunFolderLock(out).acquire()
    if before is not None:
        assert lock.read_bytes() == before


def test_a_lock_left_by_a_run_is_still_taken_over(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_FILE).write_text("process 12345 on host-1 (since 2026-01-01 00:00:00)", encoding="utf-8")
    with RunFolderLock(out):
        assert (out / LOCK_FILE).read_text(encoding="utf-8").startswith(f"process {os.getpid()} on ")
    assert (out / LOCK_FILE).read_text(encoding="utf-8") == ""


def swap_two_tokens(tokenizer_file: Path) -> None:
    """Give two ordinary tokens each other's ids: the same size, another vocabulary."""
    tokenizer = json.loads(tokenizer_file.read_text(encoding="utf-8"))
    vocabulary = tokenizer["model"]["vocab"]
    first, second = [token for token, index in sorted(vocabulary.items(), key=lambda item: item[1])][10:12]
    vocabulary[first], vocabulary[second] = vocabulary[second], vocabulary[first]
    tokenizer_file.write_text(json.dumps(tokenizer), encoding="utf-8")


def test_checkpoints_with_another_tokenizer_of_the_same_size_are_not_averaged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    for step in (1, 2):
        write_translation_checkpoint(run / f"step-{step:06d}", seed=step)
    same = ["average-checkpoints", "--run", str(run), "--last", "2", "--out", str(tmp_path / "same")]
    assert main(same) == 0
    capsys.readouterr()
    swap_two_tokens(run / "step-000001" / "tokenizer.json")
    assert (run / "step-000001" / "tokenizer.json").stat().st_size != 0
    out = tmp_path / "averaged"
    assert main(["average-checkpoints", "--run", str(run), "--last", "2", "--out", str(out)]) == 2
    error = one_error_line(capsys)
    assert f"expected checkpoints with one vocabulary, got {run / 'step-000001' / 'tokenizer.json'}" in error
    assert str(run / "step-000002" / "tokenizer.json") in error
    assert not out.exists()


def test_step_checkpoints_scored_by_evaluate_are_averaged_without_their_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The outputs evaluate writes beside a checkpoint were taken for vocabulary files ("expected checkpoints
    # with one vocabulary, got .../hypotheses...txt"), and the last one's were copied into the average.
    run = tmp_path / "run"
    for step in (1, 2):
        folder = write_translation_checkpoint(run / f"step-{step:06d}", seed=step)
        (folder / f"hypotheses.test.{step}.beam5.txt").write_text(f"output of step {step}\n", encoding="utf-8")
    (run / "step-000002" / "report.validation.json").write_text("{}\n", encoding="utf-8")
    out = tmp_path / "averaged"
    assert main(["average-checkpoints", "--run", str(run), "--last", "2", "--out", str(out)]) == 0, capsys.readouterr()
    own = sorted(path.name for path in (run / "step-000002").iterdir())
    assert sorted(path.name for path in out.iterdir()) == [
        name for name in own if not name.startswith(("hypotheses.", "report."))
    ]


def test_checkpoints_of_another_task_are_not_averaged(tmp_path: Path) -> None:
    from transformer_lab.tasks.translation.train import load_translator
    from transformer_lab.training.averaging import average_checkpoints

    first = write_translation_checkpoint(tmp_path / "a")
    second = write_translation_checkpoint(tmp_path / "b", seed=1)
    config = json.loads((first / "config.json").read_text(encoding="utf-8"))
    (first / "config.json").write_text(json.dumps({**config, "task": "couplet"}), encoding="utf-8")
    model, _, _ = load_translator(second)
    with pytest.raises(ValueError, match=r"expected checkpoints of one task, got .*'couplet' and .*'translation'"):
        average_checkpoints([first, second], tmp_path / "out", model)
    assert not (tmp_path / "out").exists()


def test_checkpoints_of_two_synthetic_tasks_are_not_averaged_and_are_named_as_trained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # copy, reverse and sort are one checkpoint task, synthetic: a copy step and a reverse step were averaged,
    # exit 0, and a copy step beside a translation step was said to be of 'synthetic', which no command is called.
    from tests.reliability.tiny_runs import tiny_copy_options

    for task in ("copy", "reverse"):
        options = tiny_copy_options(4, train__eval_every_steps=2, train__keep_last=2)
        assert main(["train", task, "--out", str(tmp_path / task), *options]) == 0
    shutil.copytree(tmp_path / "reverse" / "step-000004", tmp_path / "copy" / "step-000006")
    capsys.readouterr()
    assert (
        main(["average-checkpoints", "--run", str(tmp_path / "copy"), "--last", "2", "--out", str(tmp_path / "a")]) == 2
    )
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            f"sources: expected checkpoints of one task, got {tmp_path / 'copy' / 'step-000004'} of 'copy' and "
            f"{tmp_path / 'copy' / 'step-000006'} of 'reverse'"
        )
    )
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("option", ["--last", "--best"])
def test_two_folders_of_one_step_are_refused_not_averaged_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    # A hand-made step-4/ beside step-000004/ was one step counted twice in the average, exit 0.
    run = tmp_path / "copy"
    options = tiny_copy_options(4, train__eval_every_steps=2, train__keep_last=2)
    assert main(["train", "copy", "--out", str(run), *options]) == 0
    shutil.copytree(run / "step-000004", run / "step-4")
    capsys.readouterr()
    out = tmp_path / "averaged"
    assert main(["average-checkpoints", "--run", str(run), option, "2", "--out", str(out)]) == 2
    assert one_error_line(capsys).endswith(
        "--run: expected one checkpoint folder a step, got step-000004 and step-4, both of step 4 "
        f"(training writes step-000004); move the other one out of {run}"
    )
    assert not out.exists()


def test_a_checkpoint_copied_without_its_weights_is_named_as_a_checkpoint_not_by_a_python_keyword(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: "folder: expected the weights 'model.safetensors' in checkpoint ...": the library's parameter name.
    checkpoint = write_translation_checkpoint(tmp_path / "copied")
    (checkpoint / "model.safetensors").unlink()
    assert main(["translate", "--checkpoint", str(checkpoint), "a"]) == 2
    assert one_error_line(capsys).endswith(
        f"error: expected the weights 'model.safetensors' in checkpoint '{checkpoint}', but "
        f"'{checkpoint / 'model.safetensors'}' does not exist"
    )


def test_checkpoints_of_another_language_pair_are_not_averaged(tmp_path: Path) -> None:
    from transformer_lab.tasks.translation.train import load_translator
    from transformer_lab.training.averaging import average_checkpoints

    # One joint tokenizer, one model shape: only the direction tells the two apart.
    forward = write_translation_checkpoint(tmp_path / "de-en")
    backward = write_translation_checkpoint(
        tmp_path / "en-de", ["data.source_language=en", "data.target_language=de"], seed=1
    )
    model, _, _ = load_translator(backward)
    with pytest.raises(
        ValueError, match=r"one language pair, got data\.source_language 'de' in .*de-en and 'en' in .*en-de"
    ):
        average_checkpoints([forward, backward], tmp_path / "out", model)
    assert not (tmp_path / "out").exists()


def test_checkpoints_of_another_model_configuration_or_with_nan_weights_are_not_averaged(tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    from transformer_lab.tasks.translation.train import load_translator
    from transformer_lab.training.averaging import average_checkpoints

    relu = write_translation_checkpoint(tmp_path / "relu", ["model.activation=relu"])
    gelu = write_translation_checkpoint(tmp_path / "gelu", ["model.activation=gelu"], seed=1)
    model, _, _ = load_translator(gelu)
    with pytest.raises(ValueError, match=r"one model configuration, got model\.activation 'relu' in .*relu and 'gelu'"):
        average_checkpoints([relu, gelu], tmp_path / "out", model)
    weights = load_file(relu / "model.safetensors")
    name = sorted(weights)[-1]
    weights[name].view(-1)[0] = float("inf")
    save_file(weights, relu / "model.safetensors")
    other = write_translation_checkpoint(tmp_path / "other", ["model.activation=relu"], seed=2)
    model, _, _ = load_translator(other)
    with pytest.raises(ValueError, match=rf"expected finite weights, got NaN or inf in tensor '{name}' of .*relu"):
        average_checkpoints([relu, other], tmp_path / "out", model)
    assert not (tmp_path / "out").exists()


def test_a_figure_path_that_is_a_folder_is_refused_not_written_beside(tmp_path: Path) -> None:
    import torch

    from transformer_lab.lab.figures import plot_attention_heatmap

    folder = tmp_path / "figures"
    folder.mkdir()
    weights = torch.full((2, 3), 1 / 3)
    for path in (folder, f"{folder}/"):
        with pytest.raises(ValueError, match=r"path: expected an image file, got the folder .*figures'; name a file"):
            plot_attention_heatmap(weights, ["a", "b", "c"], ["x", "y"], path)
    with pytest.raises(ValueError, match=r"path: expected a file name ending in .*\.png.*, got '.*attention'"):
        plot_attention_heatmap(weights, ["a", "b", "c"], ["x", "y"], tmp_path / "attention")
    assert list(folder.iterdir()) == [] and sorted(path.name for path in tmp_path.iterdir()) == ["figures"]
    written = plot_attention_heatmap(weights, ["a", "b", "c"], ["x", "y"], folder / "attention.svg")
    assert written == folder / "attention.svg" and written.is_file()


def test_a_pgf_figure_without_tex_installed_is_refused_before_the_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    import torch

    from transformer_lab.lab.figures import plot_attention_heatmap

    # matplotlib lists PGF, then runs xelatex to write it: without TeX, a RuntimeError after the work.
    monkeypatch.setattr(shutil, "which", lambda program: None)
    with pytest.raises(ValueError, match=r"^path: expected a file name ending in .*\.png.*, got '.*attention\.pgf'$"):
        plot_attention_heatmap(torch.full((2, 3), 1 / 3), ["a", "b", "c"], ["x", "y"], tmp_path / "attention.pgf")
    assert not any(tmp_path.iterdir())


def test_a_translation_attention_path_that_is_a_folder_is_refused_before_translating(tmp_path: Path) -> None:
    from transformer_lab.api import Translator

    checkpoint = write_translation_checkpoint(tmp_path / "checkpoint")
    folder = tmp_path / "figures"
    folder.mkdir()
    with pytest.raises(ValueError, match="path: expected an image file, got the folder"):
        Translator(checkpoint).plot_attention("Ein Mann fährt Fahrrad.", folder)
    assert list(folder.iterdir()) == [] and not (tmp_path / "figures.png").exists()
    shutil.rmtree(folder)


def test_the_metrics_log_is_never_written_through_a_link(tmp_path: Path) -> None:
    from transformer_lab.training.metrics_log import MetricsLog

    precious = tmp_path / "notes.txt"
    precious.write_text("a week of notes\n", encoding="utf-8")
    out = tmp_path / "run"
    log = MetricsLog(out)
    for step in (1, 2, 3):
        log.append({"event": "train", "step": step})
    # A link under the temporary's name: the cut-back log replaces the link, the notes stay.
    (out / "metrics.jsonl.tmp").symlink_to(precious)
    log.truncate_after(2)
    assert [json.loads(line)["step"] for line in log.path.read_text(encoding="utf-8").splitlines()] == [1, 2]
    assert precious.read_text(encoding="utf-8") == "a week of notes\n"
    # A link under the log's own name is refused, not appended to.
    log.path.unlink()
    log.path.symlink_to(precious)
    with pytest.raises(ValueError, match=r"metrics\.jsonl: expected the run's own log, got a symbolic link"):
        log.append({"event": "train", "step": 3})
    assert precious.read_text(encoding="utf-8") == "a week of notes\n"


def _tree(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` (links not followed) with its bytes, or None for a folder or a link."""
    return {
        str(path.relative_to(folder)): (None if path.is_dir() or path.is_symlink() else path.read_bytes())
        for path in sorted(folder.rglob("*"))
    }


def test_an_out_folder_that_is_a_symbolic_link_is_never_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("a week of notes\n", encoding="utf-8")
    run_link, prepared_link, dangling = tmp_path / "run", tmp_path / "prepared", tmp_path / "dangling"
    run_link.symlink_to(elsewhere)
    prepared_link.symlink_to(elsewhere)
    dangling.symlink_to(tmp_path / "nowhere")
    source, target = tmp_path / "corpus.de", tmp_path / "corpus.en"
    source.write_text("".join(f"wort{n % 7}\n" for n in range(40)), encoding="utf-8")
    target.write_text("".join(f"word{n % 7}\n" for n in range(40)), encoding="utf-8")
    before = _tree(tmp_path)
    assert main(["train", "copy", "--out", str(run_link), *tiny_copy_options()]) == 2
    error = one_error_line(capsys)
    assert f"--out: expected a folder of its own, got {run_link}, a symbolic link (to '{elsewhere}')" in error
    for out in (prepared_link, dangling):
        arguments = ["prepare", "translation", "--train", str(source), str(target), "--out", str(out)]
        assert main([*arguments, "--no-progress", "--set", "data.vocab_size=300"]) == 2
        # Named as typed (was "out_dir: ...", the Python keyword), before the files are read.
        assert f"prepare: error: --out: expected a new folder, got '{out}', a symbolic link (to " in one_error_line(
            capsys
        )
    arguments = ["prepare", "translation", "--train", str(source), str(target), "--out", str(elsewhere)]
    assert main([*arguments, "--no-progress", "--set", "data.vocab_size=300"]) == 2
    assert one_error_line(capsys).endswith(f"--out: expected a new folder, got '{elsewhere}' which exists")
    assert _tree(tmp_path) == before


def test_an_export_or_average_out_that_is_a_symbolic_link_is_refused_as_train_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A dangling --out was "could not write checkpoint ... (Not a directory, ENOTDIR)" for average-checkpoints
    # and "out_dir: ..." for export; a link to a folder was "expected a new folder, got LINK which exists".
    run = tmp_path / "run"
    for name in ("step-000001", "step-000002"):
        write_translation_checkpoint(run / name)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "to-elsewhere").symlink_to(elsewhere)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    commands = [
        ["average-checkpoints", "--run", str(run), "--last", "2"],
        ["export", "--checkpoint", str(run / "step-000002"), "--format", "onnx"],
    ]
    before = _tree(tmp_path)
    for command in commands:
        for link, target in (("to-elsewhere", elsewhere), ("dangling", tmp_path / "nowhere")):
            assert main([*command, "--out", str(tmp_path / link)]) == 2
            assert one_error_line(capsys) == (
                f"transformer-lab {command[0]}: error: --out: expected a folder of its own, got {tmp_path / link}, "
                f"a symbolic link (to '{target}'), never followed"
            )
    assert _tree(tmp_path) == before


def test_a_cache_entry_that_is_a_symbolic_link_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    from transformer_lab.data.pair_stream import PairFiles
    from transformer_lab.data.prepared_pairs import BpeSettings, PairCorpusSpec, pairs_kind
    from transformer_lab.training.run.once_per_machine import prepared_corpus

    source, target = tmp_path / "corpus.de", tmp_path / "corpus.en"
    source.write_text("".join(f"wort{n % 7}\n" for n in range(40)), encoding="utf-8")
    target.write_text("".join(f"word{n % 7}\n" for n in range(40)), encoding="utf-8")
    spec = PairCorpusSpec(PairFiles.of([source, target], "de", "en"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    kind = pairs_kind(spec, bpe=BpeSettings(vocab_size=300, min_frequency=1))
    entry = kind.cache_folder(tmp_path / "cache")
    entry.parent.mkdir()
    entry.symlink_to(elsewhere)
    before = _tree(tmp_path)
    with pytest.raises(ValueError, match=r"cache entry: expected a folder of its own, got .*, a symbolic link"):
        prepared_corpus(kind, "", tmp_path / "cache")
    assert _tree(tmp_path) == before


def test_a_checkpoint_under_a_path_that_is_not_utf8_is_refused_for_its_path_not_as_a_damaged_file(
    tmp_path: Path,
) -> None:
    # Was: "expected a complete safetensors file, got one that cannot be read (... is not valid UTF-8); it is
    # truncated or not a weights file", of an intact file: the safetensors reader takes only UTF-8 paths.
    folder = tmp_path / os.fsdecode(b"caf\xe9")
    write_translation_checkpoint(folder)
    with pytest.raises(ValueError) as raised:
        translation_train.load_translator(folder)
    assert str(raised.value).endswith(
        f"{str(folder / 'model.safetensors')!r}: expected a path of UTF-8 text, which the safetensors reader needs, "
        "got one whose bytes are not (a name made in another encoding); rename the folder"
    ), raised.value


@pytest.mark.parametrize("task", ["classification", "couplet"])
def test_evaluate_split_validation_refuses_the_data_changed_since_the_run_held_it_out(
    task: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: the rows were carved again from the edited file, scored, and carded as the run's validation, exit 0.
    if task == "classification":
        checkpoint = train_classification_checkpoint(tmp_path)
        edited = tmp_path / "data" / "ag_news" / "train.csv"
    else:
        checkpoint = train_couplet_checkpoint(tmp_path)
        edited = tmp_path / "data" / "couplet" / "train_couplet_machine" / "in.txt"
    evaluate = ["evaluate", task, "--checkpoint", str(checkpoint), "--split", "validation"]
    assert main(evaluate) == 0
    capsys.readouterr()
    card = (checkpoint / CARD_FILE).read_text(encoding="utf-8")
    lines = edited.read_text(encoding="utf-8").splitlines(keepends=True)
    edited.write_text("".join(reversed(lines)), encoding="utf-8")  # the same size, other rows first
    assert main(evaluate) == 2
    error = capsys.readouterr().err.strip()
    instead = "--test FILE" if task == "classification" else "--split test"
    assert "\n" not in error and error.endswith(
        f"--split validation: expected the data the run held its validation out of, got other data: {edited} "
        f"changed (its sha256 differs); restore it, or score other data with {instead}"
    ), error
    assert (checkpoint / CARD_FILE).read_text(encoding="utf-8") == card
    edited.write_text("".join(lines), encoding="utf-8")  # restored: the same bytes, a new mtime
    assert main(evaluate) == 0


def _pipe_of(text: str) -> str:
    """A path to a pipe holding ``text`` (as a shell's ``<(cat FILE)`` gives), read once."""
    reader, writer = os.pipe()
    os.write(writer, text.encode("utf-8"))
    os.close(writer)
    return f"/dev/fd/{reader}"


def test_a_pipe_given_as_the_test_file_adds_no_card_row_and_no_new_file_each_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: a card row and a hypotheses file under the pipe's name and a digest of its path (a new
    # `pipe:[N]` each time), one more at every run of the same evaluation.
    translation = write_translation_checkpoint(tmp_path / "translation")
    for _ in range(2):
        source, reference = _pipe_of("Ein Mann.\nEin Hund.\n"), _pipe_of("A man.\nA dog.\n")
        command = ["evaluate", "translation", "--checkpoint", str(translation), "--beam", "1"]
        assert main([*command, "--source", source, "--reference", reference]) == 0
        said = capsys.readouterr().out
        assert f"model card: not updated ({source} is a pipe or a device, which names no test set" in said
    (written,) = [path.name for path in translation.glob("hypotheses.*")]  # greedy, in the CPU's precision
    assert written.startswith("hypotheses.stream.greedy")
