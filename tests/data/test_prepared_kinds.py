"""A prepared folder of another kind is named as such, before its version; `prepare --verify` checks the kind and
takes no option that says how to prepare; `prepare` takes only data settings."""

from __future__ import annotations

import pickle
import shlex
import shutil
from pathlib import Path

import pytest

from tests.data.prepared_corpora import one_line, prepare_corpora
from transformer_lab.cli import main
from transformer_lab.data.prepared_cache import CorpusKindError, NotAPreparedFolderError
from transformer_lab.data.prepared_couplets import read_couplets_manifest
from transformer_lab.data.prepared_pairs import read_pairs_manifest


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A parallel text (pairs) corpus and a couplets corpus, each prepared once; and the pair files."""
    made = prepare_corpora(tmp_path_factory.mktemp("kinds"))
    return {
        "pairs": made["translation"],
        "couplets": made["couplet"],
        "source": made["source"],
        "target": made["target"],
    }


@pytest.mark.parametrize(
    ("task", "folder", "message"),
    [
        ("couplet", "pairs", "expected a couplets corpus, got a parallel text (pairs) corpus"),
        ("translation", "couplets", "expected a parallel text (pairs) corpus, got a couplets corpus"),
        ("classification", "pairs", "expected a labelled text corpus, got a parallel text (pairs) corpus"),
    ],
)
def test_training_from_a_folder_of_another_kind_names_both_kinds_not_a_version(
    corpora: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    task: str,
    folder: str,
    message: str,
) -> None:
    capsys.readouterr()
    # Named as given: the option, or the key that --set gave.
    for named, given in (
        ("--prepared", ["--prepared", str(corpora[folder])]),
        ("data.prepared_dir", ["--set", f"data.prepared_dir={corpora[folder]}"]),
    ):
        assert main(["train", task, *given, "--out", str(tmp_path / "run"), "--set", "train.max_steps=1"]) == 2
        assert one_line(capsys) == f"transformer-lab train: error: {named} {corpora[folder]}: {message}"


def test_verify_refuses_a_folder_of_another_kind(corpora: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["prepare", "couplet", "--verify", str(corpora["pairs"])]) == 2
    expected = f"--verify {corpora['pairs']}: expected a couplets corpus, got a parallel text (pairs) corpus"
    assert one_line(capsys).endswith(expected)
    assert main(["prepare", "translation", "--verify", str(corpora["pairs"])]) == 0
    assert main(["prepare", "couplet", "--verify", str(corpora["couplets"])]) == 0  # opened as a run opens it


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--train", "{source}", "{target}"], "--train"),
        (["--valid", "{source}", "{target}", "--set", "data.vocab_size=5"], "--valid, --set"),
        (["--source-language", "fr", "--preset", "base"], "--source-language, --preset"),
    ],
)
def test_verify_refuses_the_options_that_say_how_to_prepare(
    corpora: dict[str, Path], capsys: pytest.CaptureFixture[str], options: list[str], named: str
) -> None:
    capsys.readouterr()
    given = [option.format(source=corpora["source"], target=corpora["target"]) for option in options]
    assert main(["prepare", "translation", "--verify", str(corpora["pairs"]), *given]) == 2
    assert one_line(capsys).endswith(
        "--verify: expected it without the options that say how to prepare (it checks the prepared folder as it is), "
        f"got {named} too"
    )


@pytest.mark.parametrize("override", ["train.max_steps=5", "model.d_model=32", "decode.beam_size=3"])
def test_prepare_refuses_a_setting_of_another_section_than_data(
    corpora: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], override: str
) -> None:
    capsys.readouterr()
    out = tmp_path / "prepared"
    arguments = ["prepare", "translation", "--train", str(corpora["source"]), str(corpora["target"]), "--out", str(out)]
    assert main([*arguments, "--set", "data.vocab_size=300", "--set", override]) == 2
    key = override.split("=")[0]
    assert one_line(capsys).endswith(
        f"--set {override}: expected a data.* key (preparing reads only the data settings), got {key}"
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("task", "override", "purpose"),
    [
        ("translation", "data.max_tokens=5", "the padded tokens of a training batch"),
        ("translation", "data.bpe_dropout=0.1", "the BPE dropout of the training pairs, drawn anew each epoch"),
        ("couplet", "data.cache_dir=elsewhere", "where a run keeps the corpora it prepares"),
        ("couplet", "data.test_split=test2016", "the split evaluate scores without --split"),
        ("classification", "data.seed=7", "the shuffling of the training batches"),
        ("classification", "data.prepared_dir=elsewhere", "the prepared folder a run trains from"),
    ],
)
def test_prepare_refuses_a_data_setting_only_a_run_uses_naming_its_command(
    corpora: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], task: str, override: str, purpose: str
) -> None:
    capsys.readouterr()
    out = tmp_path / "prepared"
    # Refused before any file is read: the training file named need not be of the task's form.
    arguments = ["prepare", task, "--train", str(corpora["source"]), str(corpora["target"]), "--out", str(out)]
    assert main([*arguments, "--set", override]) == 2
    key = override.split("=")[0]
    assert one_line(capsys).endswith(
        f"--set {override}: expected a data setting that preparing a corpus uses, got {key}, a setting of train "
        f"({purpose}); give it to train instead"
    )
    assert not out.exists()


def test_verify_refuses_a_folder_whose_input_changed_as_train_does(
    corpora: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = tmp_path / "corpus.de", tmp_path / "corpus.en"
    shutil.copy(corpora["source"], source)
    shutil.copy(corpora["target"], target)
    folder = tmp_path / "prepared"
    settings = ["--no-progress", "--set", "data.vocab_size=300", "--set", "data.num_carved_validation=6"]
    assert main(["prepare", "translation", "--train", str(source), str(target), "--out", str(folder), *settings]) == 0
    assert main(["prepare", "translation", "--verify", str(folder)]) == 0
    size = source.stat().st_size
    with source.open("a", encoding="utf-8") as file:
        file.write("wort1 wort2\n")
    capsys.readouterr()
    # One check for both: the folder verified is the one a run takes (was: verified, then refused by train).
    stale = f"{folder} is stale: {source} changed size ({size} -> {size + 12} bytes); prepare it again"
    assert main(["prepare", "translation", "--verify", str(folder)]) == 2
    assert one_line(capsys).endswith(f"--verify: {stale}")
    assert main(["train", "translation", "--prepared", str(folder), "--out", str(tmp_path / "run")]) == 2
    assert one_line(capsys).endswith(f"data.prepared_dir: {stale}")


@pytest.mark.parametrize("task", ["translation", "couplet", "classification"])
def test_a_prepared_folder_that_is_missing_or_a_file_is_named_by_its_option(
    task: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing, a_file = tmp_path / "missing" / "folder", tmp_path / "notes.txt"
    a_file.write_text("mine\n", encoding="utf-8")
    expected = "expected a folder written by 'prepare', got"
    capsys.readouterr()
    for given, said in ((missing, "which does not exist"), (a_file, "which is a file")):
        # Named as given: the option, or the key that --set gave.
        for named, options in (
            ("--prepared", ["--prepared", str(given)]),
            ("data.prepared_dir", ["--set", f"data.prepared_dir={given}"]),
        ):
            assert main(["train", task, *options, "--out", str(tmp_path / "run")]) == 2
            assert one_line(capsys) == f"transformer-lab train: error: {named}: {expected} '{given}', {said}"
    assert sorted(tmp_path.iterdir()) == [a_file]  # no run folder made


def test_the_library_says_prepared_corpus_and_the_error_survives_pickling(tmp_path: Path) -> None:
    with pytest.raises(NotAPreparedFolderError) as raised:
        read_pairs_manifest(tmp_path / "missing")
    message = (
        f"prepared corpus: expected a folder written by 'prepare', got '{tmp_path / 'missing'}', which does not exist"
    )
    assert str(raised.value) == message and isinstance(raised.value, FileNotFoundError)
    copied = pickle.loads(pickle.dumps(raised.value.for_option("--prepared")))
    assert str(copied) == message.replace("prepared corpus:", "--prepared:", 1)


def test_the_library_names_a_folder_of_another_kind_by_its_key_and_the_error_survives_pickling(
    corpora: dict[str, Path],
) -> None:
    with pytest.raises(CorpusKindError) as raised:
        read_couplets_manifest(corpora["pairs"])
    kinds = "expected a couplets corpus, got a parallel text (pairs) corpus"
    assert str(raised.value) == f"prepared corpus {corpora['pairs']}: {kinds}"
    copied = pickle.loads(pickle.dumps(raised.value.for_option("data.prepared_dir")))
    assert isinstance(copied, CorpusKindError) and str(copied) == f"data.prepared_dir {corpora['pairs']}: {kinds}"


def test_the_train_command_prepare_prints_pastes_back_for_a_folder_with_a_space(
    corpora: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "my corpus's copy"
    arguments = ["prepare", "translation", "--train", str(corpora["source"]), str(corpora["target"])]
    assert main([*arguments, "--out", str(out), "--no-progress", "--set", "data.vocab_size=300"]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("train with: ")]
    # Was: "--prepared /tmp/.../my corpus's copy --out RUN_FOLDER", which a shell splits (and leaves a quote open).
    words = shlex.split(line.removeprefix("train with: "))
    assert words == ["transformer-lab", "train", "translation", "--prepared", str(out), "--out", "RUN_FOLDER"]
