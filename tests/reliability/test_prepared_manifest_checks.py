"""A prepared folder's manifest is checked field by field, and its files against the sizes and sha256 it records.

An edited manifest used to give a TypeError traceback (``inputs: "x"``) or quietly turn the
staleness check off (``inputs: []``); a token file damaged without changing its size was
read as it was.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from transformer_lab.cli import main
from transformer_lab.data.prepared_pairs import open_prepared_pairs

PREPARED = ["--no-progress", "--set", "data.vocab_size=300", "--set", "data.num_carved_validation=6"]


@pytest.fixture(scope="module")
def prepared_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("prepared")
    source, target = root / "corpus.de", root / "corpus.en"
    source.write_text("".join(f"wort{n % 17} wort{n % 5}\n" for n in range(80)), encoding="utf-8")
    target.write_text("".join(f"word{n % 17} word{n % 5}\n" for n in range(80)), encoding="utf-8")
    out = root / "de-en"
    assert main(["prepare", "translation", "--train", str(source), str(target), "--out", str(out), *PREPARED]) == 0
    return out


@pytest.fixture
def prepared(prepared_once: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    capsys.readouterr()
    return Path(shutil.copytree(prepared_once, tmp_path / "de-en"))


def _edit_manifest(folder: Path, edit: Any) -> None:
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    edit(manifest)
    path.write_text(json.dumps(manifest), encoding="utf-8")


def _tree(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "Traceback" not in error, error
    return error


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("inputs", "x", "inputs: expected a non-empty list of the input files read, got 'x'"),
        ("inputs", [], "inputs: expected a non-empty list of the input files read, got []"),
        ("inputs", [{"path": 3}], "inputs[0].path: expected a path, got 3"),
        ("tokenizer_sha256", 7, "tokenizer_sha256: expected a sha256 (64 lowercase hex digits), got 7"),
        ("counts", "many", "counts: expected an object of counts and names holding 'train_pairs'"),
        ("description", [], "description: expected an object, got []"),
        ("files", {"source.ids": {"size": "big"}}, "files['source.ids'].size: expected an int >= 0, got 'big'"),
    ],
)
def test_a_manifest_field_of_the_wrong_type_is_one_line_naming_the_file_and_field(
    prepared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: Any, named: str
) -> None:
    _edit_manifest(prepared, lambda manifest: manifest.__setitem__(field, value))
    before = _tree(prepared)
    run = ["train", "translation", "--prepared", str(prepared), "--out", str(tmp_path / "run")]
    assert main([*run, "--set", "train.max_steps=1"]) == 2
    error = _one_line(capsys)
    assert f"{prepared / 'manifest.json'}: {named}" in error
    assert _tree(prepared) == before


def test_a_damage_that_keeps_the_size_is_caught_by_verify(prepared: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prepare", "translation", "--verify", str(prepared)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verified"] == str(prepared) and report["files"] >= 5
    ids = prepared / "source.ids"
    data = bytearray(ids.read_bytes())
    data[0] ^= 1
    ids.write_bytes(bytes(data))
    before = _tree(prepared)
    assert len(open_prepared_pairs(prepared).store) > 0  # opening compares sizes only: cheap
    assert main(["prepare", "translation", "--verify", str(prepared)]) == 2
    assert f"{ids}: its sha256 differs from the one the manifest records" in _one_line(capsys)
    assert _tree(prepared) == before


def test_a_file_of_another_size_is_refused_when_opened(prepared: Path) -> None:
    validation = prepared / "validation.jsonl"
    validation.write_text(validation.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"validation\.jsonl: expected \d+ bytes as the manifest records, got \d+"):
        open_prepared_pairs(prepared)


def test_a_folder_prepared_before_checksums_is_read_and_verify_asks_to_prepare_it_again(
    prepared: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _edit_manifest(prepared, lambda manifest: manifest.pop("files"))
    assert len(open_prepared_pairs(prepared).store) > 0
    assert main(["prepare", "translation", "--verify", str(prepared)]) == 2
    assert "holds no checksums of the folder's files (prepared by an earlier version)" in _one_line(capsys)


def test_verify_opens_the_folder_as_a_run_does(prepared: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A file removed with its manifest entry passed the checksums (they cover what the manifest
    # lists), and a run then failed on the missing file.
    (prepared / "validation.jsonl").unlink()
    _edit_manifest(prepared, lambda manifest: manifest["files"].pop("validation.jsonl"))
    assert main(["prepare", "translation", "--verify", str(prepared)]) == 2
    error = _one_line(capsys)
    assert f"--verify {prepared}: expected every file a run opens, got " in error and "validation.jsonl" in error


def test_verify_of_no_prepared_folder_says_what_is_there_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a corpus\n", encoding="utf-8")
    (tmp_path / "empty").mkdir()
    expected = {
        tmp_path / "absent": f"--verify: expected a folder written by 'prepare', got '{tmp_path / 'absent'}', "
        "which does not exist",
        a_file: f"--verify: expected a folder written by 'prepare', got '{a_file}', which is a file",
        tmp_path / "empty": f"--verify: {tmp_path / 'empty'}: expected a folder written by 'prepare', got no "
        "manifest.json in it",
    }
    for folder, message in expected.items():
        assert main(["prepare", "translation", "--verify", str(folder)]) == 2
        # Was: "--verify X: expected every file a run opens, got X: expected a folder ..., got no manifest.json".
        assert _one_line(capsys) == f"transformer-lab prepare: error: {message}"
