"""A model whose text holds a line break or a tab still writes one line per input.

The checkpoints are real ones whose generator's bias makes the model write a separator
(byte-level BPE holds every byte; a couplet vocabulary may list U+2028). The outputs are
split as Python's ``str.splitlines`` splits, the strictest reader of lines.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from tests.reliability.builders import SENTENCES, train_couplet_checkpoint, write_translation_checkpoint
from transformer_lab.api import CoupletWriter, Translator
from transformer_lab.cli import main
from transformer_lab.data import Vocabulary
from transformer_lab.evaluation.bleu import corpus_bleu
from transformer_lab.one_line import one_line
from transformer_lab.tasks.couplet import train as couplet_train
from transformer_lab.training import config_to_dict, save_checkpoint

# The separators of one byte each: each is one token of the byte-level BPE.
ONE_BYTE_SEPARATORS = ["\n", "\r", "\t", "\x0b", "\x0c", "\x1c"]
GERMAN = [source for source, _ in SENTENCES]


def test_each_character_splitlines_splits_on_and_the_tab_become_a_space_and_nothing_else_changes() -> None:
    characters = [chr(code) for code in range(sys.maxunicode + 1)]
    separators = {character for character in characters if len(f"a{character}b".splitlines()) == 2} | {"\t"}
    assert len(separators) == 11
    written = one_line("".join(characters))
    assert len(written) == len(characters)
    assert [character for character, kept in zip(characters, written) if kept != character] == sorted(separators)
    assert set(written) - set(characters) == set()


@pytest.mark.parametrize("separator", ONE_BYTE_SEPARATORS, ids=ascii)
def test_translate_writes_one_line_per_sentence_and_says_how_many_held_a_separator(
    separator: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = write_translation_checkpoint(tmp_path / "checkpoint", favoured=separator)
    # The Python API returns the text as decoded: the separator is the model's.
    assert separator in Translator(checkpoint).translate(GERMAN[0])
    assert main(["translate", "--checkpoint", str(checkpoint), *GERMAN]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == len(GERMAN) and all(line.strip() == "" and line for line in lines)
    assert f"transformer-lab translate: {len(GERMAN)} of {len(GERMAN)} translations held a line break" in captured.err
    # The n-best rows keep their four tab-separated columns.
    assert main(["translate", "--checkpoint", str(checkpoint), "--nbest", "2", *GERMAN[:2]]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [row[:2] for row in rows] == [["1", "1"], ["1", "2"], ["2", "1"], ["2", "2"]]
    assert {len(row) for row in rows} == {4}


def test_evaluate_writes_one_hypothesis_per_source_line_and_scores_what_it_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = write_translation_checkpoint(tmp_path / "checkpoint", favoured="\n")
    source, reference, hypotheses = tmp_path / "test.de", tmp_path / "test.en", tmp_path / "hypotheses.txt"
    source.write_text("".join(german + "\n" for german in GERMAN), encoding="utf-8")
    references = [english for _, english in SENTENCES]
    reference.write_text("".join(english + "\n" for english in references), encoding="utf-8")
    arguments = ["evaluate", "translation", "--checkpoint", str(checkpoint), "--beam", "1"]
    assert main([*arguments, "--source", str(source), "--reference", str(reference), "--output", str(hypotheses)]) == 0
    out = capsys.readouterr().out
    written = hypotheses.read_text(encoding="utf-8").splitlines()
    assert len(written) == len(GERMAN) and all(line.strip() == "" and line for line in written)
    assert f"{len(GERMAN)} of {len(GERMAN)} hypotheses held a line break" in out
    # The BLEU printed is sacreBLEU's on the file as written, line i against reference i.
    assert f"BLEU (cased)      {corpus_bleu(written, references).score:.2f}  " in out


def test_couplet_writes_one_line_per_upper_line_when_the_vocabulary_holds_a_line_separator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, vocabulary, config = couplet_train.load(train_couplet_checkpoint(tmp_path / "trained"))
    # A vocabulary file may list U+2028 (only "\n" and "\r" would break its format); the model favours it.
    tokens = [token if token != "雨" else "\u2028" for token in vocabulary.tokens[4:]]
    (separator,) = Vocabulary(tokens).encode(["\u2028"])
    with torch.no_grad():
        model.generator.bias[separator] = 1000.0
    vocabulary_file = {couplet_train.VOCABULARY_FILE: "".join(token + "\n" for token in Vocabulary(tokens).tokens)}
    checkpoint = save_checkpoint(
        tmp_path / "checkpoint", model, {"task": "couplet", **config_to_dict(config)}, extra_files=vocabulary_file
    )
    uppers = ["春风花", "山水云天", "江河月"]
    assert all("\u2028" in result.candidates[0].text for result in CoupletWriter(checkpoint).write(uppers))
    output = tmp_path / "lower.txt"
    assert main(["couplet", "--checkpoint", str(checkpoint), "--output", str(output), *uppers]) == 0
    written = output.read_text(encoding="utf-8").splitlines()
    assert [len(line) for line in written] == [len(upper) for upper in uppers]
    assert "3 of 3 lower lines held a line break" in capsys.readouterr().err
    # The evaluation's hypotheses and samples table keep one line per pair too.
    assert main(["evaluate", "couplet", "--checkpoint", str(checkpoint)]) == 0
    assert "lower lines held a line break" in capsys.readouterr().out
    (hypotheses,) = checkpoint.glob("hypotheses.test.*.txt")
    assert len(hypotheses.read_text(encoding="utf-8").splitlines()) == 5
