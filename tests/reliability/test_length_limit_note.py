"""A translation the search stopped at its length limit is said to be possibly cut, not printed as if it ended.

The checkpoints are real ones whose generator's bias makes the model write one token at
every step, so it never writes eos: each translation runs to the limit.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest
import torch

from tests.reliability.builders import SENTENCES, write_translation_checkpoint
from transformer_lab.cli import main
from transformer_lab.data import EOS_ID
from transformer_lab.decoding.sentences import translate_nbest, translate_sentences
from transformer_lab.tasks.translation import train as translation_train

GERMAN = [source for source, _ in SENTENCES]
NOTE = (
    "{cut} of {translated} translations stopped at the search's length limit without ending, so may be cut "
    "(the first: {name}, at {tokens} tokens; the limit is decode.max_len_a x the source's tokens + "
    "decode.max_len_b, at most decode.max_len): a model that repeats itself up to the limit is typical of one "
    "trained briefly"
)


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_translate_says_how_many_translations_ran_to_the_limit(
    strategy: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # Per-sentence limits (0.5 x 7 + 1 = 4 for the first sentence): greedy search forces eos there, so the
    # cut translation ends with an eos of the limit's own, which the note must see through.
    overrides = ["decode.max_len=64", "decode.max_len_a=0.5", "decode.max_len_b=1", f"decode.strategy={strategy}"]
    checkpoint = write_translation_checkpoint(tmp_path / "checkpoint", overrides, favoured="a")
    source = tmp_path / "input.de"
    source.write_text(f"{GERMAN[0]}\n\n{GERMAN[1]}\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        assert main(["translate", "--checkpoint", str(checkpoint), "--input", str(source)]) == 0
    captured = capsys.readouterr()
    model, tokenizer, config = translation_train.load_translator(checkpoint)
    limit = config.decode.max_new_tokens(len(tokenizer.source.encode(GERMAN[0])))
    assert captured.out.splitlines()[0] == "a" * limit
    note = NOTE.format(cut=2, translated=2, name=f"{source}: line 1", tokens=limit)
    # Said once by the command, for every part of the input together (not logged a part at a time).
    assert f"transformer-lab translate: {note}" in captured.err.splitlines() and not caplog.records
    # The n-best list searches each sentence alone, and still says it once.
    with caplog.at_level(logging.WARNING):
        assert main(["translate", "--checkpoint", str(checkpoint), "--input", str(source), "--nbest", "2"]) == 0
    captured = capsys.readouterr()
    assert f"transformer-lab translate: {note}" in captured.err.splitlines() and not caplog.records
    rows = [line.split("\t") for line in captured.out.splitlines()]
    assert [row[:2] for row in rows] == [["1", "1"], ["1", "2"], ["3", "1"], ["3", "2"]]


def test_a_translation_that_ends_is_not_said_to_be_cut(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    checkpoint = write_translation_checkpoint(tmp_path / "checkpoint", favoured="a")
    model, tokenizer, config = translation_train.load_translator(checkpoint)
    decode = dataclasses.replace(config.decode, strategy="greedy")
    with caplog.at_level(logging.WARNING):
        assert translate_sentences(model, tokenizer, GERMAN[:2], decode) == ["a" * config.decode.max_len] * 2
        assert translate_nbest(model, tokenizer, GERMAN[0], decode)[0].text == "a" * config.decode.max_len
    assert [record.getMessage() for record in caplog.records] == [
        NOTE.format(cut=2, translated=2, name="sentences[0]", tokens=config.decode.max_len),
        NOTE.format(cut=1, translated=1, name="sentence", tokens=config.decode.max_len),
    ]
    assert translate_nbest(model, tokenizer, GERMAN[0], decode, warn=False)[0].cut
    caplog.clear()
    with torch.no_grad():
        model.generator.bias[EOS_ID] = 2000.0  # now eos is written first: every translation ends at once
    with caplog.at_level(logging.WARNING):
        assert translate_sentences(model, tokenizer, GERMAN[:2], decode) == ["", ""]
        (candidate,) = translate_nbest(model, tokenizer, GERMAN[0], decode)
    assert candidate.text == "" and not candidate.cut
    assert caplog.records == []


def test_training_validates_without_the_note_and_its_model_then_translates_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # A model of one step runs (nearly) every validation sentence to the limit: said at each validation, noise.
    from tests.reliability.test_config_checks import TINY_TRANSLATION, numbered

    (tmp_path / "a.de").write_text(numbered("ein Hund"), encoding="utf-8")
    (tmp_path / "a.en").write_text(numbered("a dog"), encoding="utf-8")
    run = tmp_path / "run"
    files = ["--train", str(tmp_path / "a.de"), str(tmp_path / "a.en")]
    with caplog.at_level(logging.WARNING):
        assert main(["train", "translation", *files, *TINY_TRANSLATION, "--out", str(run)]) == 0
    assert json.loads((run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()[-1])["val_bleu"] < 10
    assert not [record for record in caplog.records if "length limit" in record.getMessage()]
    capsys.readouterr()
    source = tmp_path / "held.de"
    source.write_text("ein Hund 3\n", encoding="utf-8")
    arguments = ["translate", "--checkpoint", str(run / "last"), "--beam", "1", "--input", str(source)]
    assert main(arguments) == 0
    captured = capsys.readouterr()
    (translation,) = captured.out.splitlines()
    cut = [line for line in captured.err.splitlines() if "length limit" in line]
    note = NOTE.format(cut=1, translated=1, name=f"{source}: line 1", tokens=8)
    assert cut == [f"transformer-lab translate: {note}"], translation


def test_a_long_input_is_said_to_be_cut_once_for_all_its_parts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Was: one note a part of 1,024 lines (a 29,000-line file: up to 29; a slow pipe: one a line).
    from transformer_lab.cli import predict_command

    overrides = ["decode.max_len=64", "decode.max_len_a=0.5", "decode.max_len_b=1", "decode.strategy=greedy"]
    checkpoint = write_translation_checkpoint(tmp_path / "checkpoint", overrides, favoured="a")
    source = tmp_path / "input.de"
    source.write_text("".join(line + "\n" for line in GERMAN), encoding="utf-8")
    monkeypatch.setattr(predict_command, "ANSWERED_AT_ONCE", 2)
    assert main(["translate", "--checkpoint", str(checkpoint), "--input", str(source)]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "length limit" in line]
    assert len(notes) == 1
    assert notes[0].startswith(f"transformer-lab translate: {len(GERMAN)} of {len(GERMAN)} translations stopped")
    assert f"(the first: {source}: line 1, at " in notes[0]
