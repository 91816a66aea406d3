"""The translation task end to end on 200 real Multi30k lines (skipped without the data folder)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
import yaml

from transformer_lab.cli import main
from transformer_lab.data import load_multi30k
from transformer_lab.data.tokenizer_pair import JOINT_TOKENIZER_FILE
from transformer_lab.decoding.sentences import translate_nbest, translate_sentences
from transformer_lab.hardware import cpu_model_name
from transformer_lab.tasks.translation import data as translation_data
from transformer_lab.tasks.translation import train as translation_train
from transformer_lab.training import apply_overrides
from transformer_lab.training.model_card import file_test_name

DATA_DIR = Path(__file__).resolve().parents[3] / "shared" / "data"
pytestmark = pytest.mark.skipif(
    not (DATA_DIR / "multi30k" / "train.de").is_file(),
    reason=f"the Multi30k files are not in {DATA_DIR} (the team's shared data folder)",
)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = apply_overrides(
        translation_train.default_config(),
        [
            f"data.data_dir={DATA_DIR}",
            "data.num_train=200",
            "data.num_validation=20",
            "data.vocab_size=400",
            "data.max_tokens=1024",
            "model.d_model=32",
            "model.nhead=2",
            "model.num_encoder_layers=1",
            "model.num_decoder_layers=1",
            "model.dim_feedforward=64",
            "train.epochs=2",
            "train.cooldown_steps=0",  # the preset's is longer than this run
            "train.warmup_steps=10",
            "train.keep_last=2",
            "train.progress_bar=false",
            "decode.max_len=20",
        ],
    )
    out_dir = tmp_path_factory.mktemp("translation")
    result = translation_train.train(config, out_dir)
    assert result.summary["steps"] > 0
    # The weights as training left them in memory: the oracle the saved checkpoint must equal.
    TRAINED_STATES[out_dir] = {name: tensor.detach().clone() for name, tensor in result.model.state_dict().items()}
    return out_dir


TRAINED_STATES: dict[Path, dict[str, torch.Tensor]] = {}


def test_training_writes_checkpoints_that_reload_to_the_same_model(trained_run: Path) -> None:
    for folder in ("last", "best"):
        assert (trained_run / folder / "model.safetensors").is_file()
        assert (trained_run / folder / JOINT_TOKENIZER_FILE).is_file()
    model, tokenizer, config = translation_train.load_translator(trained_run / "last")
    trained = TRAINED_STATES[trained_run]
    loaded = model.state_dict()
    assert loaded.keys() == trained.keys()
    assert all(torch.equal(loaded[name], trained[name]) for name in trained), "last/ differs from the trained weights"
    # And the reloaded model computes with them (not, say, a fresh initialisation).
    src = torch.tensor([tokenizer.source.encode("Ein Mann fährt Fahrrad.")])
    tgt = torch.tensor([[config.model.bos_id]])
    fresh = type(model).from_config(config.model).eval()
    assert not torch.allclose(model(src, tgt), fresh(src, tgt))
    # The tokenizer stored in the checkpoint detokenizes exactly.
    assert (
        tokenizer.target.decode(tokenizer.source.encode("Zwei Hunde spielen im Schnee."))
        == "Zwei Hunde spielen im Schnee."
    )


def test_translate_handles_empty_unseen_and_too_long_input(trained_run: Path) -> None:
    model, tokenizer, config = translation_train.load_translator(trained_run / "last")
    greedy = dataclasses.replace(config.decode, strategy="greedy")
    outputs = translate_sentences(model, tokenizer, ["", "   ", "日本語と😀", "Ein Hund."], greedy)
    assert outputs[0] == "" and outputs[1] == ""
    # Blank neighbours and batching change nothing: each sentence alone gets the same output.
    for sentence, output in zip(["日本語と😀", "Ein Hund."], outputs[2:]):
        assert translate_sentences(model, tokenizer, [sentence], greedy) == [output]
        assert translate_nbest(model, tokenizer, sentence, greedy)[0].text == output
    with pytest.raises(ValueError, match=r"sentences\[0\] must be at most 256 subword tokens"):
        translate_sentences(model, tokenizer, ["Hund " * 400], greedy)


def test_cli_translate_evaluate_and_average(trained_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["translate", "--checkpoint", str(trained_run / "last"), "--beam", "2", "Ein Mann.", "Eine Frau."]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert (
        main(["average-checkpoints", "--run", str(trained_run), "--last", "2", "--out", str(trained_run / "averaged")])
        == 0
    )
    assert (trained_run / "averaged" / "model.safetensors").is_file()
    hypotheses = trained_run / "hyp.txt"
    code = main(
        [
            "evaluate",
            "translation",
            "--checkpoint",
            str(trained_run / "averaged"),
            "--split",
            "val",
            "--data-dir",
            str(DATA_DIR),
            "--beam",
            "1",
            "--output",
            str(hypotheses),
        ]
    )
    assert code == 0
    output = capsys.readouterr().out
    assert "BLEU (cased)" in output and "nrefs:1|case:mixed|eff:no|tok:13a" in output
    assert len(hypotheses.read_text(encoding="utf-8").splitlines()) == 1014


def test_cli_bad_input_is_one_line(trained_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["translate", "--checkpoint", str(trained_run / "missing"), "Hallo"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "missing" in error[0]
    assert main(["translate", "--checkpoint", str(trained_run / "last"), "--beam", "0", "Hallo"]) == 2
    assert "--beam: expected an int >= 1 (1 is greedy), got 0" in capsys.readouterr().err


def test_the_checkpoint_records_the_resolved_precision_and_an_old_bf16_one_still_decodes(
    trained_run: Path, tmp_path: Path
) -> None:
    import json
    import shutil

    from transformer_lab.hardware import resolve_precision

    saved = json.loads((trained_run / "last" / "config.json").read_text(encoding="utf-8"))
    # The preset says "auto"; the run wrote what it ran with.
    assert saved["train"]["precision"] == resolve_precision("auto", "cpu")
    # A checkpoint of the days when the presets said bf16 loads and decodes as it did.
    old = tmp_path / "old"
    shutil.copytree(trained_run / "last", old)
    saved["train"]["precision"] = saved["decode"]["precision"] = "bf16"
    (old / "config.json").write_text(json.dumps(saved), encoding="utf-8")
    model, tokenizer, config = translation_train.load_translator(old)
    assert config.decode.precision == "bf16"
    greedy = dataclasses.replace(config.decode, strategy="greedy", max_len=5)
    [output] = translate_sentences(model, tokenizer, ["Ein Hund."], greedy)
    assert isinstance(output, str) and output


def test_the_multi30k_files_given_by_path_as_tsv_and_as_json_lines_give_the_same_batches(tmp_path: Path) -> None:
    import json

    from transformer_lab.data import load_multi30k

    folder = DATA_DIR / "multi30k"
    # The first 300 training pairs (what num_train reads): a TSV cannot hold a sentence
    # with a tab in it, and train.de line 7366 has one (the reader refuses that line).
    train, valid = load_multi30k("train", DATA_DIR)[:300], load_multi30k("val", DATA_DIR)
    (tmp_path / "train.tsv").write_text("".join(f"{de}\t{en}\n" for de, en in train), encoding="utf-8")
    (tmp_path / "valid.jsonl").write_text(
        "".join(json.dumps({"translation": {"de": de, "en": en}}, ensure_ascii=False) + "\n" for de, en in valid),
        encoding="utf-8",
    )
    (tmp_path / "train.jsonl").write_text(
        "".join(json.dumps({"de": de, "en": en}, ensure_ascii=False) + "\n" for de, en in train), encoding="utf-8"
    )
    small = dict(num_train=300, num_validation=50, vocab_size=400, max_tokens=1024)
    default = translation_data.TranslationDataConfig(data_dir=str(DATA_DIR), **small)
    forms = {
        "line files": dict(
            train_files=(str(folder / "train.de"), str(folder / "train.en")),
            valid_files=(str(folder / "val.de"), str(folder / "val.en")),
        ),
        "tsv": dict(train_files=(str(tmp_path / "train.tsv"),), valid_files=(str(tmp_path / "valid.jsonl"),)),
        "json lines": dict(train_files=(str(tmp_path / "train.jsonl"),), valid_files=(str(tmp_path / "valid.jsonl"),)),
    }
    expected = translation_data.build_data(default)
    expected_batches = translation_data.epoch_batches(expected, default, epoch=1)
    for name, files in forms.items():
        config = dataclasses.replace(default, data_dir=None, **files)
        data = translation_data.build_data(config)
        assert data.validation_pairs == expected.validation_pairs, name
        assert data.train_store.rows("source", range(len(data.train_store))) == [
            source for source, _ in expected.vocabulary.encode_pairs(expected.train_pairs or [])
        ], name
        assert len(data.train_store) == len(expected.train_store), name
        assert data.vocabulary.files() == expected.vocabulary.files(), name
        batches = translation_data.epoch_batches(data, config, epoch=1)
        assert len(batches) == len(expected_batches), name
        for ours, theirs in zip(batches, expected_batches):
            assert torch.equal(ours.src_ids, theirs.src_ids) and torch.equal(ours.tgt_in_ids, theirs.tgt_in_ids), name


def _front_matter(folder: Path) -> dict:
    text = (folder / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def test_every_checkpoint_has_a_model_card_and_evaluate_adds_its_scores(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [json.loads(line) for line in (trained_run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    evaluations = [row for row in rows if row["event"] == "eval"]
    best_row = max(evaluations, key=lambda row: row["val_bleu"])  # best_metric val_bleu, max
    for folder, row in (("last", evaluations[-1]), ("best", best_row)):
        front = _front_matter(trained_run / folder)
        facts = front["transformer_lab"]
        model, _, _ = translation_train.load_translator(trained_run / folder)
        assert front["language"] == ["de", "en"] and front["pipeline_tag"] == "translation"
        assert facts["data"]["dataset"] == "multi30k"
        assert facts["data"]["counts"] == {"training pairs": 200, "validation pairs": 20}
        assert facts["model"]["parameters"] == sum(parameter.numel() for parameter in model.parameters())
        assert (facts["model"]["d_model"], facts["model"]["num_encoder_layers"]) == (32, 1)
        assert facts["training"]["steps"] == row["step"] and facts["training"]["machine"] == cpu_model_name()
        assert facts["training"]["seconds"] > 0
        metrics = {name: value for name, value in row.items() if name.startswith("val_")}
        assert facts["validation"] == {"step": row["step"], "metrics": metrics}
        (result,) = front["model-index"][0]["results"]
        assert result["dataset"]["split"] == "validation"
        assert {entry["name"]: entry["value"] for entry in result["metrics"]} == pytest.approx(metrics, abs=1e-4)
        assert "- training pairs: 200\n" in (trained_run / folder / "README.md").read_text(encoding="utf-8")

    # evaluate on five validation lines: the scores join best/'s card, once however often it runs.
    source, reference = tmp_path / "five.de", tmp_path / "five.en"
    pairs = load_multi30k("val", DATA_DIR)[:5]
    source.write_text("".join(de + "\n" for de, _ in pairs), encoding="utf-8")
    reference.write_text("".join(en + "\n" for _, en in pairs), encoding="utf-8")
    # fp32 named: "auto" is bf16 on a CPU with bf16 instructions, and the card's search says so ("greedy bf16").
    command = ["evaluate", "translation", "--checkpoint", str(trained_run / "best"), "--beam", "1", "--precision"]
    command += ["fp32", "--source", str(source), "--reference", str(reference), "--output", str(tmp_path / "hyp.txt")]
    for _ in range(2):
        assert main(command) == 0
    printed = capsys.readouterr().out
    bleu = float(printed.split("BLEU (cased)")[-1].split()[0])
    front = _front_matter(trained_run / "best")
    tests = front["transformer_lab"]["test"]
    row = file_test_name(source)  # the file's name and a digest of its place: a file named like a split keeps apart
    assert [(test["split"], test["search"]) for test in tests] == [(row, "greedy")]
    assert round(tests[0]["metrics"]["bleu"], 2) == bleu
    datasets = [result["dataset"] for result in front["model-index"][0]["results"]]
    assert [dataset["split"] for dataset in datasets] == ["validation", row]
    # The validation split is Multi30k's; the file is the user's, named as such (was: Multi30k too).
    assert [dataset["name"] for dataset in datasets] == ["multi30k", "five.de"]
    assert tests[0]["dataset"] == "five.de"
    assert f"| {row} | greedy | bleu | {bleu:.2f} |" in (trained_run / "best" / "README.md").read_text("utf-8")
    # last/ shared the card's file with best/ by hard link where both were saved at once; it keeps its own.
    assert _front_matter(trained_run / "last")["transformer_lab"]["test"] == []


def test_int8_validation_off_the_cpu_is_refused_before_training(tmp_path: Path) -> None:
    config = apply_overrides(
        translation_train.default_config(),
        [
            f"data.data_dir={DATA_DIR}",
            "data.num_train=50",
            "data.num_validation=10",
            "data.vocab_size=300",
            "model.d_model=32",
            "model.nhead=2",
            "model.dim_feedforward=64",
            "train.device=cuda",
            "decode.precision=int8",
        ],
    )
    with pytest.raises(ValueError, match=r"decode\.precision: .*train\.device 'cuda'.*got 'int8'"):
        translation_train.train(config, tmp_path / "run")
    assert not (tmp_path / "run" / "last").exists()
