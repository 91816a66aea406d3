"""The couplet task end to end on a small made-up corpus: train (through the CLI), reload,
generate, evaluate, and the commands on bad input."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import re
import shutil
from pathlib import Path

import pytest

from tests.tasks import couplet_whole_read
from tests.tasks.couplet_fixture import TINY, made_up_couplets, write_couplet_folder, write_split
from tests.tasks.couplet_whole_read import with_reversed_pairs
from transformer_lab.cli import main
from transformer_lab.data.couplet import resolve_couplet_split_dir
from transformer_lab.decoding.couplet_constraints import CoupletConstraintConfig
from transformer_lab.decoding.sources import Candidate
from transformer_lab.evaluation import couplet_antithesis
from transformer_lab.evaluation.couplet_antithesis import antithesis_bonus
from transformer_lab.tasks.couplet import data as couplet_data
from transformer_lab.tasks.couplet import predict as couplet_predict
from transformer_lab.tasks.couplet import train as couplet_train
from transformer_lab.training.model_card import read_card


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_couplet_folder(tmp_path_factory.mktemp("couplet-data"))


@pytest.fixture(scope="module")
def run_dir(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("couplet-run") / "run"
    assert main(["train", "couplet", "--data-dir", str(data_dir), "--out", str(out), *TINY]) == 0
    return out


@pytest.mark.convergence
def test_training_lowers_the_loss(run_dir: Path) -> None:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    losses = [row["train_loss"] for row in rows if row["event"] == "train"]
    assert len(losses) >= 4
    assert losses[-1] < 0.8 * losses[0], losses
    evaluations = [row for row in rows if row["event"] == "eval"]
    assert evaluations and "val_bleu" in evaluations[-1]


def test_checkpoint_reloads_and_gives_scored_candidates_of_the_right_form(run_dir: Path) -> None:
    model, vocabulary, config = couplet_train.load(run_dir / "last")
    assert config.model.tie_embeddings == "all"
    assert model.src_embedding.embedding.weight is model.generator.weight
    results = couplet_predict.generate(
        model, vocabulary, ["春风，花月", "山 水"], config.decode, config.constraints, num_candidates=3
    )
    assert [result.upper for result in results] == ["春风，花月", "山水"]
    for result in results:
        assert result.error is None and len(result.candidates) == 3
        scores = [candidate.score for candidate in result.candidates]
        assert scores == sorted(scores, reverse=True)
        for candidate in result.candidates:
            assert len(candidate.text) == len(result.upper)
            assert [mark == "，" for mark in result.upper] == [character == "，" for character in candidate.text]
            assert not set(candidate.text) & set(result.upper.replace("，", ""))


def test_couplet_command_answers_good_lines_and_explains_bad_ones(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    given = ["春风花", "", "abc春", "龘春", "   ", "hi 春", "春风\t秋雨"]
    code = main(["couplet", "--checkpoint", str(run_dir / "best"), *given])
    captured = capsys.readouterr()
    assert code == 2
    lines = captured.out.splitlines()
    assert len(lines) == 7  # aligned with the input: refused lines are empty
    assert len(lines[0]) == 3 and lines[1] == lines[2] == lines[4] == lines[5] == lines[6] == "" and len(lines[3]) == 2
    # A pairs file's line (was: both sides read as one upper line, answered by a line twice as long).
    assert "input 7: upper line '春风\\t秋雨' holds a tab: expected one upper line" in captured.err
    assert "input 2: empty upper line" in captured.err
    assert "input 3: upper line 'abc春' contains Latin letters 'abc'" in captured.err
    # Quoted as typed (was: 'hi春', a line the user never wrote).
    assert "input 6: upper line 'hi 春' contains Latin letters 'hi'" in captured.err
    assert "input 4: characters never seen in training, read as <unk>: 龘" in captured.err
    assert "Traceback" not in captured.err


def test_couplet_command_reads_stdin_and_files_and_shows_candidates(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO("春风\n花月山\n".encode("utf-8")), encoding="utf-8"))
    assert main(["couplet", "--checkpoint", str(run_dir / "best"), "--beam", "1"]) == 0
    assert [len(line) for line in capsys.readouterr().out.splitlines()] == [2, 3]
    source, target = tmp_path / "uppers.txt", tmp_path / "lowers.txt"
    source.write_text("春风\n江河水\n", encoding="utf-8")
    assert (
        main(["couplet", "--checkpoint", str(run_dir / "best"), "--input", str(source), "--output", str(target)]) == 0
    )
    assert [len(line) for line in target.read_text(encoding="utf-8").splitlines()] == [2, 3]
    assert main(["couplet", "--checkpoint", str(run_dir / "best"), "--num-candidates", "3", "江河"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert (
        shown[0] == "江河"
        and len(shown) == 4
        and all(line.startswith(f"  {rank}. ") for rank, line in zip((1, 2, 3), shown[1:]))
    )
    assert main(["couplet", "--checkpoint", str(run_dir / "best"), "--beam", "1", "--num-candidates", "2", "江河"]) == 2
    assert "--num-candidates: expected --beam of at least 2, got --beam 1" in capsys.readouterr().err


def test_evaluate_couplet_prints_every_metric_and_writes_samples(
    run_dir: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["evaluate", "couplet", "--checkpoint", str(run_dir / "best"), "--data-dir", str(data_dir), "--beam", "1"])
        == 0
    )
    out = capsys.readouterr().out
    assert "character BLEU-4" in out and "tok:zh" in out
    for name in (
        "length match",
        "punctuation match",
        "level tone ending",
        "repetition mirrored",
        "no repetition where none",
        "distinct-1",
        "distinct-2",
    ):
        assert name in out
    assert "100.0 % (30/30)" in out.split("length match")[1].splitlines()[0]
    assert "\n20 samples (upper | ours | reference):\n" in out  # NUM_SAMPLES of the 30
    for name in ("tone opposition", "part of speech agreement", "rhythm agreement", "unreused characters"):
        row = out.split(f"\n{name}")[1].splitlines()[0]
        assert row.count("(mean of 30)") == 2, row  # ours and the references
    # "greedy", or "greedybf16" where the preset's precision auto resolves to bf16 (a CPU with AMX).
    (samples_path,) = (run_dir / "best").glob("samples.test.greedy*.md")
    assert samples_path.name in ("samples.test.greedy.md", "samples.test.greedybf16.md")
    samples = samples_path.read_text(encoding="utf-8").splitlines()
    assert len(samples) == 2 + 20
    assert samples[0].count("tone / POS / rhythm") == 2
    first_scores = samples[2].split(" | ")[2].split(" / ")
    assert len(first_scores) == 3 and all(value == "-" or 0 <= float(value) <= 1 for value in first_scores)


def test_a_split_of_fewer_pairs_than_the_samples_shown_is_counted_as_it_is(
    couplet_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The checkpoint's test split holds 5 pairs (was: "20 samples" above the 5 rows).
    arguments = ["evaluate", "couplet", "--checkpoint", str(couplet_checkpoint), "--beam", "1"]
    assert main([*arguments, "--output", str(tmp_path / "hypotheses.txt")]) == 0
    after = capsys.readouterr().out.split("\n5 samples (upper | ours | reference):\n")[1].splitlines()
    assert [line.startswith("  ") for line in after[:6]] == [True] * 5 + [False]


def test_evaluate_without_split_scores_the_runs_own_test_split(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # data.test_split was recorded and read by nothing: evaluate scored "test" whatever it said.
    root = write_couplet_folder(tmp_path / "data", num_train=2, num_test=2)
    write_split(root / "couplet" / "test2016", made_up_couplets(7, seed=3))
    checkpoint = tmp_path / "best"
    shutil.copytree(run_dir / "best", checkpoint)
    config = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    config["data"]["test_split"] = "test2016"
    (checkpoint / "config.json").write_text(json.dumps(config), encoding="utf-8")
    common = ["evaluate", "couplet", "--checkpoint", str(checkpoint), "--data-dir", str(root), "--beam", "1"]
    assert main(common) == 0
    assert capsys.readouterr().out.startswith("couplet test2016, 7 pairs,")
    assert main([*common, "--split", "test"]) == 0
    assert capsys.readouterr().out.startswith("couplet test, 2 pairs,")
    assert main(["train", "couplet", "--out", str(tmp_path / "run"), "--set", "data.test_split=a/b"]) == 2
    assert "data.test_split: expected a folder name such as" in capsys.readouterr().err


def test_a_split_read_from_the_folder_the_model_trained_on_is_refused(
    run_dir: Path, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A run whose data folder is its training split's own folder (in.txt, out.txt): every split name resolved
    # to it, so "test" scored the training pairs (was: exit 0, a test row in the card).
    config = json.loads((run_dir / "best" / "config.json").read_text(encoding="utf-8"))
    trained = resolve_couplet_split_dir(config["data"]["train_split"], data_dir)
    checkpoint = tmp_path / "best"
    shutil.copytree(run_dir / "best", checkpoint)
    config["data"]["data_dir"] = str(trained)
    (checkpoint / "config.json").write_text(json.dumps(config), encoding="utf-8")
    for split in ([], ["--split", "anything"]):
        assert main(["evaluate", "couplet", "--checkpoint", str(checkpoint), "--beam", "1", *split]) == 2
        assert f"expected pairs the model did not train on, got {trained}, the folder it trained on" in (
            capsys.readouterr().err
        )
    # Another folder given for the split is scored.
    arguments = ["evaluate", "couplet", "--checkpoint", str(checkpoint), "--beam", "1", "--data-dir", str(data_dir)]
    assert main(arguments) == 0


def test_rules_other_than_the_checkpoints_get_their_own_files_and_card_row(
    run_dir: Path, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: the default rules' hypotheses, samples and card row replaced by those of --tone-opposition-penalty 4.
    checkpoint = shutil.copytree(run_dir / "best", tmp_path / "best")
    common = ["evaluate", "couplet", "--checkpoint", str(checkpoint), "--data-dir", str(data_dir), "--beam", "2"]
    assert main(common) == 0
    assert main([*common, "--tone-opposition-penalty", "4"]) == 0
    ruled = capsys.readouterr().out.split("couplet test, ")[-1].split(",")[1].strip()
    assert re.fullmatch(r"beam 2( bf16)? rules [0-9a-f]{6}", ruled), ruled
    assert (
        len(list(checkpoint.glob("hypotheses.test.beam2*.txt")))
        == len(list(checkpoint.glob("samples.test.beam2*")))
        == 2
    )
    assert {test["search"] for test in read_card(checkpoint)["test"]} >= {ruled.split(" rules")[0], ruled}


def test_evaluations_with_their_own_output_keep_their_own_samples(
    run_dir: Path, data_dir: Path, tmp_path: Path
) -> None:
    # Same split and search, different options, one folder: neither table overwrites the other.
    common = ["evaluate", "couplet", "--checkpoint", str(run_dir / "best"), "--data-dir", str(data_dir), "--beam", "1"]
    assert main([*common, "--output", str(tmp_path / "plain.txt"), "--tone-opposition-penalty", "0"]) == 0
    assert main([*common, "--output", str(tmp_path / "tones.txt"), "--tone-opposition-penalty", "4"]) == 0
    for name in ("plain", "tones"):
        hypotheses = (tmp_path / f"{name}.txt").read_text(encoding="utf-8").splitlines()
        rows = (tmp_path / f"{name}.samples.md").read_text(encoding="utf-8").splitlines()[2:]
        assert [row.split(" | ")[1] for row in rows] == hypotheses[: len(rows)]
    assert not list(tmp_path.glob("samples.*"))


def test_evaluate_on_validation_scores_the_pairs_the_run_held_out(
    run_dir: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, config = couplet_train.load(run_dir / "best")
    held_out = couplet_whole_read.read_corpus(dataclasses.replace(config.data, data_dir=str(data_dir))).validation_pairs
    assert couplet_data.load_validation_pairs(config.data, str(data_dir)) == held_out
    hypotheses = run_dir / "validation-hypotheses.txt"
    assert (
        main(
            [
                "evaluate",
                "couplet",
                "--checkpoint",
                str(run_dir / "best"),
                "--data-dir",
                str(data_dir),
                "--split",
                "validation",
                "--beam",
                "2",
                "--length-penalty",
                "0.5",
                "--output",
                str(hypotheses),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"couplet validation, {len(held_out)} pairs, beam 2" in out
    lines = hypotheses.read_text(encoding="utf-8").splitlines()
    assert [len(line) for line in lines] == [len(upper) for upper, _ in held_out]


def test_reversed_pairs_double_the_training_pairs_but_not_validation(data_dir: Path) -> None:
    forward_config = couplet_data.CoupletDataConfig(data_dir=str(data_dir), num_validation=4)
    forward = couplet_whole_read.read_corpus(forward_config)
    both = couplet_whole_read.read_corpus(dataclasses.replace(forward_config, add_reversed_pairs=True))
    assert both.validation_pairs == forward.validation_pairs
    # The filtering itself is tested in tests/data; here, that build_data applies it.
    expected_pairs, expected_dropped = with_reversed_pairs(forward.train_pairs, forward.validation_pairs)
    assert both.train_pairs == expected_pairs
    assert len(both.train_pairs) == 2 * len(forward.train_pairs) - expected_dropped
    assert both.report["reversed_dropped_as_validation_duplicates"] == expected_dropped
    assert len(both.train_store) == len(both.train_pairs)
    assert "reversed_dropped_as_validation_duplicates" not in forward.report


def test_train_couplet_reports_a_missing_data_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "couplet", "--data-dir", str(tmp_path), "--out", str(tmp_path / "run"), *TINY]) == 2
    assert "couplet split 'train_couplet_machine'" in capsys.readouterr().err


def test_evaluate_takes_the_rule_options_for_couplets_only(
    run_dir: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = [
        "evaluate",
        "couplet",
        "--checkpoint",
        str(run_dir / "best"),
        "--data-dir",
        str(data_dir),
        "--beam",
        "1",
    ]
    assert main([*arguments, "--tone-opposition-penalty", "1.5", "--allow-upper-characters"]) == 0
    out = capsys.readouterr().out
    assert "tone_opposition_penalty=1.5" in out and "avoid_source_characters=False" in out
    assert (
        main(["evaluate", "translation", "--checkpoint", str(run_dir / "best"), "--tone-opposition-penalty", "1"]) == 2
    )
    assert (
        "--tone-opposition-penalty: expected only with the couplet task, got it with translation"
        in capsys.readouterr().err
    )
    # Past float32's range a penalty made every hypothesis -inf: empty lines, or an IndexError traceback.
    for flag in ("--oblique-final-penalty", "--tone-opposition-penalty", "--rhythm-rerank"):
        for command in (arguments, ["couplet", "--checkpoint", str(run_dir / "best"), "春风"]):
            assert main([*command, flag, "1e100"]) == 2
            assert f"{flag}: expected a float in [0, 100] (nats), got 1e+100" in capsys.readouterr().err


def test_rerank_by_antithesis_adds_nats_per_unit_of_agreement(monkeypatch: pytest.MonkeyPatch) -> None:
    # Agreements fixed by hand (jieba aside): the second candidate agrees in rhythm, the third in parts of speech.
    rhythm = {"甲": 0.0, "乙": 1.0, "丙": 0.0}
    part_of_speech = {"甲": 0.0, "乙": 0.0, "丙": 0.5}
    monkeypatch.setattr(couplet_antithesis, "rhythm_agreement", lambda upper, lower: rhythm[lower])
    monkeypatch.setattr(couplet_antithesis, "part_of_speech_agreement", lambda upper, lower: part_of_speech[lower])
    candidates = [
        Candidate(text, [index], score, score)
        for index, (text, score) in enumerate([("甲", -1.0), ("乙", -1.5), ("丙", -1.6)])
    ]

    def order(**weights: float) -> list[str]:
        config = CoupletConstraintConfig(**weights)
        return [candidate.text for candidate in couplet_antithesis.rerank_by_antithesis("上", candidates, config)]

    assert order() == ["甲", "乙", "丙"]  # no weight: the search's order
    assert order(rhythm_rerank=0.4) == ["甲", "乙", "丙"]  # -1.5 + 0.4 = -1.1 < -1.0
    assert order(rhythm_rerank=0.6) == ["乙", "甲", "丙"]  # -0.9 > -1.0
    assert order(part_of_speech_rerank=2.0) == ["丙", "甲", "乙"]  # -1.6 + 1.0 = -0.6
    assert [
        candidate.score
        for candidate in couplet_antithesis.rerank_by_antithesis(
            "上", candidates, CoupletConstraintConfig(rhythm_rerank=1.0)
        )
    ] == [-1.5, -1.0, -1.6]
    for name, value in (
        ("rhythm_rerank", -1.0),
        ("oblique_final_penalty", 1e100),
        ("tone_opposition_penalty", math.nan),
    ):
        with pytest.raises(ValueError, match=rf"^{name}: expected a float in \[0, 100\] \(nats\), got "):
            CoupletConstraintConfig(**{name: value})


def test_reranking_keeps_the_form_and_leaves_greedy_search_alone(run_dir: Path) -> None:
    model, vocabulary, config = couplet_train.load(run_dir / "last")
    constraints = dataclasses.replace(config.constraints, part_of_speech_rerank=1.0, rhythm_rerank=1.0)
    beam = dataclasses.replace(config.decode, strategy="beam", beam_size=4)
    results = couplet_predict.generate(model, vocabulary, ["春风，花月"], beam, constraints, num_candidates=2)
    assert len(results[0].candidates) == 2  # chosen among all 4 beams, 2 kept
    for candidate in results[0].candidates:
        assert len(candidate.text) == len("春风，花月") and candidate.text[2] == "，"
    greedy = dataclasses.replace(beam, strategy="greedy")
    alone = couplet_predict.generate(model, vocabulary, ["春风"], greedy, config.constraints)
    assert (
        couplet_predict.generate(model, vocabulary, ["春风"], greedy, constraints) == alone
    )  # one candidate: nothing to re-rank


def test_extra_training_splits_join_training_and_leave_validation_alone(data_dir: Path, tmp_path: Path) -> None:
    config = dataclasses.replace(couplet_train.default_config().data, data_dir=str(data_dir), num_validation=10)
    plain = couplet_whole_read.read_corpus(config)
    validation_uppers = {upper.replace("，", "") for upper, _ in plain.validation_pairs}  # punctuation aside
    # An extra split: 20 new pairs, and two whose upper line is a validation upper line.
    extra = made_up_couplets(20, seed=7) + [(upper, lower[::-1]) for upper, lower in plain.validation_pairs[:2]]
    root = tmp_path / "data"
    shutil.copytree(data_dir, root)
    write_split(root / "couplet" / "more", extra)
    widened = couplet_whole_read.read_corpus(
        dataclasses.replace(config, data_dir=str(root), extra_train_splits=("more",))
    )
    kept = [pair for pair in extra if pair[0].replace("，", "") not in validation_uppers]
    assert widened.validation_pairs == plain.validation_pairs
    assert widened.train_pairs == plain.train_pairs + kept
    assert widened.report["extra_train_pairs"] == len(kept)
    assert widened.report["extra_dropped_as_validation_duplicates"] == len(extra) - len(kept) >= 2


def test_the_python_couplet_writer_gives_what_the_command_line_prints(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformer_lab import CoupletWriter

    uppers = ["春风花", "", "abc春", "花月山"]
    capsys.readouterr()
    assert main(["couplet", "--checkpoint", str(run_dir / "best"), *uppers]) == 2  # two lines refused
    printed = capsys.readouterr().out.splitlines()
    writer = CoupletWriter(run_dir / "best")
    results = writer.write(uppers)
    assert [result.candidates[0].text if result.candidates else "" for result in results] == printed
    assert [result.error is not None for result in results] == [False, True, True, False]
    assert writer.write("春风花").candidates[0].text == printed[0]
    three = writer.write("花月山", beam=4, num_candidates=3)
    arguments = ["couplet", "--checkpoint", str(run_dir / "best"), "--beam", "4", "--num-candidates", "3", "花月山"]
    assert main(arguments) == 0
    shown = capsys.readouterr().out.splitlines()[1:]
    listed = [line.split(". ", 1)[1].rsplit("  (", 1)[0] for line in shown]
    assert [candidate.text for candidate in three.candidates] == listed and len(listed) == 3
    # The scores shown are those that ranked the lines: the search's plus the rerank's nats (was: the search's
    # alone, which could rise down the list).
    scores = [float(line.rsplit("  (", 1)[1].rstrip(")")) for line in shown]
    constraints = writer.config.constraints
    assert constraints.reranks
    ranked = [c.score + antithesis_bonus("花月山", c.text, constraints) for c in three.candidates]
    assert scores == pytest.approx(ranked, abs=0.006) and scores == sorted(scores, reverse=True)


def test_the_couplet_attention_map_reads_the_written_line_over_the_upper_line(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformer_lab.api import CoupletWriter

    writer = CoupletWriter(run_dir)
    attention = writer.attention_map("江河水", beam=1, precision="fp32")  # bf16 sums to 1 only within 1e-2
    written = writer.write("江河水", beam=1, precision="fp32").candidates[0]
    # One row per token the model was fed (<bos>, then what it wrote), one column per upper character;
    # each row is a softmax over the upper line (averaged over heads), so it sums to 1.
    assert attention.columns == ["江", "河", "水"]
    assert attention.rows == ["<bos>", *(writer.vocabulary.tokens[token_id] for token_id in written.ids)]
    assert tuple(attention.weights.shape) == (len(written.ids) + 1, 3)
    assert attention.weights.sum(dim=-1).tolist() == pytest.approx([1.0] * (len(written.ids) + 1), abs=1e-5)
    with pytest.raises(ValueError, match="upper: upper line 'abc' contains Latin letters"):
        writer.attention_map("abc")

    pytest.importorskip("matplotlib", reason='matplotlib is not installed (pip install -e ".[plots]")')
    figure = tmp_path / "couplet-attention.png"
    assert (
        main(["couplet", "--checkpoint", str(run_dir), "--beam", "1", "--plot-attention", str(figure), "江河水"]) == 0
    )
    assert figure.read_bytes().startswith(b"\x89PNG")
    assert capsys.readouterr().err.endswith(f"attention heat map: {figure}\n")
    # plot attention without a line names the couplet command's own way to draw one.
    assert main(["plot", "attention", "--checkpoint", str(run_dir), "--out", str(tmp_path / "no-line.png")]) == 2
    assert capsys.readouterr().err == (
        "transformer-lab plot: error: --source: a couplet checkpoint reads text: expected a sentence to draw "
        "(or transformer-lab couplet --plot-attention), got none\n"
    )


@pytest.mark.parametrize("given", ["argument", "--input"])
def test_a_refused_first_line_to_draw_is_named_as_the_user_gave_it_not_by_the_apis_keyword(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str
) -> None:
    pytest.importorskip("matplotlib", reason='matplotlib is not installed (pip install -e ".[plots]")')
    figure, lines = tmp_path / "a.png", tmp_path / "lines.txt"
    lines.write_text("abc\n江河水\n", encoding="utf-8")
    inputs = ["abc", "江河水"] if given == "argument" else ["--input", str(lines)]
    capsys.readouterr()
    assert main(["couplet", "--checkpoint", str(run_dir), "--beam", "1", "--plot-attention", str(figure), *inputs]) == 2
    named = "input 1" if given == "argument" else f"{lines}: line 1"
    # The second line is answered; the figure of the first, which the command refused, is refused naming it
    # (was: "upper: upper line 'abc' ...", the keyword of CoupletWriter.attention_map).
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"transformer-lab couplet: error: --plot-attention: {named}: upper line 'abc' contains Latin letters 'abc': "
        "expected a line of Chinese characters"
    )
    assert not figure.exists()
