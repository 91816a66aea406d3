"""The commands and the Python API give the same outputs: ``translate``, ``classify`` and ``couplet`` are
`Translator`, `Classifier` and `CoupletWriter` behind a command line.

Each test runs a command on a tiny checkpoint (``tests/reliability/builders.py``) and the
API object on the same checkpoint with the same settings, then compares every output line.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import pickle
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
import torch
from matplotlib import image

from transformer_lab import hardware
from transformer_lab.api import Classifier, CoupletWriter, SettingError, Translator, decode_settings
from transformer_lab.cli import main, predict_command
from transformer_lab.decoding import config as decoding_config
from transformer_lab.decoding import search_settings
from transformer_lab.evaluation.couplet_antithesis import antithesis_bonus
from transformer_lab.lab import plotting

SENTENCES = ["Ein Mann fährt Fahrrad.", "", "Zwei Hunde spielen im Schnee.", "Eine Frau."]

# The same settings as options and as keyword arguments.
SETTINGS: list[tuple[list[str], dict[str, Any]]] = [
    ([], {}),
    (["--beam", "1"], {"beam": 1}),
    (
        ["--beam", "3", "--length-penalty", "0.5", "--beam-stop", "finished"],
        {"beam": 3, "length_penalty": 0.5, "beam_stop": "finished"},
    ),
    (["--precision", "int8"], {"precision": "int8"}),
    (["--precision", "bf16", "--beam", "2"], {"precision": "bf16", "beam": 2}),
]


def _stdout(arguments: list[str], capsys: pytest.CaptureFixture[str], code: int = 0) -> list[str]:
    capsys.readouterr()
    assert main(arguments) == code
    return capsys.readouterr().out.splitlines()


def test_a_table_given_to_classify_is_read_as_text_lines_and_said_to_be(
    classification_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog
) -> None:
    table = tmp_path / "labelled.csv"
    table.write_text("text,label\nshares profit merger,business\n", encoding="utf-8")
    with caplog.at_level("WARNING"):
        printed = _stdout(["classify", "--checkpoint", str(classification_checkpoint), "--input", str(table)], capsys)
    # Both lines answered as texts, the header too, as the option says; now said (was: without a word).
    assert len(printed) == 2
    assert f"--input {table}: read as plain text, each line one input to classify whole" in caplog.text
    plain = tmp_path / "texts.txt"
    plain.write_text("shares profit merger\n", encoding="utf-8")
    caplog.clear()
    with caplog.at_level("WARNING"):
        _stdout(["classify", "--checkpoint", str(classification_checkpoint), "--input", str(plain)], capsys)
    assert "read as plain text" not in caplog.text


@pytest.mark.parametrize(("options", "keywords"), SETTINGS)
def test_translate_prints_the_translators_translations(
    translation_checkpoint: Path, options: list[str], keywords: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    printed = _stdout(["translate", "--checkpoint", str(translation_checkpoint), *options, *SENTENCES], capsys)
    translations = Translator(translation_checkpoint).translate(SENTENCES, **keywords)
    assert printed == translations and len(printed) == len(SENTENCES) and printed[1] == ""


@pytest.mark.parametrize(("options", "keywords"), SETTINGS[2:] + [(["--beam", "4"], {"beam": 4})])
def test_nbest_lines_are_the_translators_candidates(
    translation_checkpoint: Path, options: list[str], keywords: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    command = ["translate", "--checkpoint", str(translation_checkpoint), "--nbest", "2", *options, *SENTENCES]
    printed = _stdout(command, capsys)
    found = Translator(translation_checkpoint).candidates(SENTENCES, nbest=2, **keywords)
    expected = [
        f"{number}\t{rank}\t{candidate.score:.4f}\t{candidate.text}"
        for number, candidates in enumerate(found, start=1)
        for rank, candidate in enumerate(candidates, start=1)
    ]
    assert printed == expected
    assert [len(candidates) for candidates in found] == [2, 0, 2, 2]  # the blank sentence: no line, its number skipped
    assert {line.split("\t")[0] for line in printed} == {"1", "3", "4"}


def test_one_best_candidate_carries_the_translation_and_its_score(
    translation_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    translator = Translator(translation_checkpoint)
    for beam in (1, 2):  # greedy search too gives its one candidate with a score
        (best,) = translator.candidates(SENTENCES[0], beam=beam)
        assert best.text == translator.translate(SENTENCES[0], beam=beam)
        assert best.text == translator.tokenizers.target.decode(best.ids)
        assert best.score <= 0.0 and best.log_prob <= 0.0
        options = ["--nbest", "1", "--beam", str(beam)]
        printed = _stdout(["translate", "--checkpoint", str(translation_checkpoint), *options, SENTENCES[0]], capsys)
        assert printed == [f"1\t1\t{best.score:.4f}\t{best.text}"]


def test_best_is_translates_search_and_refuses_a_keyword_it_does_not_take(translation_checkpoint: Path) -> None:
    translator = Translator(translation_checkpoint)
    for beam in (1, 2):
        best = translator.best(SENTENCES[0], beam=beam)  # one sentence: one answer, as translate gives
        assert best is not None and best.text == translator.translate(SENTENCES[0], beam=beam)
        assert [candidate and candidate.text for candidate in translator.best([SENTENCES[0], ""], beam=beam)] == [
            best.text,
            None,
        ]
    # Was the checkpoint's search without a word: a misspelt keyword, or one of candidates' (nbest, warn).
    for keyword in ("beem", "nbest", "warn", "beam_size"):
        with pytest.raises(TypeError, match=rf"unexpected keyword argument '{keyword}'"):
            translator.best([SENTENCES[0]], **{keyword: 5})


def test_a_warn_that_is_no_bool_and_an_ensemble_given_as_a_dict_are_refused(translation_checkpoint: Path) -> None:
    # Were taken: warn="no" as true, and a dict's keys as the ensemble's checkpoints.
    translator = Translator(translation_checkpoint)
    with pytest.raises(ValueError, match=r"^warn must be a bool, got 'no' \(str\)$"):
        translator.candidates(SENTENCES[0], warn="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^ensemble: expected a list of checkpoint paths, got dict "):
        Translator(translation_checkpoint, ensemble={str(translation_checkpoint): 1})  # type: ignore[arg-type]


def test_a_translate_call_resolves_its_precision_once(
    translation_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The model copy, the decoding config and every batch's search take the one result.
    resolve = hardware.resolve_inference_precision
    calls: list[tuple[Any, ...]] = []

    def counted(*arguments: Any, **keywords: Any) -> str:
        calls.append(arguments)
        return resolve(*arguments, **keywords)

    for module in (search_settings, decoding_config, hardware):
        monkeypatch.setattr(module, "resolve_inference_precision", counted)
    translator = Translator(translation_checkpoint)
    for precision in (None, "auto", "fp32", "bf16", "int8"):
        calls.clear()
        translator.translate(SENTENCES, precision=precision, batch_size=2)
        assert len(calls) == 1, precision
    assert translator.decode_config(precision="int8").precision == "int8"


def test_a_setting_error_names_the_option_on_the_command_line_and_the_keyword_in_python(
    translation_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    translator = Translator(translation_checkpoint)
    cases: list[tuple[list[str], dict[str, Any], str]] = [
        (
            ["--nbest", "3", "--beam", "2"],
            {"nbest": 3, "beam": 2},
            "{nbest} 3: expected {beam} of at least 3, got {beam} 2",
        ),
        # One form for every beam refused: a number below one as a float or a bool is.
        (["--beam", "0"], {"beam": 0}, "{beam}: expected an int >= 1 (1 is greedy), got 0"),
        (["--beam", "-1"], {"beam": -1}, "{beam}: expected an int >= 1 (1 is greedy), got -1"),
    ]
    for options, keywords, template in cases:
        capsys.readouterr()
        assert main(["translate", "--checkpoint", str(translation_checkpoint), *options, "Hallo"]) == 2
        message = template.format(nbest="--nbest", beam="--beam")
        assert capsys.readouterr() == ("", f"transformer-lab translate: error: {message}\n")
        with pytest.raises(SettingError) as raised:
            translator.candidates("Hallo", **keywords)
        assert str(raised.value) == template.format(nbest="nbest", beam="beam")
        assert raised.value.phrased(lambda setting: "--" + setting) == message
        copied = pickle.loads(pickle.dumps(raised.value))  # e.g. from a worker process
        assert (str(copied), copied.phrased(lambda setting: "--" + setting)) == (str(raised.value), message)
    # A stop rule the search lacks (argparse's choices refuse it on the command line): the keyword, once.
    with pytest.raises(SettingError) as raised:
        translator.translate("Hallo", beam_stop="3")
    assert str(raised.value) == "beam_stop: expected one of 'exact', 'finished', got '3'"
    assert raised.value.phrased(lambda setting: "--" + setting.replace("_", "-")).startswith("--beam-stop: expected ")


def test_plot_attention_draws_what_the_translator_draws(
    translation_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    figure = tmp_path / "command.png"
    options = ["--beam", "3", "--plot-attention", str(figure)]
    _stdout(["translate", "--checkpoint", str(translation_checkpoint), *options, *SENTENCES], capsys)
    drawn = Translator(translation_checkpoint).plot_attention(SENTENCES[0], tmp_path / "api.png", beam=3)
    assert drawn == tmp_path / "api.png"
    assert np.array_equal(image.imread(figure), image.imread(drawn))
    with pytest.raises(ValueError, match="expected a non-empty sentence to plot"):
        Translator(translation_checkpoint).plot_attention("  ", tmp_path / "blank.png")
    # A place the figure cannot go: one line names the option and the path, before any translation (was: the
    # translations printed, then the failure, exit 1).
    (tmp_path / "a-file").write_text("not a folder\n")
    unwritable = tmp_path / "a-file" / "figure.png"
    code = main(
        ["translate", "--checkpoint", str(translation_checkpoint), "--plot-attention", str(unwritable), "Hallo"]
    )
    printed = capsys.readouterr()
    assert code == 2 and printed.out == ""
    assert printed.err.count("\n") == 1
    assert printed.err.startswith(
        f"transformer-lab translate: error: --plot-attention: could not write {str(unwritable)!r} ("
    )
    # A refusal the library names already is said once (was: "could not write 'P' (could not write 'P' (...)"):
    # the write itself refused, as when the folder's permissions change after the command's early check.
    refusal = PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    early_checks = (
        mock.patch.object(predict_command, "check_file_output"),
        mock.patch.object(plotting, "check_file_output"),
    )
    with mock.patch("pathlib.Path.mkdir", side_effect=refusal), early_checks[0], early_checks[1]:
        refused = tmp_path / "figures" / "attention.png"
        arguments = ["--plot-attention", str(refused), "Hallo"]
        assert main(["translate", "--checkpoint", str(translation_checkpoint), *arguments]) == 1
    *notes, failure = capsys.readouterr().err.splitlines()
    assert failure == (
        f"transformer-lab translate: failed: --plot-attention: could not write {str(refused)!r} "
        "(Permission denied, EACCES); nothing was written"
    )
    assert all("length limit" in note for note in notes)  # the random weights' translation, said to be cut


def test_plot_attention_to_a_path_the_system_refuses_is_named_before_any_decoding(
    translation_checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Was: the sentence decoded, then "[Errno 17] File exists: '.../notes.txt'", naming no argument.
    translator = Translator(translation_checkpoint)
    monkeypatch.setattr(Translator, "attention_map", mock.Mock(side_effect=AssertionError("decoded")))
    notes = tmp_path / "notes.txt"
    notes.write_text("mine", encoding="utf-8")
    with pytest.raises(OSError, match=r"^path: could not write '.*notes\.txt/x\.png' \(Not a directory, ENOTDIR"):
        translator.plot_attention(SENTENCES[0], notes / "x.png")


@pytest.mark.parametrize(
    ("command", "options", "inputs"),
    [
        # The checkpoint's beam of 2 writes another first line than the 4 beams the list widens it to.
        ("translate", ["--nbest", "4"], ["Ein Mann", "Ein Fahrrad"]),
        ("couplet", ["--no-mirror-repetition"], ["春风", "河风山风", "山河月河春"]),
        ("couplet", ["--num-candidates", "5"], ["山河月河春", "河风山风"]),
    ],
)
def test_plot_attention_draws_the_answer_printed_first_under_the_options_search_and_rules(
    command: str,
    options: list[str],
    inputs: list[str],
    request: pytest.FixtureRequest,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    checkpoint = request.getfixturevalue("translation_checkpoint" if command == "translate" else "couplet_checkpoint")
    predictor = Translator(checkpoint) if command == "translate" else CoupletWriter(checkpoint)
    drawn: list[list[str]] = []

    def heat_map(weights: torch.Tensor, columns: list[str], rows: list[str], path: Path, title: str = "") -> Path:
        drawn.append(rows)
        return path

    differs = []
    for text in inputs:
        arguments = [command, "--checkpoint", str(checkpoint), "--precision", "fp32", *options, text]
        with mock.patch("transformer_lab.lab.figures.plot_attention_heatmap", heat_map):
            printed = _stdout([*arguments, "--plot-attention", str(tmp_path / "map.png")], capsys)
        # Rows are <bos>, then the tokens written: a couplet's characters, a translation's subword labels.
        rows = drawn.pop()[1:]
        if command == "couplet":
            first = printed[0] if len(printed) == 1 else printed[1].split()[1]
            assert "".join(rows) == first
        else:
            assert rows == predictor.attention_map(text, beam=4, precision="fp32").rows[1:]
        differs.append(rows != predictor.attention_map(text, precision="fp32").rows[1:])
    # The checkpoint's own search and rules write another answer for at least one input (was: drawn instead).
    assert any(differs)


def test_classify_prints_the_classifiers_predictions_and_refusals(
    classification_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = ["shares profit merger", "", "goal match league " * 60, "chip software phone"]
    classifier = Classifier(classification_checkpoint)
    for options, truncate in (([], False), (["--truncate"], True)):
        command = ["classify", "--checkpoint", str(classification_checkpoint), *options, *texts]
        printed = _stdout(command, capsys, code=2)  # the blank text is refused either way
        results = classifier.classify_each(texts, precision="auto", truncate=truncate)
        expected = [
            # The same reason, naming the option of the command rather than the Python argument.
            "-\t" + result.replace("(truncate=True)", "(--truncate)")
            if isinstance(result, str)
            else f"{result.label_name}\t"
            + " ".join(f"{name}={share:.4f}" for name, share in result.probabilities.items())
            for result in results
        ]
        assert printed == expected
        assert [isinstance(result, str) for result in results] == [False, True, not truncate, False]
        # A numpy bool (a mask's element, a flag from an array) is the bool it holds, as the nn modules take it.
        flagged = classifier.classify_each(texts, precision="auto", truncate=np.bool_(truncate))
        assert [isinstance(result, str) for result in flagged] == [False, True, not truncate, False]
    assert classifier.max_len == classifier.config.model.max_len
    with pytest.raises(ValueError, match=r"texts\[1\]: the text is empty"):
        classifier.classify(texts)


@pytest.mark.parametrize(
    ("options", "keywords", "rules"),
    [
        ([], {}, {}),
        (["--beam", "1"], {"beam": 1}, {"mirror_repetition": False}),
        (
            ["--num-candidates", "2", "--precision", "int8"],
            {"num_candidates": 2, "precision": "int8"},
            {"avoid_source_characters": False, "tone_opposition_penalty": 1.5},
        ),
    ],
)
def test_couplet_prints_the_writers_lower_lines_under_the_same_rules(
    couplet_checkpoint: Path,
    options: list[str],
    keywords: dict[str, Any],
    rules: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    uppers = ["春风花", "abc", "山水月"]
    flags = {
        "mirror_repetition": ["--no-mirror-repetition"],
        "avoid_source_characters": ["--allow-upper-characters"],
        "tone_opposition_penalty": ["--tone-opposition-penalty", "1.5"],
    }
    rule_options = [part for field in rules for part in flags[field]]
    command = ["couplet", "--checkpoint", str(couplet_checkpoint), *options, *rule_options, *uppers]
    printed = _stdout(command, capsys, code=2)  # the Latin line is refused
    writer = CoupletWriter(couplet_checkpoint)
    constraints = dataclasses.replace(writer.config.constraints, **rules)
    results = writer.write(uppers, constraints=constraints, **keywords)
    if keywords.get("num_candidates", 1) == 1:
        expected = [result.candidates[0].text if result.candidates else "" for result in results]
    else:
        expected = []
        for result in results:
            expected.append(result.upper)
            # The score that ranked each line: the search's plus the rerank's nats.
            ranked = [
                candidate.score + antithesis_bonus(result.upper, candidate.text, constraints)
                for candidate in result.candidates
            ]
            expected.extend(
                f"  {rank}. {candidate.text}  ({score:.2f})"
                for rank, (candidate, score) in enumerate(zip(result.candidates, ranked), 1)
            )
    assert printed == expected
    assert [result.error is not None for result in results] == [False, True, False]


def test_too_few_beams_for_the_couplet_candidates_is_said_in_each_callers_words(
    couplet_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The API names its keywords, the command its options: the same check, each in its caller's words."""
    with pytest.raises(ValueError) as raised:
        CoupletWriter(couplet_checkpoint).write("春风", beam=2, num_candidates=3)
    assert str(raised.value) == "num_candidates: expected beam of at least 3, got beam 2"
    command = ["couplet", "--checkpoint", str(couplet_checkpoint), "--beam", "2", "--num-candidates", "3", "春风"]
    capsys.readouterr()
    assert main(command) == 2
    assert capsys.readouterr() == (
        "",
        "transformer-lab couplet: error: --num-candidates: expected --beam of at least 3, got --beam 2\n",
    )
    assert main([*command[:3], "--beam", "1", *command[5:]]) == 2  # one beam is greedy search
    assert capsys.readouterr().err == (
        "transformer-lab couplet: error: --num-candidates: expected --beam of at least 3, got --beam 1\n"
    )
    # A checkpoint that searches greedily, asked for no beam: said so, in either's words.
    writer = CoupletWriter(couplet_checkpoint)
    writer.config = dataclasses.replace(
        writer.config, decode=dataclasses.replace(writer.config.decode, strategy="greedy", beam_size=1)
    )
    with pytest.raises(SettingError) as greedy:
        writer.write("春风", num_candidates=3)
    assert (
        str(greedy.value) == "num_candidates: expected beam of at least 3, got none (the checkpoint searches greedily)"
    )
    assert greedy.value.phrased(lambda name: "--" + name.replace("_", "-")) == (
        "--num-candidates: expected --beam of at least 3, got none (the checkpoint searches greedily)"
    )


