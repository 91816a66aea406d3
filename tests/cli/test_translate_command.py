"""`transformer-lab translate`: an empty translation is said on stderr, never a silent blank line."""

from __future__ import annotations

from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from tests.reliability.builders import write_translation_checkpoint
from transformer_lab.cli import main
from transformer_lab.data import EOS_ID
from transformer_lab.training import MODEL_FILE


@pytest.fixture(scope="module")
def silent_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A translation checkpoint whose model always writes <eos> first: every translation is empty."""
    folder = write_translation_checkpoint(tmp_path_factory.mktemp("translation") / "last")
    weights = load_file(folder / MODEL_FILE)
    weights["generator.bias"][EOS_ID] = 1e4
    save_file(weights, folder / MODEL_FILE)
    return folder


def test_an_empty_translation_keeps_its_line_and_is_said_on_stderr(
    silent_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sentences = tmp_path / "sentences.de"
    sentences.write_text("Ein Mann fährt Fahrrad.\n\nZwei Hunde spielen.\n", encoding="utf-8")
    assert main(["translate", "--checkpoint", str(silent_checkpoint), "--input", str(sentences)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "\n\n\n"  # one line per sentence, so line i is still sentence i's
    # Named by the file and line they came from (was: "input 1", as if typed as arguments).
    assert captured.err.splitlines() == [
        f"transformer-lab translate: {sentences}: line 1: the translation is empty (the model ended it at once: "
        "it may need more training, or try --beam 5)",
        f"transformer-lab translate: {sentences}: line 2: the sentence is blank, so its translation is the empty line",
        f"transformer-lab translate: {sentences}: line 3: the translation is empty (the model ended it at once: "
        "it may need more training, or try --beam 5)",
    ]
    # A search already 5 wide gets no advice to try --beam 5 (was: the same words after --beam 5).
    assert main(["translate", "--checkpoint", str(silent_checkpoint), "--beam", "5", "Ein Mann."]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "transformer-lab translate: input 1: the translation is empty (the model ended it at once: "
        "it may need more training)"
    ]


def test_a_bad_plot_attention_path_is_refused_before_translating(
    silent_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    command = ["translate", "--checkpoint", str(silent_checkpoint), "Ein Mann", "--plot-attention"]
    assert main([*command, str(tmp_path / "out.txt")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing translated
    [line] = captured.err.splitlines()
    assert line.startswith("transformer-lab translate: error: --plot-attention: expected a file name ending in .")
    assert line.endswith(f", got '{tmp_path / 'out.txt'}'")
    assert main([*command, str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"transformer-lab translate: error: --plot-attention: expected an image file, got the folder '{tmp_path}'; "
        f"name a file in it, such as '{tmp_path / 'attention.png'}'"
    ]


def test_a_blank_first_input_with_plot_attention_is_refused_before_translating(
    silent_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    figure = tmp_path / "attention.png"
    lines = tmp_path / "in.txt"
    lines.write_text("\nEin Mann\n", encoding="utf-8")
    for given, name in ((["--input", str(lines)], f"{lines}: line 1"), (["  ", "Ein Mann"], "input 1")):
        # Was: every line translated and printed, then "error: sentence: expected a non-empty sentence to plot",
        # the library's keyword, exit 2 (and then "input 1" for the first line of --input).
        assert main(["translate", "--checkpoint", str(silent_checkpoint), *given, "--plot-attention", str(figure)]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and not figure.exists()
        assert captured.err.splitlines() == [
            "transformer-lab translate: error: --plot-attention: expected a first input to draw, got a blank one "
            f"({name}); put the one to draw first"
        ]
    # A blank line after the first is translated as blank, and the first is drawn.
    assert (
        main(["translate", "--checkpoint", str(silent_checkpoint), "Ein Mann", " ", "--plot-attention", str(figure)])
        == 0
    )
    assert figure.is_file()
