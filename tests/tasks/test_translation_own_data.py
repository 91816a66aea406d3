"""Translation on the user's own files (no shared data needed): train, evaluate, n-best, fine-tune."""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import re
import shutil
import sys
from pathlib import Path

import pytest
import sacrebleu
import torch

from transformer_lab.cli import main
from transformer_lab.data.prepared_pairs import carved_positions
from transformer_lab.decoding.sentences import translate_nbest
from transformer_lab.evaluation import bleu, papers_bleu
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.tasks.translation import data as translation_data
from transformer_lab.tasks.translation import evaluate as translation_evaluate
from transformer_lab.tasks.translation import train as translation_train
from transformer_lab.training.checkpoint import resolve_checkpoint
from transformer_lab.training.model_card import add_test_scores, file_test_name, read_card

NUMBERS = {"eins": "one", "zwei": "two", "drei": "three", "vier": "four", "fünf": "five", "sechs": "six"}
TINY = [
    "--set",
    "data.vocab_size=300",
    "--set",
    "data.min_frequency=1",
    "--set",
    "data.max_tokens=512",
    "--set",
    "model.d_model=32",
    "--set",
    "model.nhead=2",
    "--set",
    "model.num_encoder_layers=1",
    "--set",
    "model.num_decoder_layers=1",
    "--set",
    "model.dim_feedforward=64",
    "--set",
    "model.max_len=32",
    "--set",
    "train.max_steps=4",
    "--set",
    "train.warmup_steps=2",
    "--set",
    "train.cooldown_steps=0",
    "--set",
    "train.progress_bar=false",
    "--set",
    "decode.max_len=12",
]


# TINY less the settings of a BPE to learn, for a run given a tokenizer file.
TINY_MODEL = [
    argument
    for setting in zip(TINY[::2], TINY[1::2])
    for argument in setting
    if not setting[1].startswith(("data.vocab_size=", "data.min_frequency="))
]


def number_pairs(count: int, seed: int) -> list[tuple[str, str]]:
    generator = random.Random(seed)
    pairs = []
    for _ in range(count):
        words = [generator.choice(list(NUMBERS)) for _ in range(generator.randint(1, 4))]
        pairs.append((" ".join(words), " ".join(NUMBERS[word] for word in words)))
    return pairs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("corpus")
    train, valid, test = number_pairs(120, 1), number_pairs(12, 2), number_pairs(8, 3)
    files = {
        "train_tsv": folder / "train.tsv",
        "valid_jsonl": folder / "valid.jsonl",
        "test_src": folder / "test.xde",
        "test_ref": folder / "test.xen",
        "domain_tsv": folder / "domain.tsv",
    }
    files["train_tsv"].write_text("xde\txen\n" + "".join(f"{de}\t{en}\n" for de, en in train), encoding="utf-8")
    files["valid_jsonl"].write_text(
        "".join(json.dumps({"translation": {"xde": de, "xen": en}}) + "\n" for de, en in valid), encoding="utf-8"
    )
    files["test_src"].write_text("".join(de + "\n" for de, _ in test), encoding="utf-8")
    files["test_ref"].write_text("".join(en + "\n" for _, en in test), encoding="utf-8")
    files["domain_tsv"].write_text("".join(f"{de}\t{en}\n" for de, en in number_pairs(30, 4)), encoding="utf-8")
    return files