@pytest.mark.parametrize(("keyword", "value"), [("length_penalty", 1.0), ("beam_stop", "finished")])
def test_beam_settings_with_a_greedy_search_are_refused_by_the_api_as_by_the_commands(
    translation_checkpoint: Path, couplet_checkpoint: Path, keyword: str, value: object
) -> None:
    """One check: the API names its keyword, the command line its option, in the same words."""
    expected = (
        f"{keyword}: expected beam search, which it steers, got a greedy search (beam 1); "
        f"give beam N (N >= 2) or leave {keyword} out"
    )
    translator = Translator(translation_checkpoint)
    calls = [
        lambda: translator.translate("Hallo", beam=1, **{keyword: value}),
        lambda: translator.candidates("Hallo", beam=1, **{keyword: value}),
        lambda: translator.attention_map("Hallo", beam=1, **{keyword: value}),
        lambda: CoupletWriter(couplet_checkpoint).write("春风", beam=1, **{keyword: value}),
    ]
    for call in calls:
        with pytest.raises(SettingError) as raised:
            call()
        assert str(raised.value) == expected
        flag = "--" + keyword.replace("_", "-")
        assert raised.value.phrased(lambda name: "--" + name.replace("_", "-")) == (
            f"{flag}: expected beam search, which it steers, got a greedy search (--beam 1); "
            f"give --beam N (N >= 2) or leave {flag} out"
        )
    # A greedy checkpoint asked for no beam: refused too, saying the search is the checkpoint's.
    translator.config = dataclasses.replace(
        translator.config, decode=dataclasses.replace(translator.config.decode, strategy="greedy", beam_size=1)
    )
    with pytest.raises(SettingError, match=r"greedy search \(the checkpoint's, no beam given\)"):
        translator.translate("Hallo", **{keyword: value})
    # Beam search, or n-best lists that widen a greedy checkpoint's search to beams, take them.
    assert isinstance(translator.translate("Hallo", beam=2, **{keyword: value}), str)
    assert len(translator.candidates("Hallo", nbest=2, **{keyword: value})) == 2


