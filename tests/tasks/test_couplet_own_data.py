"""Couplets from the user's own files (TSV, JSON Lines, two line files): read strictly, trained, fine-tuned."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest

from tests.tasks import couplet_whole_read
from tests.tasks.couplet_fixture import TINY, TINY_OVERRIDES, made_up_couplets, set_arguments
from transformer_lab.cli import main
from transformer_lab.data.couplet import read_couplet_source, split_validation
from transformer_lab.data.couplet_stream import CoupletFiles
from transformer_lab.data.prepared_couplets import open_prepared_couplets
from transformer_lab.tasks.couplet import data as couplet_data
from transformer_lab.tasks.couplet import train as couplet_train
from transformer_lab.training.checkpoint import resolve_checkpoint
from transformer_lab.training.model_card import read_card


def write_forms(folder: Path, pairs: list[tuple[str, str]]) -> dict[str, list[Path]]:
    upper, lower, tsv, jsonl = folder / "upper.txt", folder / "lower.txt", folder / "pairs.tsv", folder / "pairs.jsonl"
    upper.write_text("".join(f"{u}\n" for u, _ in pairs), encoding="utf-8")
    lower.write_text("".join(f"{w}\n" for _, w in pairs), encoding="utf-8")
    tsv.write_text("upper\tlower\n" + "".join(f"{u}\t{w}\n" for u, w in pairs), encoding="utf-8")
    jsonl.write_text(
        "".join(json.dumps({"upper": u, "lower": w}, ensure_ascii=False) + "\n" for u, w in pairs), encoding="utf-8"
    )
    return {"lines": [upper, lower], "tsv": [tsv], "jsonl": [jsonl]}


def test_the_three_forms_read_the_same_couplets(tmp_path: Path) -> None:
    pairs = made_up_couplets(20, seed=5)
    for name, paths in write_forms(tmp_path, pairs).items():
        assert read_couplet_source(CoupletFiles.of_files(paths)).pairs == pairs, name


def test_the_data_folders_file_names_given_lower_first_are_refused(tmp_path: Path) -> None:
    pairs = made_up_couplets(4, seed=4)
    for upper_name, lower_name in (("in.txt", "out.txt"), ("upper.txt", "LOWER.txt")):
        upper, lower = tmp_path / upper_name, tmp_path / lower_name
        upper.write_text("".join(f"{u}\n" for u, _ in pairs), encoding="utf-8")
        lower.write_text("".join(f"{w}\n" for _, w in pairs), encoding="utf-8")
        # Was read as given: a run trained to write upper lines from lower ones, without a word.
        with pytest.raises(
            ValueError,
            match=rf"^--train: expected the upper lines' file first, got '.*{lower_name}' then '.*{upper_name}'",
        ):
            CoupletFiles.of_files([lower, upper], name="--train")
        assert read_couplet_source(CoupletFiles.of_files([upper, lower])).pairs == pairs


def test_unequal_lines_name_the_right_line_after_a_tsv_header(tmp_path: Path) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text("upper\tlower\n春风\t秋雨\n花月\t草\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"pairs\.tsv: line 3: expected a lower line of 2 characters"):
        read_couplet_source(CoupletFiles.of_files([path]))
    corpus = read_couplet_source(CoupletFiles.of_files([path], skip_invalid=True))
    assert corpus.pairs == [("春风", "秋雨")] and corpus.skipped_unequal == [3]


def test_a_bad_pair_in_training_names_the_setting_that_skips_it_as_the_command_line_sets_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text("春风\t秋雨\n花月\t草\n", encoding="utf-8")
    arguments = ["train", "couplet", "--train", str(path), "--out", str(tmp_path / "run")]
    # Was: "or pass skip_invalid=True", a keyword of the library that no command takes.
    assert main([*arguments, "--set", "data.skip_invalid=false"]) == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith(
            "pairs.tsv: line 2: expected a lower line of 2 characters, as long as line 2 of "
            f"{path} ('花月'), got 1 ('草'); fix the file, or pass --set data.skip_invalid=True to skip (and count) "
            "such pairs"
        )
    )
    # The library's own reader names its own argument.
    advice = r"; fix the file, or pass skip_invalid=True to skip \(and count\) such pairs$"
    with pytest.raises(ValueError, match=advice):
        read_couplet_source(CoupletFiles.of_files([path]))


def test_a_tsv_header_in_chinese_is_skipped_and_tsv_errors_name_the_upper_and_lower_line(tmp_path: Path) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text("上联\t下联\n春风\t秋雨\n", encoding="utf-8")
    assert read_couplet_source(CoupletFiles.of_files([path])).pairs == [("春风", "秋雨")]
    # source<TAB>target stays a header of every pair file, couplets' too.
    path.write_text("source\ttarget\n春风\t秋雨\n", encoding="utf-8")
    assert read_couplet_source(CoupletFiles.of_files([path])).pairs == [("春风", "秋雨")]
    path.write_text("下联\t上联\n春风\t秋雨\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"pairs\.tsv: line 1: expected the columns upper<TAB>lower") as error:
        read_couplet_source(CoupletFiles.of_files([path]))
    assert str(error.value).endswith("which puts lower first; swap the columns")
    path.write_text("春风\t秋雨\t花月\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 1: expected 2 tab-separated fields \(upper<TAB>lower\), got 3"):
        read_couplet_source(CoupletFiles.of_files([path]))
    path.write_text("春风\t秋雨\n \t花月\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2: expected a non-empty upper line, got ' '"):
        read_couplet_source(CoupletFiles.of_files([path]))
    # JSON Lines name the sides as couplets have them (was: "(the target language)", "upper sentence").
    records = tmp_path / "pairs.jsonl"
    records.write_text('{"upper": "春风", "lower": "秋雨"}\n{"upper": "花月", "low": "山水"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2: expected the key 'lower' \(the lower line\), got the keys"):
        read_couplet_source(CoupletFiles.of_files([records]))


def test_too_few_couplets_to_carve_validation_from_name_the_setting_and_how_to_set_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    forms = write_forms(tmp_path, made_up_couplets(20, seed=5))
    for command in ("train", "prepare"):
        assert main([command, "couplet", "--train", *map(str, forms["lines"]), "--out", str(tmp_path / command)]) == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"transformer-lab {command}: error: data.num_validation: expected fewer than the 20 training pairs "
            "(the validation pairs are carved out of them), got 1000; set a smaller one (--set data.num_validation=N) "
            "or give validation couplets (--valid)"
        )
    # Training couplets by --set: the validation couplets are named by the key, as the user works (was: --valid).
    files = ["--set", "data.train_files=" + ",".join(map(str, forms["lines"]))]
    assert main(["prepare", "couplet", *files, "--out", str(tmp_path / "by_key")]) == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith("or give validation couplets (data.valid_files)")
    # The library's own function names its own argument.
    with pytest.raises(ValueError, match=r"^num_validation: expected fewer than the 2 training pairs .*, got 2$"):
        split_validation([("春风", "秋雨"), ("花月", "草木")], 2, seed=0)


def test_validation_couplets_the_search_cannot_answer_are_refused_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    forms = write_forms(tmp_path, made_up_couplets(60, seed=8))
    tiny = set_arguments([setting for setting in TINY_OVERRIDES if not setting.startswith("data.num_validation=")])
    unequal = tmp_path / "unequal.tsv"
    unequal.write_text("春风吹柳绿\t秋月\n花开\t雪落山\n", encoding="utf-8")
    latin = tmp_path / "latin.tsv"
    latin.write_text("春风吹柳\t秋月照人\nA股大涨\tB超检查\n", encoding="utf-8")
    cases = [
        # Every pair skipped: the run trained without validation, best/ never written (was: exit 0).
        (
            unequal,
            f"{unequal}: expected at least one validation couplet, got none: all 2 pair(s) were skipped "
            "(their kinds and first lines are logged above)",
        ),
        # An upper line the search refuses: the first validation stopped the run, its folder gone (was: after an epoch).
        (
            latin,
            f"validation couplet 2 kept from {latin}: upper line 'A股大涨' contains Latin letters 'A': expected a line "
            "of Chinese characters; validation answers every upper line, so remove it from that file",
        ),
    ]
    for valid, message in cases:
        out = tmp_path / valid.stem
        assert (
            main(["train", "couplet", "--train", str(forms["tsv"][0]), "--valid", str(valid), "--out", str(out), *tiny])
            == 2
        )
        assert capsys.readouterr().err.splitlines()[-1] == f"transformer-lab train: error: {message}"
        assert not out.exists()


def test_a_couplet_too_long_for_the_model_is_counted_in_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pairs = [*made_up_couplets(40, seed=10), ("春" * 150, "秋" * 150)]
    forms = write_forms(tmp_path, pairs)
    tiny = set_arguments([setting for setting in TINY_OVERRIDES if not setting.startswith("data.num_validation=")])
    arguments = ["train", "couplet", "--train", str(forms["tsv"][0]), "--out", str(tmp_path / "run"), *tiny]
    limits = ["--set", "data.num_validation=4", "--set", "data.max_length=300", "--set", "model.max_len=128"]
    assert main([*arguments, *limits]) == 2
    # Was "subword tokens": a couplet model reads characters.
    error = capsys.readouterr().err
    assert "has 151 characters on one side (with bos/eos), expected at most model.max_len=128" in error


def test_a_couplet_run_on_the_users_tsv_with_its_own_validation(tmp_path: Path) -> None:
    forms = write_forms(tmp_path, made_up_couplets(200, seed=6))
    valid = tmp_path / "valid.jsonl"
    valid.write_text(
        "".join(
            json.dumps({"upper": u, "lower": w}, ensure_ascii=False) + "\n" for u, w in made_up_couplets(12, seed=7)
        ),
        encoding="utf-8",
    )
    out = tmp_path / "run"
    # The last --set wins: 20 steps instead of the 150 of the fixture, less the carve, which --valid leaves unused.
    tiny = set_arguments([setting for setting in TINY_OVERRIDES if not setting.startswith("data.num_validation=")])
    arguments = ["train", "couplet", "--train", str(forms["tsv"][0]), "--valid", str(valid), "--out", str(out), *tiny]
    assert main([*arguments, "--set", "train.max_steps=20"]) == 0
    _, _, config = couplet_train.load(out)
    assert config.data.train_files == (str(forms["tsv"][0]),) and config.data.valid_files == (str(valid),)
    assert couplet_data.load_validation_pairs(config.data) == made_up_couplets(12, seed=7)
    # A split of the couplet data folder is named so in the card, not after the run's own file (was: pairs.tsv).
    split = tmp_path / "data" / "couplet" / "test"
    split.mkdir(parents=True)
    test_pairs = made_up_couplets(6, seed=9)
    (split / "in.txt").write_text("".join(" ".join(upper) + " \n" for upper, _ in test_pairs), encoding="utf-8")
    (split / "out.txt").write_text("".join(" ".join(lower) + " \n" for _, lower in test_pairs), encoding="utf-8")
    scored = ["evaluate", "couplet", "--checkpoint", str(out), "--data-dir", str(tmp_path / "data")]
    assert main([*scored, "--output", str(tmp_path / "hypotheses.txt")]) == 0
    (test,) = [row for row in read_card(resolve_checkpoint(out))["test"] if row["split"] == "test"]
    assert test["dataset"] == "couplet"
    # Fine-tuning keeps the vocabulary of the checkpoint it starts from.
    tuned = tmp_path / "tuned"
    assert (
        main(
            [
                "train",
                "couplet",
                "--init-from",
                str(out),
                "--train",
                *map(str, forms["lines"]),
                "--out",
                str(tuned),
                "--set",
                "train.max_steps=2",
                "--set",
                "train.progress_bar=false",
                "--set",
                "data.num_validation=10",
            ]
        )
        == 0
    )
    assert (tuned / "last" / couplet_train.VOCABULARY_FILE).read_bytes() == (
        out / "best" / couplet_train.VOCABULARY_FILE
    ).read_bytes()


def test_a_corpus_prepared_with_the_checkpoints_vocabulary_fine_tunes_and_another_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, folder, own = tmp_path / "run", tmp_path / "prepared", tmp_path / "own"
    start = write_forms(tmp_path, made_up_couplets(60, seed=6))["tsv"][0]
    assert (
        main(["train", "couplet", "--train", str(start), "--out", str(run), *TINY, "--set", "train.max_steps=2"]) == 0
    )
    # Characters the checkpoint never saw: a vocabulary built from this file holds them, the checkpoint's does not.
    pairs = made_up_couplets(40, seed=8) + [("日出东方", "夜落西山")] * 3
    new = tmp_path / "new.tsv"
    new.write_text("upper\tlower\n" + "".join(f"{u}\t{w}\n" for u, w in pairs), encoding="utf-8")
    prepare = ["prepare", "couplet", "--train", str(new), "--set", "data.num_validation=10"]
    assert main([*prepare, "--init-from", str(run), "--out", str(folder)]) == 0
    vocabulary = couplet_train.SEQ2SEQ_TASK.vocabulary.read(run / "best")
    prepared = open_prepared_couplets(folder)
    assert prepared.vocabulary.tokens == vocabulary.tokens and "日" not in vocabulary.tokens
    data = dataclasses.replace(couplet_train.default_config().data, train_files=(str(new),), num_validation=10)
    whole = couplet_whole_read.read_corpus(data, vocabulary)
    assert whole.train_pairs is not None and len(prepared.store) == len(whole.train_pairs)
    for index, (upper, lower) in enumerate(whole.train_pairs):
        assert prepared.store.ids("source", index).tolist() == vocabulary.encode(list(upper))
        assert prepared.store.ids("target", index).tolist() == vocabulary.encode(list(lower))
    tune = [
        "train",
        "couplet",
        "--init-from",
        str(run),
        "--set",
        "train.max_steps=2",
        "--set",
        "train.progress_bar=false",
    ]
    assert main([*tune, "--prepared", str(folder), "--out", str(tmp_path / "tuned")]) == 0
    vocabulary_file = couplet_train.VOCABULARY_FILE
    assert (tmp_path / "tuned" / "last" / vocabulary_file).read_bytes() == (run / "best" / vocabulary_file).read_bytes()
    assert main([*prepare, "--out", str(own)]) == 0
    capsys.readouterr()
    assert main([*tune, "--prepared", str(own), "--out", str(tmp_path / "refused")]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"transformer-lab train: error: --prepared {own}: expected a corpus prepared with the vocabulary of the "
        f"checkpoint {run / 'best'} (prepare couplet --init-from {run / 'best'}), got one whose vocabulary was "
        "built from its own data"
    )
    # Named as given: by --set, the key.
    assert main([*tune, "--set", f"data.prepared_dir={own}", "--out", str(tmp_path / "refused")]) == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .startswith(
            f"transformer-lab train: error: data.prepared_dir {own}: expected a corpus prepared with the vocabulary"
        )
    )
    # A checkpoint of another task holds no vocabulary of this one.
    assert (
        main(
            [
                "prepare",
                "classification",
                "--train",
                str(new),
                "--init-from",
                str(run),
                "--out",
                str(tmp_path / "other"),
            ]
        )
        == 2
    )
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"transformer-lab prepare: error: --init-from: expected a classification checkpoint, got "
        f"{str(run / 'best')!r}, a checkpoint of the task 'couplet'"
    )


@pytest.mark.parametrize("command", ["train", "prepare"])
def test_couplets_that_all_repeat_a_validation_upper_line_are_refused_in_the_users_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    # Each training couplet whose upper line is a validation one is left out: here all of them, and the
    # batcher's "lengths must be non-empty, got no examples" came after the corpus was prepared.
    upper, lower = tmp_path / "in.txt", tmp_path / "out.txt"
    upper.write_text("春风得意\n明月照人\n" * 8, encoding="utf-8")
    lower.write_text("秋雨连绵\n清风拂面\n" * 8, encoding="utf-8")
    out = tmp_path / "out"
    arguments = [command, "couplet", "--train", str(upper), str(lower), "--set", "data.num_validation=2"]
    assert main([*arguments, "--out", str(out)]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            "training couplets: expected some left once the validation couplets are held out, got none: 14 of the 16 "
            "read repeat a validation upper line and are left out (so that validation scores unseen lines); give more "
            "couplets, or other validation couplets"
        )
    )
    assert not out.exists()


def test_fine_tuning_on_characters_the_checkpoint_lacks_warns_and_reports_how_many(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRANSFORMER_LAB_CACHE", str(tmp_path / "cache"))
    forms = write_forms(tmp_path, made_up_couplets(40, seed=8))
    out = tmp_path / "run"
    tiny = set_arguments([*TINY_OVERRIDES, "train.max_steps=2", "data.num_validation=4"])
    assert main(["train", "couplet", "--train", str(forms["tsv"][0]), "--out", str(out), *tiny]) == 0
    # Characters the made-up corpus never uses: fine-tuning keeps the checkpoint's vocabulary, so each is <unk>.
    new = tmp_path / "new"
    new.mkdir()
    other = write_forms(new, [("白日依旧", "黄金入口"), ("大漠孤烟", "长城落日"), ("春风花月", "秋雨草星")] * 3)
    valid = tmp_path / "valid.tsv"
    valid.write_text("明镜松间\t清泉石上\n", encoding="utf-8")
    caplog.set_level(logging.INFO, logger="transformer_lab.data")
    tuned = tmp_path / "tuned"
    arguments = ["train", "couplet", "--init-from", str(out), "--train", str(other["tsv"][0]), "--valid", str(valid)]
    settings = ["--set", "train.max_steps=2", "--set", "train.progress_bar=false"]
    assert main([*arguments, "--out", str(tuned), *settings]) == 0
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert (
        "48 of the 72 characters of the training couplets (66.7%) are not in the checkpoint's vocabulary and are "
        "read as <unk> (白 日 依 旧 黄 金 入 口): the model can neither read nor write them; fine-tuning keeps the "
        "checkpoint's vocabulary, so train from scratch for text of other characters"
    ) in warnings
    assert any(message.startswith("8 of the 8 characters of the validation couplets (100.0%)") for message in warnings)
    # The count stays in the corpus's report, which every run that reuses it logs.
    reports = [
        json.loads(path.read_text(encoding="utf-8"))["report"]
        for path in (tmp_path / "cache").glob("prepared/couplets-*/manifest.json")
    ]
    assert sorted(report.get("train_unknown_characters", -1) for report in reports) == [-1, 48]


def test_validation_couplets_whose_upper_line_training_repeats_are_counted_in_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Validation couplets given by --valid leave the training couplets all kept (a carve leaves such ones out).
    pairs = made_up_couplets(40, seed=5)
    train = write_forms(tmp_path, pairs)["tsv"][0]
    valid = tmp_path / "valid"
    valid.mkdir()
    new = [("青山绿水长", "白云明月远"), ("花开富贵", "竹报平安")]
    valid_tsv = write_forms(valid, [new[0], pairs[12], new[1], pairs[3]])["tsv"][0]
    caplog.set_level(logging.WARNING, logger="transformer_lab.data")
    arguments = ["prepare", "couplet", "--train", str(train), "--valid", str(valid_tsv), "--no-progress"]
    assert main([*arguments, "--out", str(tmp_path / "out")]) == 0
    warnings = [record.getMessage() for record in caplog.records if "also training" in record.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"{valid_tsv}: 2 of the 4 validation couplets are also training couplets of {train}")
    assert f"(the first: upper line {pairs[12][0]!r})" in warnings[0]
    assert len(open_prepared_couplets(tmp_path / "out").store) == 40  # kept, as given

    write_forms(valid, new)
    caplog.clear()
    assert main([*arguments, "--out", str(tmp_path / "out-new")]) == 0
    assert not [record for record in caplog.records if "also training" in record.getMessage()]