@pytest.fixture(scope="module")
def run(corpus: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("own") / "run"
    code = main(
        [
            "train",
            "translation",
            "--out",
            str(out),
            "--train",
            str(corpus["train_tsv"]),
            "--valid",
            str(corpus["valid_jsonl"]),
            "--source-language",
            "xde",
            "--target-language",
            "xen",
            *TINY,
        ]
    )
    assert code == 0
    return out


def test_the_run_records_its_files_and_languages(run: Path, corpus: dict[str, Path]) -> None:
    saved = json.loads((run / "last" / "config.json").read_text(encoding="utf-8"))
    assert saved["data"]["train_files"] == [str(corpus["train_tsv"])]
    assert saved["data"]["valid_files"] == [str(corpus["valid_jsonl"])]
    assert (saved["data"]["source_language"], saved["data"]["target_language"]) == ("xde", "xen")
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    evaluation = [row for row in rows if row["event"] == "eval"][-1]
    assert {"val_bleu", "val_chrf", "val_loss"} <= set(evaluation)


def test_the_data_carves_validation_when_none_is_given(corpus: dict[str, Path], tmp_path: Path) -> None:
    config = translation_data.TranslationDataConfig(
        train_files=(str(corpus["train_tsv"]),),
        source_language="xde",
        target_language="xen",
        num_carved_validation=5,
        cache_dir=str(tmp_path / "cache"),
    )
    data = translation_data.build_data(config)
    lines = corpus["train_tsv"].read_text(encoding="utf-8").splitlines()
    everything = [tuple(line.split("\t")) for line in lines[1:]]  # below the header naming the languages
    assert len(data.validation_pairs) == 5 and len(everything) == 120
    # The validation pairs are the carved positions' pairs, in file order; the rest is trained on, but
    # for the pairs repeating a validation source sentence (this corpus repeats its sentences).
    held = sorted(carved_positions(len(everything), 5, config.seed))
    assert data.validation_pairs == [everything[index] for index in held]
    carved_sources = {everything[index][0] for index in held}
    source = data.vocabulary.source
    trained = [source.decode(row) for row in data.train_store.rows("source", range(len(data.train_store)))]
    kept = [
        german for index, (german, _) in enumerate(everything) if index not in held and german not in carved_sources
    ]
    assert trained == kept


def test_evaluate_scores_any_source_and_reference_file(run: Path, corpus: dict[str, Path], capsys) -> None:
    hypotheses = run / "hyp.txt"
    code = main(
        [
            "evaluate",
            "translation",
            "--checkpoint",
            str(run),
            "--beam",
            "1",
            "--source",
            str(corpus["test_src"]),
            "--reference",
            str(corpus["test_ref"]),
            "--output",
            str(hypotheses),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert f"{corpus['test_src'].name}, 8 sentences, greedy" in out
    assert "tok:13a" in out and "chrF++" in out and "nc:6|nw:2" in out
    assert len(hypotheses.read_text(encoding="utf-8").splitlines()) == 8
    # The tokenizer follows the target language, and can be overridden.
    assert (
        main(
            [
                "evaluate",
                "translation",
                "--checkpoint",
                str(run),
                "--beam",
                "1",
                "--bleu-tokenize",
                "char",
                "--source",
                str(corpus["test_src"]),
                "--reference",
                str(corpus["test_ref"]),
                "--output",
                str(hypotheses),
            ]
        )
        == 0
    )
    assert "tok:char" in capsys.readouterr().out


def test_evaluate_keeps_the_hypotheses_of_a_file_of_the_same_name_from_elsewhere(
    run: Path, corpus: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two test.xde files in two folders, with other sentences: each keeps its own hypotheses.
    written = {}
    for folder, pairs in (("a", number_pairs(5, 7)), ("b", number_pairs(6, 8)), ("a", number_pairs(5, 7))):
        source, reference = tmp_path / folder / "test.xde", tmp_path / folder / "test.xen"
        source.parent.mkdir(exist_ok=True)
        source.write_text("".join(german + "\n" for german, _ in pairs), encoding="utf-8")
        reference.write_text("".join(english + "\n" for _, english in pairs), encoding="utf-8")
        arguments = ["--source", str(source), "--reference", str(reference)]
        assert main(["evaluate", "translation", "--checkpoint", str(run), "--beam", "1", *arguments]) == 0
        (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("hypotheses: ")]
        # The same file again writes where it wrote before.
        assert written.setdefault(folder, (Path(line.removeprefix("hypotheses: ")), len(pairs)))[0].name in line
    assert written["a"][0] != written["b"][0]
    assert written["a"][0].parent == written["b"][0].parent == resolve_checkpoint(run)
    for path, count in written.values():
        assert re.fullmatch(r"hypotheses\.test\.xde\.[0-9a-f]{8}\.greedy\w*\.txt", path.name)
        assert len(path.read_text(encoding="utf-8").splitlines()) == count
    # And its own row of the card, named as its hypotheses are (was: one "test.xde" row for both).
    splits = {test["split"] for test in read_card(resolve_checkpoint(run))["test"]}
    assert {file_test_name(tmp_path / folder / "test.xde") for folder in "ab"} <= splits
    assert "test.xde" not in splits


def test_a_file_named_like_a_split_keeps_the_split_s_scores_in_the_card(
    run: Path, corpus: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = resolve_checkpoint(run)
    source, reference = tmp_path / "source" / "test_2016_flickr", tmp_path / "reference" / "test_2016_flickr"
    for path, key in ((source, "test_src"), (reference, "test_ref")):
        path.parent.mkdir()
        path.write_bytes(corpus[key].read_bytes())
    # The split's scores, as `evaluate translation --split test_2016_flickr --beam 1 --precision fp32` records them.
    add_test_scores(checkpoint, "test_2016_flickr", "greedy", {"chrf": 1.25})
    arguments = ["evaluate", "translation", "--checkpoint", str(run), "--beam", "1", "--precision", "fp32"]
    arguments += ["--source", str(source), "--reference", str(reference), "--output", str(tmp_path / "hypotheses.txt")]
    assert main(arguments) == 0
    out = capsys.readouterr().out
    rows = {test["split"]: test["metrics"] for test in read_card(checkpoint)["test"] if test["search"] == "greedy"}
    assert rows["test_2016_flickr"] == {"chrf": 1.25}  # was: replaced by the file's scores without a word
    chrf = float(out.split("chrF++")[1].split()[0])
    assert round(rows[file_test_name(source)]["chrf"], 2) == chrf
    assert f"{source}, 8 sentences, greedy\n" in out  # the file, not a split, was scored


def test_evaluate_reports_the_papers_bleu_flavour_with_its_signature(
    run: Path, corpus: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    hypotheses = run / "hyp.papers.txt"
    arguments = ["evaluate", "translation", "--checkpoint", str(run), "--beam", "1", "--output", str(hypotheses)]
    arguments += ["--source", str(corpus["test_src"]), "--reference", str(corpus["test_ref"])]
    assert main([*arguments, "--bleu-flavour", "papers"]) == 0
    out = capsys.readouterr().out
    assert "BLEU (cased)" not in out and "tok:13a" not in out and "chrF++" in out
    # The figure printed is the papers flavour's on the hypotheses written, with its signature.
    written = hypotheses.read_text(encoding="utf-8").splitlines()
    references = corpus["test_ref"].read_text(encoding="utf-8").splitlines()
    papers = papers_bleu(written, references, "xen")
    assert f"BLEU (papers)     {papers.score:.2f}  {papers.signature}\n" in out
    assert papers.signature.startswith("flavour:papers|nrefs:1|case:lc|eff:no|tok:moses-xen|")
    # Both flavours' scores sit in the model card, under the same split and search.
    assert main(arguments) == 0
    assert "BLEU (cased)" in capsys.readouterr().out
    (scored,) = [
        test
        for test in read_card(resolve_checkpoint(run))["test"]
        if test["split"] == file_test_name(corpus["test_src"])
    ]
    assert {"bleu", "bleu_lowercased", "bleu_papers", "chrf"} <= set(scored["metrics"])
    # Two ways of finding the words is an error naming both flags.
    assert main([*arguments, "--bleu-flavour", "papers", "--bleu-tokenize", "intl"]) == 2
    assert "--bleu-tokenize and --bleu-flavour papers: expected one way" in capsys.readouterr().err
    # Without sacremoses: one line naming the extra, before anything is translated.
    hypotheses.unlink()
    monkeypatch.setitem(sys.modules, "sacremoses", None)
    assert main([*arguments, "--bleu-flavour", "papers"]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "--bleu-flavour papers" in error and 'pip install -e ".[moses]"' in error
    assert not hypotheses.exists()


def test_a_bleu_tokenizer_whose_package_is_missing_is_said_before_anything_is_translated(
    run: Path, corpus: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # sacreBLEU says so only as it scores: after the whole test set was translated, as a traceback.
    def without_mecab(*arguments: object, tokenize: str = "13a", **keywords: object) -> object:
        if tokenize == "ko-mecab":
            raise RuntimeError(
                "\nKorean tokenization requires extra dependencies, but you do not have them installed.\n"
                "Please install them like so.\n\n    pip install sacrebleu[ko]\n"
            )
        return sacrebleu_bleu(*arguments, tokenize=tokenize, **keywords)

    sacrebleu_bleu = sacrebleu.BLEU
    monkeypatch.setattr(sacrebleu, "BLEU", without_mecab)
    bleu._missing_package.cache_clear()
    translated = []
    monkeypatch.setattr(translation_evaluate, "evaluate_bleu", lambda *arguments, **keywords: translated.append(1))
    hypotheses = run / "hyp.mecab.txt"
    arguments = ["evaluate", "translation", "--checkpoint", str(run), "--output", str(hypotheses)]
    arguments += ["--source", str(corpus["test_src"]), "--reference", str(corpus["test_ref"])]
    try:
        assert main([*arguments, "--bleu-tokenize", "ko-mecab"]) == 1
    finally:
        bleu._missing_package.cache_clear()
    assert capsys.readouterr().err == (
        "transformer-lab evaluate: failed: --bleu-tokenize ko-mecab: the package sacreBLEU needs for this tokenizer "
        "is not installed: run pip install 'sacrebleu[ko]'\n"
    )
    assert translated == [] and not hypotheses.exists()


def test_another_bleu_tokenizer_s_scores_sit_beside_the_default_s_in_the_card(
    run: Path, corpus: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    hypotheses = run / "hyp.tokenize.txt"
    arguments = ["evaluate", "translation", "--checkpoint", str(run), "--beam", "1", "--precision", "fp32"]
    arguments += ["--output", str(hypotheses)]
    arguments += ["--source", str(corpus["test_src"]), "--reference", str(corpus["test_ref"])]
    assert main(arguments) == 0
    default = float(capsys.readouterr().out.split("BLEU (cased)")[1].split()[0])
    assert main([*arguments, "--bleu-tokenize", "char"]) == 0
    out = capsys.readouterr().out
    assert "tok:char" in out
    written = hypotheses.read_text(encoding="utf-8").splitlines()
    references = corpus["test_ref"].read_text(encoding="utf-8").splitlines()
    char = sacrebleu.corpus_bleu(written, [references], tokenize="char").score
    assert f"BLEU (cased)      {char:.2f}  " in out
    (scored,) = [
        test
        for test in read_card(resolve_checkpoint(run))["test"]
        if test["split"] == file_test_name(corpus["test_src"]) and test["search"] == "greedy"
    ]
    # The default tokenizer's BLEU stays under "bleu" (was: replaced by the char BLEU, named as if 13a).
    assert round(scored["metrics"]["bleu"], 2) == default
    assert scored["metrics"]["bleu_char"] == pytest.approx(char)
    assert "bleu_lowercased_char" in scored["metrics"]


def test_a_length_penalty_or_stop_of_its_own_gets_its_own_hypotheses_and_card_row(
    run: Path, corpus: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: one hypotheses file and one card row "beam 2" for all three, the last evaluation's.
    checkpoint = shutil.copytree(resolve_checkpoint(run), tmp_path / "best")
    arguments = ["evaluate", "translation", "--checkpoint", str(checkpoint), "--beam", "2", "--precision", "fp32"]
    arguments += ["--source", str(corpus["test_src"]), "--reference", str(corpus["test_ref"])]
    for given in ([], ["--length-penalty", "2"], ["--beam-stop", "finished"]):
        assert main([*arguments, *given]) == 0
    capsys.readouterr()
    searches = {test["search"] for test in read_card(checkpoint)["test"]}
    assert searches >= {"beam 2", "beam 2 alpha 2", "beam 2 finished"}
    written = sorted(path.name.split(".")[-2] for path in checkpoint.glob("hypotheses.*.beam2*.txt"))
    assert written == ["beam2", "beam2alpha2", "beam2finished"]


def test_an_output_over_the_files_the_model_trained_on_is_refused(
    run: Path, corpus: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: the training file replaced by the hypotheses, exit 0; the next --resume trained on them.
    before = corpus["train_tsv"].read_bytes()
    scored = ["--source", str(corpus["test_src"]), "--reference", str(corpus["test_ref"])]
    over = ["--output", str(corpus["train_tsv"])]
    assert main(["evaluate", "translation", "--checkpoint", str(run), "--beam", "1", *scored, *over]) == 2
    error = capsys.readouterr().err
    assert (
        f"--output: expected a file other than the model's training or validation file {corpus['train_tsv']}" in error
    )
    assert corpus["train_tsv"].read_bytes() == before


def test_a_multi30k_split_scored_by_a_run_on_own_files_is_named_multi30k_in_the_card(
    run: Path, corpus: dict[str, Path], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    (data / "multi30k").mkdir(parents=True)
    (data / "multi30k" / "val.xde").write_bytes(corpus["test_src"].read_bytes())
    (data / "multi30k" / "val.xen").write_bytes(corpus["test_ref"].read_bytes())
    arguments = ["evaluate", "translation", "--checkpoint", str(run), "--beam", "1", "--precision", "fp32"]
    arguments += ["--split", "val", "--data-dir", str(data), "--output", str(tmp_path / "hypotheses.txt")]
    assert main(arguments) == 0
    checkpoint = resolve_checkpoint(run)
    (scored,) = [test for test in read_card(checkpoint)["test"] if test["split"] == "val"]
    # Multi30k's val, not the run's own files (was: named train.tsv, the card's dataset).
    assert scored["dataset"] == "multi30k"
    card = (checkpoint / "README.md").read_text(encoding="utf-8")
    assert "name: multi30k\n      type: multi30k\n      split: val\n" in card


def test_an_unknown_split_is_named_by_its_option(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", "translation", "--checkpoint", str(run), "--split", "validation"]) == 2
    error = capsys.readouterr().err
    # Was: "split must be one of train, val, ...", naming no option.
    assert error.count("\n") == 1
    assert "--split: expected one of train, val, test_2016_flickr, " in error and "got 'validation'" in error


def test_evaluate_refuses_a_reference_of_another_length(
    run: Path, corpus: dict[str, Path], tmp_path: Path, capsys
) -> None:
    short = tmp_path / "short.xen"
    short.write_text("one\n", encoding="utf-8")
    code = main(
        [
            "evaluate",
            "translation",
            "--checkpoint",
            str(run),
            "--source",
            str(corpus["test_src"]),
            "--reference",
            str(short),
        ]
    )
    assert code == 2
    assert "expected aligned files with the same number of lines, got 8 line(s)" in capsys.readouterr().err
    code = main(["evaluate", "translation", "--checkpoint", str(run), "--source", str(corpus["test_src"])])
    assert code == 2
    assert "--source and --reference: expected both" in capsys.readouterr().err


def test_nbest_prints_k_scored_candidates_per_sentence_best_first(run: Path, capsys) -> None:
    assert main(["translate", "--checkpoint", str(run), "--nbest", "3", "eins zwei", "", "drei"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [(row[0], row[1]) for row in rows] == [
        ("1", "1"),
        ("1", "2"),
        ("1", "3"),
        ("3", "1"),
        ("3", "2"),
        ("3", "3"),
    ]
    for number in ("1", "3"):
        scores = [float(row[2]) for row in rows if row[0] == number]
        assert scores == sorted(scores, reverse=True)
    model, tokenizer, config = translation_train.load_translator(run / "best")
    beam = dataclasses.replace(config.decode, strategy="beam", beam_size=max(3, config.decode.beam_size), num_return=3)
    best = translate_nbest(model, tokenizer, "eins zwei", beam)
    assert [candidate.text for candidate in best] == [row[3] for row in rows if row[0] == "1"]
    code = main(["translate", "--checkpoint", str(run), "--nbest", "4", "--beam", "2", "eins"])
    assert code == 2
    assert "--nbest 4: expected --beam of at least 4, got --beam 2" in capsys.readouterr().err


def test_a_finetune_reads_its_files_in_the_checkpoints_languages_unless_told_otherwise(
    run: Path, corpus: dict[str, Path], tmp_path: Path
) -> None:
    # The headerless TSV names no language: without the checkpoint's, the run would record the preset's de -> en.
    tune = ["train", "translation", "--init-from", str(run), "--train", str(corpus["domain_tsv"])]
    steps = ["--set", "train.max_steps=1", "--set", "train.progress_bar=false", "--set", "data.max_tokens=512"]
    for given, languages in (([], ["xde", "xen"]), (["--target-language", "xfr"], ["xde", "xfr"])):
        out = tmp_path / "-".join(languages)
        assert main([*tune, *given, *steps, "--out", str(out)]) == 0
        saved = json.loads((out / "last" / "config.json").read_text(encoding="utf-8"))
        assert [saved["data"]["source_language"], saved["data"]["target_language"]] == languages


def test_a_finetune_answers_as_its_checkpoint_unless_told_otherwise(
    run: Path, corpus: dict[str, Path], tmp_path: Path
) -> None:
    # A checkpoint that searches with a beam of 3 and alpha 0.6: the fine-tune keeps them (was: the preset's 5 and 1.4).
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(run / "best", checkpoint)
    config_file = checkpoint / "config.json"
    saved = json.loads(config_file.read_text(encoding="utf-8"))
    saved["decode"].update(beam_size=3, length_penalty=0.6)
    config_file.write_text(json.dumps(saved), encoding="utf-8")
    tune = ["train", "translation", "--init-from", str(checkpoint), "--train", str(corpus["domain_tsv"])]
    steps = ["--set", "train.max_steps=1", "--set", "train.progress_bar=false", "--set", "data.max_tokens=512"]
    for given, search in (([], (3, 0.6)), (["--set", "decode.beam_size=4"], (4, 0.6))):
        out = tmp_path / f"tuned-{search[0]}"
        assert main([*tune, *given, *steps, "--out", str(out)]) == 0
        decode = json.loads((out / "last" / "config.json").read_text(encoding="utf-8"))["decode"]
        assert (decode["beam_size"], decode["length_penalty"]) == search


def test_finetuning_starts_from_the_checkpoint_with_its_tokenizer(
    run: Path, corpus: dict[str, Path], tmp_path: Path
) -> None:
    tuned = tmp_path / "tuned"
    code = main(
        [
            "train",
            "translation",
            "--init-from",
            str(run),
            "--out",
            str(tuned),
            "--train",
            str(corpus["domain_tsv"]),
            "--source-language",
            "xde",
            "--target-language",
            "xen",
            "--set",
            "train.max_steps=1",
            "--set",
            "train.progress_bar=false",
            "--set",
            "model.dropout=0.0",
            "--set",
            "data.max_tokens=512",
        ]
    )
    assert code == 0
    saved = json.loads((tuned / "last" / "config.json").read_text(encoding="utf-8"))
    original = json.loads((run / "best" / "config.json").read_text(encoding="utf-8"))
    assert saved["initialized_from"] == str(run / "best")
    # Its card says so: the 1 step and the domain pairs it lists are the fine-tune's, not the model's whole training.
    assert read_card(tuned / "last")["training"]["fine_tuned_from"] == str(run / "best")
    assert f"Fine-tuned from {run / 'best'}" in (tuned / "last" / "README.md").read_text(encoding="utf-8")
    assert (tuned / "last" / "tokenizer.json").read_bytes() == (run / "best" / "tokenizer.json").read_bytes()
    assert {key: value for key, value in saved["model"].items() if key != "dropout"} == {
        key: value for key, value in original["model"].items() if key != "dropout"
    }
    assert saved["model"]["dropout"] == 0.0
    # The settings the kept tokenizer was made with are the checkpoint's (300 entries), not the preset's (8000).
    settings = translation_train.SEQ2SEQ_TASK.vocabulary.settings
    assert {"vocab_size", "lowercase", "min_frequency", "tokenizer_file"} <= set(settings)
    assert {name: saved["data"][name] for name in settings} == {name: original["data"][name] for name in settings}
    assert saved["data"]["vocab_size"] == 300
    # The fine-tuning schedule, not the preset's.
    assert (saved["train"]["lr_factor"], saved["train"]["warmup_steps"], saved["train"]["cooldown_steps"]) == (
        0.02,
        100,
        0,
    )
    # One step from the checkpoint's weights: close to them, not to a fresh initialisation.
    model, _, _ = translation_train.load_translator(tuned / "last")
    start, _, start_config = translation_train.load_translator(run / "best")
    torch.manual_seed(123)
    fresh = Seq2SeqTransformer.from_config(start_config.model)
    moved = max((a - b).abs().max().item() for a, b in zip(model.parameters(), start.parameters()))
    apart = max((a - b).abs().max().item() for a, b in zip(fresh.parameters(), start.parameters()))
    assert moved < 0.01 < apart


def test_a_fine_tuned_run_resumes_with_its_schedule_model_and_tokenizer_exactly(
    run: Path, corpus: dict[str, Path], tmp_path: Path
) -> None:
    # The command that started the run, --init-from left out: nothing of the checkpoint is typed again.
    def command(out: Path, max_steps: int, *extra: str) -> list[str]:
        data = ["--train", str(corpus["domain_tsv"]), "--source-language", "xde", "--target-language", "xen"]
        settings = ["--set", f"train.max_steps={max_steps}", "--set", "train.progress_bar=false"]
        return ["train", "translation", "--out", str(out), *data, *settings, "--set", "data.max_tokens=128", *extra]

    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    assert main(command(whole, 4, "--init-from", str(run))) == 0
    assert main(command(resumed, 2, "--init-from", str(run))) == 0
    assert main(command(resumed, 4, "--resume")) == 0
    saved = json.loads((resumed / "last" / "config.json").read_text(encoding="utf-8"))
    # The fine-tuning rate (not the preset's 0.5), the checkpoint's model and vocabulary settings, its name.
    assert saved == json.loads((whole / "last" / "config.json").read_text(encoding="utf-8"))
    assert (saved["train"]["lr_factor"], saved["data"]["vocab_size"], saved["model"]["d_model"]) == (0.02, 300, 32)
    assert saved["initialized_from"] == str(run / "best")
    model, _, _ = translation_train.load_translator(resumed / "last")
    reference, _, _ = translation_train.load_translator(whole / "last")
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), reference.parameters()))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--resume"], "--init-from and --resume: expected one of them"),
        (
            ["--set", "model.d_model=48"],
            "--set model.d_model=48: expected the value of the checkpoint it fine-tunes, 32",
        ),
        (
            # A space before '=': the key is read as --set reads it, not as "d_model ".
            ["--set", "model.d_model =48"],
            "--set model.d_model=48: expected the value of the checkpoint it fine-tunes, 32",
        ),
        (
            # The checkpoint's tokenizer is kept: a BPE of 500 entries would be recorded, never learned.
            ["--set", "data.vocab_size=500"],
            "--set data.vocab_size=500: expected the value of the checkpoint it fine-tunes, 300",
        ),
        (
            ["--set", "data.tokenizer_file=other.json"],
            "--set data.tokenizer_file='other.json': expected the value of the checkpoint it fine-tunes, ''",
        ),
    ],
)
def test_finetuning_refuses_what_cannot_reuse_the_weights(
    run: Path, corpus: dict[str, Path], tmp_path: Path, capsys, extra, message
) -> None:
    code = main(
        [
            "train",
            "translation",
            "--init-from",
            str(run),
            "--out",
            str(tmp_path / "bad"),
            "--train",
            str(corpus["domain_tsv"]),
            "--source-language",
            "xde",
            "--target-language",
            "xen",
            *extra,
        ]
    )
    assert code == 2
    assert message in capsys.readouterr().err


def test_finetuning_checks_the_model_keys_of_a_config_file_as_those_of_set(
    run: Path, corpus: dict[str, Path], tmp_path: Path, capsys
) -> None:
    # A model key changed by --config is refused as --set refuses it, naming the file it came from.
    (tmp_path / "run.yaml").write_text("model:\n  d_model: 48\n", encoding="utf-8")
    arguments = ["train", "translation", "--init-from", str(run), "--train", str(corpus["domain_tsv"])]
    languages = ["--source-language", "xde", "--target-language", "xen"]
    code = main([*arguments, *languages, "--out", str(tmp_path / "bad"), "--config", str(tmp_path / "run.yaml")])
    assert code == 2
    error = capsys.readouterr().err
    assert (
        f"--config {tmp_path / 'run.yaml'} model.d_model=48: expected the value of the checkpoint it fine-tunes, 32"
        in error
    )
    # So is a setting its tokenizer was made with.
    (tmp_path / "run.yaml").write_text("data:\n  lowercase: true\n", encoding="utf-8")
    code = main([*arguments, *languages, "--out", str(tmp_path / "bad"), "--config", str(tmp_path / "run.yaml")])
    assert code == 2
    assert (
        f"--config {tmp_path / 'run.yaml'} data.lowercase=True: expected the value of the checkpoint it fine-tunes, "
        "False" in capsys.readouterr().err
    )
    # model.dropout shapes no weight: the file's value is kept, not the checkpoint's.
    (tmp_path / "run.yaml").write_text(
        "model:\n  dropout: 0.05\ntrain:\n  max_steps: 1\n  progress_bar: false\ndata:\n  max_tokens: 512\n",
        encoding="utf-8",
    )
    tuned = tmp_path / "tuned"
    assert main([*arguments, *languages, "--out", str(tuned), "--config", str(tmp_path / "run.yaml")]) == 0
    saved = json.loads((tuned / "last" / "config.json").read_text(encoding="utf-8"))
    original = json.loads((run / "best" / "config.json").read_text(encoding="utf-8"))
    assert saved["model"] == {**original["model"], "dropout": 0.05}


def test_a_config_files_model_values_that_are_the_presets_say_the_checkpoints_replace_them(
    run: Path, corpus: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The file gives the preset's d_model 256 and nhead 4: no choice (a printed preset fed back means
    # the preset), so the checkpoint's 32 and 2 stay, and now that is said (was: silent).
    original = json.loads((run / "best" / "config.json").read_text(encoding="utf-8"))["model"]
    assert (original["d_model"], original["nhead"]) == (32, 2)
    (tmp_path / "run.yaml").write_text("model:\n  d_model: 256\n  nhead: 4\n", encoding="utf-8")
    arguments = ["train", "translation", "--init-from", str(run), "--train", str(corpus["domain_tsv"])]
    arguments += ["--source-language", "xde", "--target-language", "xen", "--config", str(tmp_path / "run.yaml")]
    arguments += ["--set", "train.max_steps=1", "--set", "train.progress_bar=false", "--set", "data.max_tokens=512"]
    with caplog.at_level(logging.INFO):
        assert main([*arguments, "--out", str(tmp_path / "tuned")]) == 0
    saved = json.loads((tmp_path / "tuned" / "last" / "config.json").read_text(encoding="utf-8"))["model"]
    assert saved == original
    (said,) = [line for line in caplog.messages if "choose nothing" in line]
    assert f"--init-from {run / 'best'} keeps model.d_model=32, model.nhead=2 (give a value with --set" in said
    assert said.endswith("to change it; of the model's, a fine-tune can change model.dropout only)")


def test_the_printed_preset_fed_back_to_a_fine_tune_keeps_the_fine_tuning_schedule(
    run: Path, corpus: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog
) -> None:
    # `config translation` lists the preset's rate and schedule: no choice, so the fine-tune's stay (was: 0.5, 800).
    assert main(["config", "translation"]) == 0
    preset_file = tmp_path / "run.yaml"
    preset_file.write_text(capsys.readouterr().out, encoding="utf-8")
    (tmp_path / "rate.yaml").write_text("train:\n  lr_factor: 0.05\n", encoding="utf-8")
    arguments = ["train", "translation", "--init-from", str(run), "--train", str(corpus["domain_tsv"])]
    arguments += ["--source-language", "xde", "--target-language", "xen", "--config", str(preset_file)]
    settings = ["--set", "train.max_steps=1", "--set", "train.progress_bar=false", "--set", "data.max_tokens=512"]
    schedules, said = [], []
    undone = ["--config", str(tmp_path / "rate.yaml"), "--config", str(preset_file)]
    for name, extra in (("printed", []), ("rate", ["--config", str(tmp_path / "rate.yaml")]), ("undone", undone)):
        caplog.clear()
        with caplog.at_level(logging.INFO):
            assert main([*arguments, *extra, *settings, "--out", str(tmp_path / name)]) == 0
        said.append(next((line for line in caplog.messages if "choose nothing" in line), ""))
        saved = json.loads((tmp_path / name / "last" / "config.json").read_text(encoding="utf-8"))["train"]
        schedules.append({key: saved[key] for key in ("lr_factor", "warmup_steps", "cooldown_steps")})
    assert schedules[0] == {"lr_factor": 0.02, "warmup_steps": 100, "cooldown_steps": 0}
    # And says so, naming the values kept (was: silent).
    assert said[0].startswith(f"--config {preset_file}: the preset's own values choose nothing, so the fine-tuning ")
    assert "schedule keeps train.lr_factor=0.02, train.warmup_steps=100, train.cooldown_steps=0" in said[0]
    assert "train.lr_factor" not in said[1] and "train.warmup_steps=100" in said[1]
    # A value of the user's own still wins over the schedule.
    assert schedules[1] == {"lr_factor": 0.05, "warmup_steps": 100, "cooldown_steps": 0}
    # A later file's preset value that undoes an earlier file's choice is a choice too (was: the schedule's 0.02).
    assert schedules[2] == {"lr_factor": 0.5, "warmup_steps": 100, "cooldown_steps": 0}


def test_finetuning_refuses_a_checkpoint_of_another_task(
    run: Path, corpus: dict[str, Path], tmp_path: Path, capsys
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    saved = json.loads((run / "best" / "config.json").read_text(encoding="utf-8"))
    (other / "config.json").write_text(json.dumps({**saved, "task": "couplet"}), encoding="utf-8")
    code = main(
        [
            "train",
            "translation",
            "--init-from",
            str(other),
            "--out",
            str(tmp_path / "bad"),
            "--train",
            str(corpus["domain_tsv"]),
        ]
    )
    assert code == 2
    assert "--init-from: expected a translation checkpoint, got" in capsys.readouterr().err


def test_a_given_tokenizer_file_is_used_instead_of_training_one(
    run: Path, corpus: dict[str, Path], tmp_path: Path
) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    # A WordPiece tokenizer of the user's own, with the project's four specials first.
    tokenizer = Tokenizer(models.WordPiece(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordPieceTrainer(vocab_size=80, special_tokens=["<pad>", "<unk>", "<bos>", "<eos>"])
    lines = corpus["train_tsv"].read_text(encoding="utf-8").replace("\t", "\n").splitlines()
    tokenizer.train_from_iterator(lines, trainer)
    path = tmp_path / "mine.json"
    tokenizer.save(str(path))
    out = tmp_path / "with-mine"
    code = main(
        [
            "train",
            "translation",
            "--out",
            str(out),
            "--train",
            str(corpus["train_tsv"]),
            "--source-language",
            "xde",
            "--target-language",
            "xen",
            "--set",
            f"data.tokenizer_file={path}",
            *TINY_MODEL,
        ]
    )
    assert code == 0
    model, stored, config = translation_train.load_translator(out)
    assert stored.is_joint and stored.source.vocab_size == tokenizer.get_vocab_size() == config.model.src_vocab_size
    assert stored.source.encode("eins zwei") == tokenizer.encode("eins zwei").ids


def test_a_tokenizer_file_missing_or_of_another_form_is_named_by_its_setting(
    run: Path, corpus: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: "path must be an existing tokenizer JSON file", naming the loader's keyword, not the setting.
    (tmp_path / "empty.json").write_text("{}", encoding="utf-8")
    missing = tmp_path / "missing.json"
    good = ["--set", f"data.tokenizer_file={run / 'best' / 'tokenizer.json'}"]
    command = ["prepare", "translation", "--out", str(tmp_path / "out"), "--train", str(corpus["train_tsv"])]
    command += ["--source-language", "xde", "--target-language", "xen"]
    cases = [
        (
            ["--set", f"data.tokenizer_file={missing}"],
            f"data.tokenizer_file: expected an existing tokenizer JSON file, " f"got '{missing}'",
        ),
        (
            [*good, "--set", f"data.target_tokenizer_file={missing}"],
            "data.target_tokenizer_file: expected an existing " f"tokenizer JSON file, got '{missing}'",
        ),
        (
            ["--set", f"data.tokenizer_file={tmp_path / 'empty.json'}"],
            f"data.tokenizer_file: {tmp_path / 'empty.json'}: "
            "expected a tokenizer JSON file, got a JSON object without a typed 'model' entry",
        ),
    ]
    for settings, message in cases:
        assert main([*command, *settings]) == 2
        error = capsys.readouterr().err.strip()
        assert error.startswith(f"transformer-lab prepare: error: {message}"), error
        assert not (tmp_path / "out").exists()


def test_a_bpe_setting_beside_a_tokenizer_file_is_refused_not_recorded(
    run: Path, corpus: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The given tokenizer is used as it is: the BPE settings were ignored and written into config.json.
    tokenizer = ["--set", f"data.tokenizer_file={run / 'best' / 'tokenizer.json'}"]
    languages = ["--source-language", "xde", "--target-language", "xen"]
    out = tmp_path / "out"
    for setting, shown in (("data.vocab_size=500", "500"), ("data.lowercase=true", "True")):
        command = ["train", "translation", "--out", str(out), "--train", str(corpus["train_tsv"]), *languages]
        assert main([*command, *tokenizer, *TINY_MODEL, "--set", setting]) == 2
        name = setting.partition("=")[0]
        error = capsys.readouterr().err.strip()
        assert error.startswith(f"transformer-lab train: error: {name}: expected it only without data.tokenizer_file (")
        assert error.endswith(f", unused with data.tokenizer_file), got {shown} (--set)"), error
        assert not out.exists()


@pytest.mark.parametrize("given", ["tokenizer_file", "init_from"])
def test_a_fine_tune_trains_from_a_folder_prepared_with_the_checkpoints_tokenizer(
    run: Path, corpus: dict[str, Path], tmp_path: Path, given: str
) -> None:
    # The folder recorded the preset's vocab_size (8000) beside the given tokenizer of 300 entries: the
    # fine-tune was refused, "data.vocab_size: expected the prepared corpus's own value (8000) or none, got 300".
    folder, tuned = tmp_path / "prepared", tmp_path / "tuned"
    languages = ["--source-language", "xde", "--target-language", "xen"]
    tokenizer_file = ["--set", f"data.tokenizer_file={run / 'best' / 'tokenizer.json'}"]
    tokenizer = tokenizer_file if given == "tokenizer_file" else ["--init-from", str(run)]
    prepare = ["prepare", "translation", "--train", str(corpus["domain_tsv"]), "--out", str(folder), "--no-progress"]
    assert main([*prepare, *languages, *tokenizer]) == 0
    prepared = translation_data.corpus_kind(translation_train.default_config().data).open(folder)
    assert (
        prepared.tokenizers.source.to_json()
        == translation_train.SEQ2SEQ_TASK.vocabulary.read(run / "best").source.to_json()
    )
    settings = ["--set", "train.max_steps=1", "--set", "train.progress_bar=false", "--set", "data.max_tokens=512"]
    command = ["train", "translation", "--prepared", str(folder), "--out", str(tuned), *settings]
    assert main([*command, "--init-from", str(run)]) == 0
    saved = json.loads((tuned / "last" / "config.json").read_text(encoding="utf-8"))
    assert (saved["data"]["vocab_size"], saved["initialized_from"]) == (300, str(run / "best"))
    # A run from the folder without --init-from records the given tokenizer's size and case (was: the preset's
    # 8000, or a --set vocab_size of 500 and lowercase true, none of them the tokenizer's, exit 0).
    model = [part for pair in zip(TINY[::2], TINY[1::2]) if pair[1].startswith("model.") for part in pair]
    fresh = [*command[:5], str(tmp_path / "fresh"), *settings, *model]
    assert main([*fresh, "--set", "data.vocab_size=500"]) == 2
    assert main(fresh) == 0
    saved = json.loads((tmp_path / "fresh" / "last" / "config.json").read_text(encoding="utf-8"))["data"]
    assert (saved["vocab_size"], saved["lowercase"], saved["separate_vocabularies"]) == (300, False, False)


def test_validation_loss_is_the_mean_token_cross_entropy_of_unbatched_pairs(run: Path) -> None:
    import torch.nn.functional as F

    from transformer_lab.data import BOS_ID, EOS_ID
    from transformer_lab.training.batch_losses import validation_loss

    model, tokenizer, _ = translation_train.load_translator(run)
    encoded = tokenizer.encode_pairs(number_pairs(9, seed=8))
    total, count = 0.0, 0
    with torch.no_grad():
        for source, target in encoded:  # one pair at a time: no padding anywhere
            logits = model(torch.tensor([source]), torch.tensor([[BOS_ID, *target]]))[0]  # [T, V]
            total += float(F.cross_entropy(logits, torch.tensor([*target, EOS_ID]), reduction="sum"))
            count += len(target) + 1
        batched = validation_loss(model, encoded, max_tokens=64)
    assert batched == pytest.approx(total / count, rel=1e-5)


def train_on(train_file: Path, out: Path) -> int:
    """``train translation`` on one TSV file of xde -> xen pairs, tiny; its exit code."""
    arguments = ["--train", str(train_file), "--source-language", "xde", "--target-language", "xen", *TINY]
    return main(["train", "translation", "--out", str(out), *arguments])


def test_a_pair_longer_than_the_positional_table_is_refused_before_training(
    corpus: dict[str, Path], tmp_path: Path, capsys
) -> None:
    long = tmp_path / "long.tsv"
    long.write_text(
        corpus["train_tsv"].read_text(encoding="utf-8") + ("eins " * 40).strip() + "\tone\n", encoding="utf-8"
    )
    code = train_on(long, tmp_path / "run")
    assert code == 2
    error = capsys.readouterr().err
    # Carving may put it among the validation pairs: those are checked too, and named by their line as well.
    assert re.search(rf"(training|validation) data: the pair at line \d+ of {re.escape(str(long))} \('eins eins", error)
    assert "has 40 subword tokens on one side (with bos/eos), expected at most model.max_len=32" in error
    assert error.strip().endswith("; raise model.max_len or leave it out")
    assert not (tmp_path / "run" / "last").exists()


def test_a_pair_too_long_for_a_fine_tune_is_advised_out_not_a_larger_table(
    run: Path, corpus: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The advice was "raise model.max_len", which a fine-tune then refused: it keeps the checkpoint's architecture.
    long = tmp_path / "long.tsv"
    long.write_text(corpus["domain_tsv"].read_text(encoding="utf-8") + "eins " * 299 + "eins\tone\n", encoding="utf-8")
    arguments = ["train", "translation", "--init-from", str(run), "--train", str(long), "--out", str(tmp_path / "ft")]
    assert main([*arguments, "--set", "train.max_steps=1", "--set", "train.progress_bar=false"]) == 2
    error = capsys.readouterr().err.strip()
    assert "subword tokens on one side" in error and "\n" not in error
    assert error.endswith("; leave it out (a fine-tune or a resume keeps the checkpoint's model.max_len)")


def test_a_training_pair_too_long_is_named_by_its_file_and_line_past_the_carved_pairs(
    corpus: dict[str, Path], tmp_path: Path, capsys
) -> None:
    # The prepared corpus keeps ids only: the file is read again to name the line.
    header, *lines = corpus["train_tsv"].read_text(encoding="utf-8").splitlines(keepends=True)
    position = 60
    assert position not in carved_positions(len(lines) + 1, 1000, 1234)  # a training pair, after carved ones
    assert min(carved_positions(len(lines) + 1, 1000, 1234)) < position
    long = tmp_path / "long.tsv"
    long.write_text(
        header + "".join(lines[:position]) + ("eins " * 40).strip() + "\tone\n" + "".join(lines[position:]),
        encoding="utf-8",
    )
    code = train_on(long, tmp_path / "run")
    assert code == 2
    error = capsys.readouterr().err
    assert f"training data: the pair at line {position + 2} of {long} ('eins eins" in error
    assert "has 40 subword tokens on one side (with bos/eos), expected at most model.max_len=32" in error


def test_a_validation_pair_too_long_is_named_by_its_file_and_line(
    corpus: dict[str, Path], tmp_path: Path, capsys
) -> None:
    # A carved pair: was "validation data: pair 3 ('eins eins ...", its rank among the held-out pairs, no file.
    header, *lines = corpus["train_tsv"].read_text(encoding="utf-8").splitlines(keepends=True)
    position = sorted(carved_positions(len(lines) + 1, 1000, 1234))[2]
    long = tmp_path / "long.tsv"
    long.write_text(
        header + "".join(lines[:position]) + ("eins " * 40).strip() + "\tone\n" + "".join(lines[position:]),
        encoding="utf-8",
    )
    assert train_on(long, tmp_path / "run") == 2
    error = capsys.readouterr().err
    assert f"validation data: the pair at line {position + 2} of {long} ('eins eins" in error, error


def test_separate_vocabularies_train_one_bpe_per_side_and_survive_resume_and_fine_tuning(
    corpus: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "separate"
    arguments = [
        "--train",
        str(corpus["train_tsv"]),
        "--valid",
        str(corpus["valid_jsonl"]),
        "--source-language",
        "xde",
        "--target-language",
        "xen",
        *TINY,
        "--set",
        "data.separate_vocabularies=true",
        "--set",
        "data.target_vocab_size=280",
    ]
    assert main(["train", "translation", "--out", str(out), *arguments]) == 0
    files = {path.name for path in (out / "last").iterdir()}
    assert {"source_tokenizer.json", "target_tokenizer.json"} <= files and "tokenizer.json" not in files
    model, tokenizers, config = translation_train.load_translator(out / "last")
    assert not tokenizers.is_joint
    # Each side learned from its own language only: no German word is a target token and no English one a source token.
    source_tokens = {tokenizers.source.id_to_token(index) for index in range(tokenizers.source.vocab_size)}
    target_tokens = {tokenizers.target.id_to_token(index) for index in range(tokenizers.target.vocab_size)}
    assert "eins" in source_tokens and "eins" not in target_tokens
    assert "three" in target_tokens and "three" not in source_tokens
    assert (config.model.src_vocab_size, config.model.tgt_vocab_size) == (
        tokenizers.source.vocab_size,
        tokenizers.target.vocab_size,
    )
    # One matrix cannot embed two vocabularies: the preset's "all" became "decoder".
    assert config.model.tie_embeddings == "decoder"
    assert model.src_embedding.embedding.weight.data_ptr() != model.tgt_embedding.embedding.weight.data_ptr()
    assert model.generator.weight.data_ptr() == model.tgt_embedding.embedding.weight.data_ptr()
    greedy = dataclasses.replace(config.decode, strategy="greedy")
    (candidate,) = translate_nbest(model, tokenizers, "eins zwei", greedy)
    assert candidate.text == tokenizers.target.decode(candidate.ids)

    # Resume and fine-tune keep both tokenizers byte for byte.
    names = ("source_tokenizer.json", "target_tokenizer.json")
    first = {name: (out / "last" / name).read_bytes() for name in names}
    assert main(["train", "translation", "--out", str(out), "--resume", *arguments, "--set", "train.max_steps=6"]) == 0
    tuned = tmp_path / "tuned"
    assert (
        main(
            [
                "train",
                "translation",
                "--out",
                str(tuned),
                "--init-from",
                str(out / "last"),
                "--train",
                str(corpus["domain_tsv"]),
                "--source-language",
                "xde",
                "--target-language",
                "xen",
                "--set",
                "train.max_steps=2",
                "--set",
                "train.progress_bar=false",
            ]
        )
        == 0
    )
    from transformer_lab.training import load_trainer_state

    assert load_trainer_state(out / "last")["global_step"] == 6  # the resume did run
    for folder in (out / "last", tuned / "last"):
        assert {name: (folder / name).read_bytes() for name in names} == first, folder


def test_a_target_vocabulary_size_without_separate_vocabularies_is_refused_not_ignored(
    corpus: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The joint BPE has one size: 280 for the target side would be recorded and never learned.
    out = tmp_path / "joint"
    languages = ["--source-language", "xde", "--target-language", "xen"]
    arguments = ["--train", str(corpus["train_tsv"]), *languages, *TINY, "--set", "data.target_vocab_size=280"]
    assert main(["train", "translation", "--out", str(out), *arguments]) == 2
    assert (
        "data.target_vocab_size: expected only with data.separate_vocabularies=true (one joint BPE has the one "
        "size data.vocab_size=300), got 280 without it" in capsys.readouterr().err
    )
    assert not out.exists()
    data_settings = ["--set", "data.vocab_size=300", "--set", "data.min_frequency=1", *arguments[-2:]]
    prepare = ["prepare", "translation", "--out", str(tmp_path / "prepared"), "--train", str(corpus["train_tsv"])]
    assert main([*prepare, *languages, *data_settings]) == 2
    assert "data.target_vocab_size: expected only with" in capsys.readouterr().err
    assert not (tmp_path / "prepared").exists()


def test_the_python_translator_gives_what_the_command_line_prints(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformer_lab import Translator

    sentences = ["eins zwei", "drei vier fünf", "sechs"]
    translator = Translator(run)
    assert translator.languages == ("xde", "xen")
    capsys.readouterr()
    assert main(["translate", "--checkpoint", str(run), *sentences]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert translator.translate(sentences) == printed
    assert translator.translate(sentences[0]) == printed[0]  # one str in, one str out
    assert translator.translate(["   "]) == [""]

    assert main(["translate", "--checkpoint", str(run), "--beam", "3", "--nbest", "3", sentences[1]]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    candidates = translator.translate(sentences[1], beam=3, nbest=3)
    assert [candidate.text for candidate in candidates] == [row[3] for row in rows]
    assert [f"{candidate.score:.4f}" for candidate in candidates] == [row[2] for row in rows]
    assert translator.translate(sentences[1], beam=3) == candidates[0].text
    for bad, message in (
        ({"precision": "fp8"}, "precision: expected one of"),
        ({"beam": 2, "nbest": 3}, "nbest 3: expected beam of at least 3, got beam 2"),
    ):
        with pytest.raises(ValueError, match=message):
            translator.translate(sentences, **bad)


def test_prepare_then_train_from_the_prepared_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The README's two commands: prepare a corpus once, then train from its folder.
    pairs = number_pairs(60, 5)
    source, target = tmp_path / "corpus.de", tmp_path / "corpus.en"
    source.write_text("".join(de + "\n" for de, _ in pairs), encoding="utf-8")
    target.write_text("".join(en + "\n" for _, en in pairs), encoding="utf-8")
    prepared, out = tmp_path / "data" / "de-en", tmp_path / "runs" / "de-en"
    # The tokenizer's settings belong to the prepared corpus; the batch size (data.max_tokens) to the run.
    data_settings = TINY[:4]
    arguments = ["prepare", "translation", "--train", str(source), str(target), "--out", str(prepared), "--no-progress"]
    assert main([*arguments, *data_settings, "--set", "data.num_carved_validation=6"]) == 0
    capsys.readouterr()
    assert main(["train", "translation", "--prepared", str(prepared), "--out", str(out), *TINY[4:]]) == 0
    assert capsys.readouterr().out.startswith("trained 4 steps")
    saved = json.loads((out / "last" / "config.json").read_text(encoding="utf-8"))
    assert saved["data"]["prepared_dir"] == str(prepared) and (out / "best" / "model.safetensors").is_file()


# TINY less its schedule: the preset's warm-up 800, cool-down 800 and 34 epochs.
TINY_PRESET_SCHEDULE = [
    argument
    for setting in zip(TINY[::2], TINY[1::2])
    for argument in setting
    if not setting[1].startswith(("train.max_steps=", "train.warmup_steps=", "train.cooldown_steps="))
]


def test_a_small_corpus_scales_the_preset_schedule_and_refuses_a_given_one_that_cannot_fit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    # 200 pairs: 34 epochs of a few batches, far fewer steps than the preset's 800 + 800.
    train, valid = tmp_path / "train.tsv", tmp_path / "valid.tsv"
    train.write_text("".join(f"{de}\t{en}\n" for de, en in number_pairs(200, 5)), encoding="utf-8")
    valid.write_text("".join(f"{de}\t{en}\n" for de, en in number_pairs(10, 6)), encoding="utf-8")
    command = ["train", "translation", "--train", str(train), "--valid", str(valid), *TINY_PRESET_SCHEDULE]
    command += ["--source-language", "xde", "--target-language", "xen"]
    command += ["--set", "train.epochs=3", "--set", "train.log_every_steps=1"]
    with caplog.at_level("INFO"):
        assert main([*command, "--out", str(tmp_path / "scaled")]) == 0
    (line,) = [record.getMessage() for record in caplog.records if "too short for the schedule" in record.getMessage()]
    steps = int(re.search(r"the run's (\d+) optimizer steps", line).group(1))
    warmup = round(800 * steps / 3200)
    assert "warm-up 800 and cool-down 800" in line and f"scaled to warm-up {warmup} and cool-down {warmup}" in line
    rates = [
        json.loads(row)["lr"]
        for row in (tmp_path / "scaled" / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
        if json.loads(row)["event"] == "train"
    ]
    # The preset's peak, 0.5 / sqrt(32 x 800), reached within the run, and a rate that falls at its end.
    assert max(rates) == pytest.approx(0.5 / (32 * 800) ** 0.5, rel=1e-3) and rates[-1] < max(rates) / 2
    # A cool-down the user gives is taken as given: longer than the run, it is an error naming it.
    capsys.readouterr()
    assert main([*command, "--out", str(tmp_path / "given"), "--set", "train.cooldown_steps=800"]) == 2
    refused = r"train.cooldown_steps: expected at most the run's \d+ optimizer steps, got 800"
    assert re.search(refused, capsys.readouterr().err)


def test_a_given_warmup_leaves_the_preset_cooldown_unscaled_and_the_refusal_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 20 pairs, 2 epochs: a few steps, under the preset's cool-down of 800 that the user never set.
    train, valid = tmp_path / "train.tsv", tmp_path / "valid.tsv"
    train.write_text("".join(f"{de}\t{en}\n" for de, en in number_pairs(20, 5)), encoding="utf-8")
    valid.write_text("".join(f"{de}\t{en}\n" for de, en in number_pairs(4, 6)), encoding="utf-8")
    command = ["train", "translation", "--train", str(train), "--valid", str(valid), *TINY_PRESET_SCHEDULE]
    command += ["--source-language", "xde", "--target-language", "xen", "--out", str(tmp_path / "run")]
    assert main([*command, "--set", "train.epochs=2", "--set", "train.warmup_steps=2"]) == 2
    error = capsys.readouterr().err
    assert "got the preset's 800, not scaled to the run since train.warmup_steps was given (--set)" in error
    assert "set train.cooldown_steps too" in error and "lower it" not in error


@pytest.mark.parametrize("code", ["", " de", "de en", "d", "x" * 40, "de\n", "日本"])
def test_a_language_code_that_is_none_is_refused_naming_its_key(code: str) -> None:
    # Was taken: '' left the model card's language list without the source, 1 MB went into config.json and the card.
    with pytest.raises(ValueError, match=r"^data\.source_language: expected a language code such as 'de'"):
        translation_data.TranslationDataConfig(source_language=code)
    for accepted in ("de", "zh-Hans", "pt_BR", "fra"):
        assert translation_data.TranslationDataConfig(source_language=accepted).source_language == accepted