def test_names_of_the_sentences_are_a_list_of_str_read_once(translation_checkpoint: Path) -> None:
    """``names`` (what an error calls each sentence) is checked as a list of str, not read character by character."""
    translator = Translator(translation_checkpoint)
    too_long = "Hund " * 400
    refusals: list[tuple[Any, Any, str]] = [
        ("Hallo", "a.txt: line 1", "names: expected a list of str, one per sentence, got str 'a.txt: line 1'"),
        (["Hallo", too_long], "xy", "names: expected a list of str, one per sentence, got str 'xy'"),
        (["Hallo", too_long], [1, 2], "names[0]: expected a str, got int"),
        (["Hallo", too_long], {"a": 1, "b": 2}, "names: expected a list of str, one per sentence, got dict"),
    ]
    for sentences, names, message in refusals:
        for call in (translator.translate, translator.candidates):
            with pytest.raises(ValueError) as raised:
                call(sentences, names=names)
            assert str(raised.value) == message
    # A generator is read once, its names used (was: "object of type 'generator' has no len()").
    for call in (translator.translate, translator.candidates):
        with pytest.raises(ValueError, match=r"^a\.txt: line 2 must be at most 256 subword tokens"):
            call(["Hallo", too_long], names=(name for name in ["a.txt: line 1", "a.txt: line 2"]))
    assert translator.translate(["Hallo"], names=iter(["a.txt: line 1"])) == translator.translate(["Hallo"])


