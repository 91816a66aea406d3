"""`prepared_corpus`, the one path every prepared corpus takes: a toy kind prepared once into the cache, reused
while it can serve the run, rebuilt when not, and a folder given as data.prepared_dir opened as it is or refused."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from transformer_lab.data import prepared_cache
from transformer_lab.data.prepared_cache import (
    INPUT_CHECKS,
    MANIFEST_FILE,
    CorpusIdentity,
    CorpusKind,
    InputWatch,
    read_corpus_manifest,
    write_corpus_manifest,
)
from transformer_lab.training.run.once_per_machine import prepared_corpus

TOY_VERSION = 1
TEXT_FILE = "text.txt"


@dataclass
class Toy:
    folder: Path
    manifest: dict[str, Any]
    text: str

    @property
    def report(self) -> dict[str, Any]:
        return {"characters": len(self.text)}


def open_toy(folder: Path) -> Toy:
    return Toy(folder, read_toy_manifest(folder), (folder / TEXT_FILE).read_text(encoding="utf-8"))


def read_toy_manifest(folder: Path) -> dict[str, Any]:
    return read_corpus_manifest(folder, "toy", TOY_VERSION)


def characters_sha256(text: str) -> str:
    return hashlib.sha256("".join(sorted(set(text))).encode("utf-8")).hexdigest()


@dataclass
class Calls:
    """What the kinds of one test were asked to do."""

    described: int = 0
    written: int = 0


def toy_kind(
    source: Path,
    calls: Calls,
    *,
    upper: bool = False,
    note: str = "",
    given_sha256: str | None = None,
    refusal: Callable[[dict[str, Any]], str | None] = lambda manifest: None,
) -> CorpusKind[Toy]:
    """The text of ``source`` (upper-cased when asked); ``upper`` replaces the cache entry, ``note`` keys another."""

    def describe() -> dict[str, Any]:
        calls.described += 1
        return {"inputs": [str(source.resolve())], "upper": upper, "note": note}

    def write(folder: Path, description: dict[str, Any]) -> None:
        calls.written += 1
        started = time.perf_counter()
        inputs = InputWatch([source])
        text = source.read_text(encoding="utf-8")
        (folder / TEXT_FILE).write_text(text.upper() if upper else text, encoding="utf-8")
        write_corpus_manifest(
            folder,
            "toy",
            TOY_VERSION,
            description,
            inputs,
            started,
            vocabulary_sha256=given_sha256 or characters_sha256(text),
        )

    identity = CorpusIdentity("vocabulary", given_sha256)
    return CorpusKind("toy", identity, describe, write, open_toy, read_toy_manifest, refusal, unkeyed=("upper",))


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="transformer_lab")
    return caplog


def test_the_cache_prepares_once_reuses_and_rebuilds_when_an_input_changes(
    tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    source, cache, calls = tmp_path / "source.txt", tmp_path / "cache", Calls()
    source.write_text("abc", encoding="utf-8")
    first = prepared_corpus(toy_kind(source, calls), "", cache)
    assert first.text == "abc" and first.folder.parent == cache and first.folder.name.startswith("toy-")
    assert calls.written == 1 and f"toy corpus from {first.folder}: characters 3" in logs.text
    assert (
        json.loads((first.folder / MANIFEST_FILE).read_text(encoding="utf-8"))["description"]["vocabulary"] == "built"
    )

    logs.clear()
    again = prepared_corpus(toy_kind(source, calls), "", cache)
    assert calls.written == 1 and again.folder == first.folder and again.text == "abc"
    assert f"reusing the prepared corpus {first.folder}" in logs.text

    source.write_text("abcd", encoding="utf-8")
    logs.clear()
    rebuilt = prepared_corpus(toy_kind(source, calls), "", cache)
    assert calls.written == 2 and rebuilt.folder == first.folder and rebuilt.text == "abcd"
    assert "preparing the corpus again" in logs.text and "changed size (3 -> 4 bytes)" in logs.text
    assert sorted(path.name for path in cache.iterdir() if not path.name.startswith(".")) == [first.folder.name]


def test_an_unkeyed_setting_replaces_the_entry_and_a_keyed_one_makes_another(
    tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    source, cache, calls = tmp_path / "source.txt", tmp_path / "cache", Calls()
    source.write_text("abc", encoding="utf-8")
    first = prepared_corpus(toy_kind(source, calls), "", cache)
    logs.clear()
    upper = prepared_corpus(toy_kind(source, calls, upper=True), "", cache)
    assert upper.folder == first.folder and upper.text == "ABC" and calls.written == 2
    assert "preparing the corpus again" in logs.text and "the settings differ" in logs.text
    noted = prepared_corpus(toy_kind(source, calls, upper=True, note="other"), "", cache)
    assert noted.folder != first.folder and noted.folder.parent == cache and calls.written == 3
    assert prepared_corpus(toy_kind(source, calls, upper=True), "", cache).text == "ABC" and calls.written == 3


def test_a_checkpoints_identity_or_the_kinds_refusal_rebuilds_the_entry(
    tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    source, cache, calls = tmp_path / "source.txt", tmp_path / "cache", Calls()
    source.write_text("abc", encoding="utf-8")
    built = prepared_corpus(toy_kind(source, calls), "", cache)
    # The checkpoint's own vocabulary: the ids are the same, reused.
    prepared_corpus(toy_kind(source, calls, given_sha256=characters_sha256("cab")), "", cache)
    assert calls.written == 1
    logs.clear()
    prepared_corpus(toy_kind(source, calls, given_sha256=characters_sha256("xyz")), "", cache)
    assert calls.written == 2 and "the vocabulary differs" in logs.text
    logs.clear()
    refused = prepared_corpus(toy_kind(source, calls, refusal=lambda manifest: "not this one"), "", cache)
    assert calls.written == 3 and refused.folder == built.folder
    assert f"preparing the corpus again in {built.folder}: not this one" in logs.text


def test_an_entry_read_before_a_check_the_readers_gained_since_is_prepared_again_naming_the_checks(
    tmp_path: Path, logs: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, cache, calls = tmp_path / "source.txt", tmp_path / "cache", Calls()
    source.write_text("abc", encoding="utf-8")
    built = prepared_corpus(toy_kind(source, calls), "", cache)
    manifest = json.loads((built.folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    assert manifest["input_checks"] == len(INPUT_CHECKS)
    # A check the readers gained since: the entry, its files unchanged, is read again through it.
    monkeypatch.setattr(prepared_cache, "INPUT_CHECKS", (*INPUT_CHECKS, "a newer check"))
    logs.clear()
    assert prepared_corpus(toy_kind(source, calls), "", cache).folder == built.folder and calls.written == 2
    reason = "its files were read before the readers' checks added since (a newer check)"
    assert f"preparing the corpus again in {built.folder}: {reason}" in logs.messages
    logs.clear()
    prepared_corpus(toy_kind(source, calls), "", cache)
    assert calls.written == 2 and f"reusing the prepared corpus {built.folder}" in logs.messages


def test_a_given_prepared_folder_is_opened_as_it_is_or_refused_in_one_line(tmp_path: Path) -> None:
    source, cache, calls = tmp_path / "source.txt", tmp_path / "cache", Calls()
    source.write_text("abc", encoding="utf-8")
    folder = toy_kind(source, calls, note="prepared").prepare(tmp_path / "prepared").folder
    assert calls.written == 1 and calls.described == 1
    # Opened without describing the run's settings or writing, whatever they are; no cache is made.
    opened = prepared_corpus(toy_kind(source, calls, upper=True), str(folder), cache)
    assert opened.folder == folder and opened.text == "abc"
    assert (calls.written, calls.described) == (1, 1) and not cache.exists()

    with pytest.raises(ValueError, match=r"data\.prepared_dir: expected a corpus prepared with the checkpoint's"):
        prepared_corpus(toy_kind(source, calls, given_sha256=characters_sha256("xyz")), folder, cache)
    refusal = toy_kind(source, calls, refusal=lambda manifest: "expected the checkpoint's classes ['a', 'b']")
    with pytest.raises(ValueError) as refused:
        prepared_corpus(refusal, folder, cache)
    assert str(refused.value) == f"data.prepared_dir: expected the checkpoint's classes ['a', 'b'] in {folder}"

    source.write_text("abcd", encoding="utf-8")
    stale = (
        rf"data\.prepared_dir: {re.escape(str(folder))} is stale: .* changed size \(3 -> 4 bytes\); prepare it again"
    )
    with pytest.raises(ValueError, match=stale):
        prepared_corpus(toy_kind(source, calls), folder, cache)

    # A manifest of another format version says, in one line, to prepare it again.
    manifest = folder / MANIFEST_FILE
    manifest.write_text(
        json.dumps({**json.loads(manifest.read_text(encoding="utf-8")), "format_version": 0}), encoding="utf-8"
    )
    with pytest.raises(ValueError, match=r"expected format_version 1, got 0; prepare the corpus again$"):
        prepared_corpus(toy_kind(source, calls), folder, cache)
    assert calls.written == 1 and not cache.exists()
