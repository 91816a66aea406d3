"""The predict commands answer a long input in parts: output as it is made, the same output as in one part.

``ANSWERED_AT_ONCE`` is set to 2 here, so that five inputs take three parts; the oracle is the
same command with every input in one part.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.reliability.builders import (
    SENTENCES,
    train_classification_checkpoint,
    train_couplet_checkpoint,
    write_translation_checkpoint,
)
from transformer_lab import api
from transformer_lab.cli import main, predict_command
from transformer_lab.one_line import one_line
from transformer_lab.tasks.couplet.predict import CoupletWriter
from transformer_lab.tasks.translation.predict import Translator

GERMAN = [source for source, _ in SENTENCES] + ["Ein Hund schläft."]
REPOSITORY = Path(__file__).resolve().parents[2]


def _line_within(stream: object, seconds: float) -> str | None:
    """One line of a child's pipe, or None if none comes within ``seconds``."""
    ready, _, _ = select.select([stream], [], [], seconds)
    return stream.readline() if ready else None  # type: ignore[attr-defined]


def _run(command: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(command)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _in_parts_of(size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(predict_command, "ANSWERED_AT_ONCE", size)


def _stopped_at_the_second_call(
    owner: type, name: str, monkeypatch: pytest.MonkeyPatch, seen: Callable[[], object] = lambda: None
) -> list[object]:
    """``owner.name`` raising Ctrl-C's KeyboardInterrupt at its second call (between two parts); what ``seen``
    gave at each call, in the returned list."""
    method, calls = getattr(owner, name), []

    def stopping(self: object, *arguments: object, **keywords: object) -> object:
        calls.append(seen())
        if len(calls) == 2:
            raise KeyboardInterrupt
        return method(self, *arguments, **keywords)

    monkeypatch.setattr(owner, name, stopping)
    return calls


@pytest.mark.parametrize("options", [[], ["--nbest", "2"], ["--beam", "1"]], ids=["beam", "nbest", "greedy"])
def test_translate_in_parts_writes_what_it_writes_in_one(
    options: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = write_translation_checkpoint(tmp_path / "checkpoint", favoured="\n")
    command = ["translate", "--checkpoint", str(checkpoint), *options, *GERMAN]
    whole = _run(command, capsys)
    _in_parts_of(2, monkeypatch)
    assert _run(command, capsys) == whole
    code, out, err = whole
    assert code == 0
    written = 5 * (2 if "--nbest" in options else 1)
    if "--nbest" in options:  # the sentences are numbered across the parts
        assert [line.split("\t")[:2] for line in out.splitlines()] == [
            [str(number), str(rank)] for number in range(1, 6) for rank in (1, 2)
        ]
    # The line breaks of every part are counted together, and said once.
    assert err.count("held a line break") == 1
    assert f"{written} of {written} translations held a line break" in err


def test_each_part_is_printed_before_the_next_is_decoded_and_a_stop_says_where_to_go_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = write_translation_checkpoint(tmp_path / "checkpoint")
    source = tmp_path / "source.de"
    source.write_text("".join(line + "\n" for line in GERMAN), encoding="utf-8")
    expected = [one_line(text) for text in api.Translator(checkpoint).translate(GERMAN[:2])]
    # What the command had printed before each part.
    calls = _stopped_at_the_second_call(Translator, "best", monkeypatch, lambda: capsys.readouterr().out)
    _in_parts_of(2, monkeypatch)
    code, out, err = _run(["translate", "--checkpoint", str(checkpoint), "--input", str(source)], capsys)
    assert code == 130
    assert calls == ["", "".join(line + "\n" for line in expected)]
    assert err.splitlines() == [
        f"transformer-lab translate: stopped after the first 2 of 5 sentences, whose answers were written; {source}: "
        "line 3 was the next",
        "transformer-lab translate: interrupted",
    ]


def test_a_stop_says_an_output_file_was_not_written_and_leaves_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = train_couplet_checkpoint(tmp_path / "couplet")
    _stopped_at_the_second_call(CoupletWriter, "write", monkeypatch)
    _in_parts_of(2, monkeypatch)
    output = tmp_path / "lower.txt"
    command = ["couplet", "--checkpoint", str(checkpoint), "--output", str(output), "春风花", "山水云天", "江河月"]
    code, out, err = _run(command, capsys)
    assert (code, out, output.exists()) == (130, "", False)
    assert err.splitlines() == [
        f"transformer-lab couplet: stopped after the first 2 of 3 lines; --output {output} was not written (it is "
        "written whole, at the end); input 3 was the next",
        "transformer-lab couplet: interrupted",
    ]


def test_a_sentence_too_long_in_a_later_part_is_refused_before_any_is_translated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = write_translation_checkpoint(tmp_path / "checkpoint")
    _in_parts_of(2, monkeypatch)
    translate, calls = Translator.translate, []
    monkeypatch.setattr(
        Translator, "translate", lambda *arguments, **keywords: calls.append(1) or translate(*arguments, **keywords)
    )
    code, out, err = _run(["translate", "--checkpoint", str(checkpoint), *GERMAN[:4], "Wort " * 400], capsys)
    assert (code, out, calls) == (2, "", [])
    assert "transformer-lab translate: error: input 5 must be at most 256 subword tokens" in err


def test_couplet_and_classify_in_parts_write_every_answer_to_their_output_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    couplet = train_couplet_checkpoint(tmp_path / "couplet")
    classifier = train_classification_checkpoint(tmp_path / "classification")
    uppers = ["春风花", "山水云天", "江河月", "", "花月"]  # the empty one is refused alone, in the second part
    texts = ["stocks rise", "the match ended", "", "new chips", "rain in the north"]
    commands = {
        "couplet": (["couplet", "--checkpoint", str(couplet), "--num-candidates", "2", "--beam", "2", *uppers]),
        "classify": (["classify", "--checkpoint", str(classifier), *texts]),
    }
    whole = {}
    for name, command in commands.items():
        whole[name] = _run([*command, "--output", str(tmp_path / f"{name}-whole.txt")], capsys)
    _in_parts_of(2, monkeypatch)
    for name, command in commands.items():
        code, out, err = _run([*command, "--output", str(tmp_path / f"{name}-parts.txt")], capsys)
        assert (code, out, err) == whole[name]
        assert code == 2 and f"input {4 if name == 'couplet' else 3}: " in err
        written = (tmp_path / f"{name}-parts.txt").read_text(encoding="utf-8")
        in_one_part = (tmp_path / f"{name}-whole.txt").read_text(encoding="utf-8")
        if name == "classify":
            # A text's batch differs in parts (other rows, another padded length), and the matrix
            # kernels' summation order with it: on some CPUs the probabilities then differ in
            # their last float32 digits. Everything else is the same, to the byte.
            answers = [json.loads(line) for line in written.splitlines()]
            expected = [json.loads(line) for line in in_one_part.splitlines()]
            assert [answer["text"] for answer in answers] == texts
            for answer, oracle in zip(answers, expected, strict=True):
                probabilities, oracle_probabilities = answer.pop("probabilities", {}), oracle.pop("probabilities", {})
                assert answer == oracle
                assert list(probabilities) == list(oracle_probabilities)
                assert probabilities == pytest.approx(oracle_probabilities, rel=1e-5, abs=1e-7)
        else:
            assert written == in_one_part
            # Each upper line (the refused one empty), then its two ranked lower lines, indented.
            assert [line for line in written.splitlines() if not line.startswith(" ")] == uppers


def test_a_pipe_is_answered_as_its_lines_come_not_once_it_ends(tmp_path: Path) -> None:
    # The first line is translated while the pipe stays open (was: all of stdin read first, so nothing
    # came until it ended, and an endless one, `yes | translate`, grew until the kernel killed it).
    checkpoint = write_translation_checkpoint(tmp_path / "checkpoint")
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY / "src"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "transformer_lab", "translate", "--checkpoint", str(checkpoint), "--beam", "1"]
    with subprocess.Popen(
        command, env=environment, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as child:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(GERMAN[0] + "\n")
        child.stdin.flush()
        first = _line_within(child.stdout, 120)
        child.stdin.write(GERMAN[1] + "\n")
        child.stdin.close()
        rest = child.stdout.read()
        assert child.wait(timeout=120) == 0, child.stderr.read() if child.stderr else ""
    assert first is not None, "no answer while the pipe was open"
    expected = [one_line(text) for text in api.Translator(checkpoint).translate(GERMAN[:2], beam=1)]
    assert [first.rstrip("\n"), *rest.splitlines()] == expected


def test_an_endless_line_from_a_device_or_a_pipe_is_refused_once_past_the_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: read whole before any check: 22 GB, then the kernel's kill (or a MemoryError traceback).
    checkpoint = write_translation_checkpoint(tmp_path / "checkpoint")
    code, out, error = _run(["translate", "--checkpoint", str(checkpoint), "--input", "/dev/zero"], capsys)
    assert (code, out) == (2, "")
    assert error.strip() == (
        "transformer-lab translate: error: /dev/zero: line 1: expected lines of at most 1,048,576 bytes, "
        "got a longer one; split it or leave it out"
    )


@pytest.mark.parametrize("piped", [False, True], ids=["arguments", "stdin"])
def test_a_full_standard_output_is_named_as_one(tmp_path: Path, piped: bool) -> None:
    # Was: "failed: [Errno 28] No space left on device", exit 1, naming nothing; then "input 1" for stdin's line 1.
    checkpoint = write_translation_checkpoint(tmp_path / "checkpoint")
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY / "src"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "transformer_lab", "translate", "--checkpoint", str(checkpoint)]
    given = "".join(line + "\n" for line in GERMAN[:2]) if piped else None
    with open("/dev/full", "w", encoding="utf-8") as full:
        result = subprocess.run(
            command if piped else [*command, *GERMAN[:2]],
            input=given,
            env=environment,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert result.returncode == 2
    first = "stdin: line 1" if piped else "input 1"
    assert result.stderr.splitlines()[-1] == (
        "transformer-lab translate: error: could not write the standard output (No space left on device, ENOSPC); "
        f"the answers from {first} on were not written"
    )


def test_an_output_file_is_written_whole_when_the_standard_output_closes_early(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `couplet --output F ... | head -1`: was exit 141 at the first part, and F never written, without a word.
    checkpoint = train_couplet_checkpoint(tmp_path / "couplet")
    uppers = ["春风花", "山水云天", "江河月"]
    whole = tmp_path / "whole.txt"
    assert main(["couplet", "--checkpoint", str(checkpoint), "--output", str(whole), *uppers]) == 0
    capsys.readouterr()
    _in_parts_of(2, monkeypatch)
    printed: list[str] = []

    def closed_after_the_first_part(lines: list[str], first_name: str) -> None:
        printed.append(first_name)
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(predict_command, "_print_answers", closed_after_the_first_part)
    output = tmp_path / "lower.txt"
    assert main(["couplet", "--checkpoint", str(checkpoint), "--output", str(output), *uppers]) == 141
    assert printed == ["input 1"]  # nothing more is printed once the reader has gone
    assert output.read_text(encoding="utf-8") == whole.read_text(encoding="utf-8")
    assert capsys.readouterr().err == ""


def test_a_streams_later_line_refused_says_what_the_earlier_parts_did_not_write(tmp_path: Path) -> None:
    # Was: the refusal alone, exit 2, and the --output file the answered parts were kept for never written.
    checkpoint = train_classification_checkpoint(tmp_path / "classification")
    output = tmp_path / "labels.jsonl"
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY / "src"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "transformer_lab", "classify", "--checkpoint", str(checkpoint)]
    with subprocess.Popen(
        [*command, "--output", str(output)],
        env=environment,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as child:
        assert child.stdin is not None and child.stdout is not None and child.stderr is not None
        child.stdin.write(b"stocks rise\n")
        child.stdin.flush()
        assert _line_within(child.stdout, 120) is not None, "no answer while the pipe was open"
        child.stdin.write(b"team \xe9 wins\n")
        child.stdin.close()
        error = child.stderr.read().decode("utf-8")
        assert child.wait(timeout=120) == 2
    assert error.splitlines()[-2:] == [
        f"transformer-lab classify: stopped after the first 1 texts, whose answers were written; --output {output} "
        "was not written (it is written whole, at the end); stdin: line 2 was the next",
        "transformer-lab classify: error: stdin: line 2: expected UTF-8 text, got invalid byte(s) b'\\xe9' at byte "
        "column 6 (invalid continuation byte)",
    ]
    assert not output.exists()


def test_an_output_file_takes_each_part_as_it_is_answered_not_held_to_the_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Was: every part's text held in memory until the end (an endless stream with --output grew without bound).
    checkpoint = train_couplet_checkpoint(tmp_path / "couplet")
    output = tmp_path / "lower.txt"
    uppers = ["春风花", "山水云天", "江河月"]
    whole = tmp_path / "whole.txt"
    assert main(["couplet", "--checkpoint", str(checkpoint), "--output", str(whole), *uppers]) == 0
    first_part = "".join(whole.read_text(encoding="utf-8").splitlines(keepends=True)[:2])
    _in_parts_of(2, monkeypatch)
    seen = _stopped_at_the_second_call(
        CoupletWriter,
        "write",
        monkeypatch,
        lambda: [path.read_text(encoding="utf-8") for path in tmp_path.glob(".lower.txt.*.tmp")],
    )
    assert main(["couplet", "--checkpoint", str(checkpoint), "--output", str(output), *uppers]) == 130
    assert seen == [[], [first_part]]  # on disk beside it, under a temporary name, before the second part
    assert not output.exists() and not list(tmp_path.glob(".lower.txt.*"))  # the stop removed it