def test_decode_settings_reads_its_device_as_the_api_does_and_names_a_bad_argument(
    translation_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``decode_settings`` (in the API) refuses in one line naming ``device`` or ``decode``, never in torch's words."""
    decode = Translator(translation_checkpoint).config.decode
    assert decode_settings(decode, beam=3, device="auto").beam_size == 3  # "auto" as Translator(device=) takes it
    refusals = [
        ("gpu", "device: expected one of auto, cpu, cuda, cuda:N (N: a GPU's index, from 0), got 'gpu'"),
        ("cuda:x", "device: expected one of auto, cpu, cuda, cuda:N (N: a GPU's index, from 0), got 'cuda:x'"),
    ]
    for device, message in refusals:  # was: torch's RuntimeError "Expected one of cpu, cuda, ipu, ..."
        with pytest.raises(ValueError) as raised:
            decode_settings(decode, device=device)
        assert str(raised.value) == message
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"^device: expected a device this machine has, got 'cuda'"):
        decode_settings(decode, device="cuda")  # was: AssertionError "Torch not compiled with CUDA enabled"
    with pytest.raises(TypeError) as wrong_type:
        decode_settings(dataclasses.asdict(decode))  # type: ignore[arg-type]
    assert str(wrong_type.value) == "decode: expected a DecodeConfig (a checkpoint's config.decode), got dict"


def test_numpy_numbers_are_taken_as_the_python_numbers_they_hold(
    translation_checkpoint: Path, couplet_checkpoint: Path
) -> None:
    """A sweep over ``np.arange`` passes NumPy integers: each is the int it holds, in every count the API takes.

    (Was: "beam: expected an int >= 1 (1 is greedy), got np.int64(3)", a refusal of what it asked for.)
    """
    translator = Translator(translation_checkpoint)
    sentence = SENTENCES[0]
    assert translator.translate(sentence, beam=np.int64(3)) == translator.translate(sentence, beam=3)
    assert translator.candidates(sentence, nbest=np.int32(2)) == translator.candidates(sentence, nbest=2)
    assert translator.translate(SENTENCES, batch_size=np.int64(1)) == translator.translate(SENTENCES, batch_size=1)
    penalised = {"beam": 2, "length_penalty": np.float32(0.5)}
    assert translator.translate(sentence, **penalised) == translator.translate(sentence, beam=2, length_penalty=0.5)
    decode = translator.decode_config(beam=np.int64(3), nbest=np.int64(2), length_penalty=np.float32(0.5))
    assert [type(value) for value in (decode.beam_size, decode.num_return, decode.length_penalty)] == [int, int, float]
    writer = CoupletWriter(couplet_checkpoint)
    assert writer.write("春风", num_candidates=np.int64(2), beam=np.int64(2)) == writer.write(
        "春风", num_candidates=2, beam=2
    )
    # What is no count stays refused: a NumPy bool as a bool is, a NumPy zero as zero is.
    for beam, shown in ((np.bool_(True), repr(np.bool_(True))), (np.int64(0), repr(np.int64(0)))):
        with pytest.raises(SettingError) as raised:
            translator.translate(sentence, beam=beam)
        assert str(raised.value) == f"beam: expected an int >= 1 (1 is greedy), got {shown}"
    with pytest.raises(ValueError) as zero:
        translator.translate(sentence, batch_size=np.int64(0))
    assert str(zero.value) == f"batch_size: expected an int >= 1, got {np.int64(0)!r}"


def test_a_rerank_weight_of_the_callers_with_a_greedy_search_is_refused_by_the_api_as_by_the_command(
    couplet_checkpoint: Path,
) -> None:
    """``constraints`` with a re-ranking weight of its own, for a greedy search that keeps one candidate to re-rank.

    (Was: answered as without the weight; ``couplet --beam 1 --rhythm-rerank W`` is refused.)
    """
    writer = CoupletWriter(couplet_checkpoint)
    own = writer.config.constraints
    for name in ("rhythm_rerank", "part_of_speech_rerank"):
        with pytest.raises(SettingError) as raised:
            writer.write("春风", beam=1, constraints=dataclasses.replace(own, **{name: 1.5}))
        assert str(raised.value) == (
            f"constraints.{name}: expected beam search, whose candidates it re-ranks, got a greedy search (beam 1), "
            f"which keeps one candidate; give beam N (N >= 2) or keep the checkpoint's {getattr(own, name):g}"
        )
    # Taken: the weight with beam search, no weight, the checkpoint's own weight (it decodes both ways), other rules.
    heavier = dataclasses.replace(own, rhythm_rerank=1.5)
    assert writer.write("春风", beam=2, constraints=heavier).candidates
    for rules in (dataclasses.replace(own, rhythm_rerank=0.0), own, dataclasses.replace(own, mirror_repetition=False)):
        assert writer.write("春风", beam=1, constraints=rules).candidates
    # A checkpoint that searches greedily, asked for no beam: said so.
    writer.config = dataclasses.replace(
        writer.config, decode=dataclasses.replace(writer.config.decode, strategy="greedy", beam_size=1)
    )
    with pytest.raises(SettingError, match=r"greedy search \(the checkpoint's, no beam given\)"):
        writer.write("春风", constraints=heavier)
