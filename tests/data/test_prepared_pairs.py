"""The prepared corpus: streamed as strictly as the whole-file readers, the tokenizer's ids, reused while unchanged."""

from __future__ import annotations

import json
import logging
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from transformer_lab.cli import main
from transformer_lab.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SubwordTokenizer,
    TokenizerPair,
    collate_pairs,
    collated_lengths,
    line_stream,
    pair_stream,
    token_budget_batches,
)
from transformer_lab.data import prepared_pairs as prepared_pairs_module
from transformer_lab.data.download import sha256_of_file
from transformer_lab.data.lazy_batches import epoch_pair_batches, pair_length_table
from transformer_lab.data.pair_files import read_pair_files
from transformer_lab.data.pair_stream import PairFiles, count_pairs, stream_pairs
from transformer_lab.data.prepared_cache import CorpusIdentity, InputChangedError, ReadDigest
from transformer_lab.data.prepared_pairs import (
    BpeSettings,
    PairCorpusSpec,
    PreparedPairs,
    open_prepared_pairs,
    pairs_kind,
)
from transformer_lab.data.token_store import TokenStore
from transformer_lab.training.run.once_per_machine import prepared_corpus
from transformer_lab.training.run.same_run import with_absolute_paths

WORDS = "der die das ein eine Hund Katze läuft springt über den Zaun im Park schnell langsam".split()
BPE = BpeSettings(vocab_size=300, min_frequency=1)


def prepare_pairs(
    spec: PairCorpusSpec,
    out_dir: Path,
    tokenizers: TokenizerPair | None = None,
    bpe: BpeSettings = BpeSettings(),
    progress: bool = True,
) -> PreparedPairs:
    """``spec``'s corpus prepared into the new folder ``out_dir``, as ``transformer-lab prepare`` does."""
    return pairs_kind(spec, tokenizers, bpe, progress=progress).prepare(out_dir)


def prepared_pairs(
    spec: PairCorpusSpec,
    tokenizers: TokenizerPair | None = None,
    bpe: BpeSettings = BPE,
    cache_root: Path | None = None,
    progress: bool = True,
) -> PreparedPairs:
    """``spec``'s corpus from the cache in ``cache_root``, as a run on the user's files gets it."""
    return prepared_corpus(pairs_kind(spec, tokenizers, bpe, progress=progress), "", cache_root or "")


def sentence_pairs(count: int, seed: int) -> list[tuple[str, str]]:
    generator = random.Random(seed)
    pairs = []
    for _ in range(count):
        words = [generator.choice(WORDS) for _ in range(generator.randint(1, 9))]
        pairs.append((" ".join(words), " ".join(reversed(words)).upper()))
    return pairs


def write_forms(folder: Path, pairs: list[tuple[str, str]]) -> dict[str, list[Path]]:
    """The same pairs as two line files, one TSV file (with a header) and one JSON Lines file."""
    (folder / "corpus.de").write_text("".join(f"{de}\n" for de, _ in pairs), encoding="utf-8")
    (folder / "corpus.en").write_text("".join(f"{en}\n" for _, en in pairs), encoding="utf-8")
    (folder / "corpus.tsv").write_text("de\ten\n" + "".join(f"{de}\t{en}\n" for de, en in pairs), encoding="utf-8")
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"translation": {"de": de, "en": en}}, ensure_ascii=False) + "\n" for de, en in pairs),
        encoding="utf-8",
    )
    return {
        "lines": [folder / "corpus.de", folder / "corpus.en"],
        "tsv": [folder / "corpus.tsv"],
        "jsonl": [folder / "corpus.jsonl"],
    }


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 256 bytes and chunks of 7 pairs: every file spans many of both."""
    monkeypatch.setattr(line_stream, "BLOCK_BYTES", 256)
    monkeypatch.setattr(pair_stream, "CHUNK_PAIRS", 7)


def test_the_store_holds_the_tokenizer_ids_of_every_pair_in_all_three_forms(tmp_path: Path, small_blocks: None) -> None:
    pairs = sentence_pairs(300, seed=1)
    forms = write_forms(tmp_path, pairs)
    tokenizer = SubwordTokenizer.train_from_pairs(pairs, vocab_size=300, min_frequency=1)
    expected = TokenizerPair.joint(tokenizer).encode_pairs(pairs)
    for form, paths in forms.items():
        spec = PairCorpusSpec(PairFiles.of(paths, "de", "en"), valid=PairFiles.of(paths, "de", "en"))
        prepared = prepare_pairs(spec, tmp_path / f"prepared-{form}", TokenizerPair.joint(tokenizer), progress=False)
        store = TokenStore.open(tmp_path / f"prepared-{form}")
        indices = range(len(store))
        assert list(zip(store.rows("source", indices), store.rows("target", indices))) == expected, form
        assert prepared.validation_pairs == pairs, form
        assert store.ids("source", 0).dtype.itemsize == 2, form  # 300 ids fit in uint16
        manifest = prepared.manifest
        assert manifest["counts"]["train_pairs"] == len(pairs), form
        # The training files, then the validation files (here the same ones), each with its sha256.
        recorded = [(record["size"], record["sha256"]) for record in manifest["inputs"]]
        assert recorded == 2 * [(path.stat().st_size, sha256_of_file(path)) for path in paths], form


def test_streamed_pairs_equal_the_whole_file_reader(tmp_path: Path, small_blocks: None) -> None:
    pairs = sentence_pairs(200, seed=2)
    for form, paths in write_forms(tmp_path, pairs).items():
        files = PairFiles.of(paths, "de", "en")
        streamed = [pair for chunk in stream_pairs(files) for pair in chunk]
        assert streamed == read_pair_files(paths, "de", "en").pairs == pairs, form
        assert count_pairs(files) == len(pairs), form


def _refused(paths: list[Path], match: str) -> None:
    files = PairFiles.of(paths, "de", "en")
    with pytest.raises(ValueError, match=match):
        count_pairs(files)
        for _ in stream_pairs(files):
            pass


def test_a_bad_line_deep_in_a_streamed_file_is_refused_with_its_file_and_line(
    tmp_path: Path, small_blocks: None
) -> None:
    pairs = sentence_pairs(3000, seed=3)
    forms = write_forms(tmp_path, pairs)
    source = forms["lines"][0]

    lines = source.read_bytes().split(b"\n")
    lines[2716] = b"ein Hund \xff\xfe l\xc3"
    source.write_bytes(b"\n".join(lines))
    _refused(forms["lines"], rf"{source}: line 2717: expected UTF-8 text")

    lines[2716] = b"   "
    source.write_bytes(b"\n".join(lines))
    _refused(forms["lines"], rf"{source}: line 2717: expected a non-empty source sentence")

    source.write_bytes(b"\n".join(lines[:2716] + lines[2717:]))
    _refused(forms["lines"], r"same number of lines, got 2999 line\(s\) in .*corpus.de and 3000 line\(s\)")

    tsv = forms["tsv"][0]
    rows = tsv.read_text(encoding="utf-8").split("\n")
    rows[2500] = "nur eine Spalte"
    tsv.write_text("\n".join(rows), encoding="utf-8")
    _refused(forms["tsv"], rf"{tsv}: line 2501: expected 2 tab-separated fields")

    jsonl = forms["jsonl"][0]
    rows = jsonl.read_text(encoding="utf-8").split("\n")
    rows[1999] = '{"translation": {"de": "Hund"'
    jsonl.write_text("\n".join(rows), encoding="utf-8")
    _refused(forms["jsonl"], rf"{jsonl}: line 2000: expected one JSON object, got invalid JSON")


def test_a_json_array_is_refused_by_its_form_when_counted_not_counted_as_one_pair(tmp_path: Path) -> None:
    # A .json file is read as JSON Lines; one array of 100 pairs was counted as one pair, so that the carve
    # refused "1 training pair(s)", and only a --valid beside it showed the form.
    pairs = [{"de": f"Satz {number}", "en": f"sentence {number}"} for number in range(100)]
    array = tmp_path / "pairs.json"
    array.write_text(json.dumps(pairs), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(array))}: line 1: expected a JSON object, got list$"):
        count_pairs(PairFiles.of([array], "de", "en"))


def test_a_utf16_file_is_named_for_its_encoding_not_for_a_line_count_it_miscounts(tmp_path: Path) -> None:
    # A UTF-16 file's NUL after its last newline counts as one line more than its UTF-8 partner holds.
    forms = write_forms(tmp_path, [("Ein Hund läuft.", "A dog runs."), ("Zwei Kinder.", "Two children.")])
    source, _ = forms["lines"]
    text = source.read_text(encoding="utf-8")
    source.write_text(text, encoding="utf-16")  # with its byte-order mark, as editors save it
    _refused(forms["lines"], rf"{source}: line 1: expected UTF-8 text, .* starts with a UTF-16 byte-order mark")
    source.write_text(text, encoding="utf-16-le")  # without one: its first non-ASCII letter is no UTF-8
    _refused(forms["lines"], rf"{source}: line 1: expected UTF-8 text, got invalid byte\(s\) b'\\xe4'")


def test_ascii_text_in_utf16_without_a_byte_order_mark_is_refused_not_learned_with_its_nuls(tmp_path: Path) -> None:
    # Every byte of ASCII in UTF-16 is valid UTF-8 once the NUL beside it is read as a character;
    # both sides alike, their line counts agree, so only the NULs tell.
    forms = write_forms(tmp_path, [("A dog runs.", "Ein Hund rennt."), ("Two children.", "Zwei Kinder.")])
    for path in forms["lines"]:
        path.write_bytes(path.read_text(encoding="utf-8").encode("utf-16-le"))
    source = forms["lines"][0]
    _refused(forms["lines"], rf"{source}: line 1: expected text, got a NUL character .* at column 2; .* UTF-16 ")
    # One NUL in UTF-8 text (a corrupted file) is named by its line and column, with no word of UTF-16.
    source.write_bytes(b"A dog runs.\nTwo chil\x00dren.\n")
    forms["lines"][1].write_text("Ein Hund rennt.\nZwei Kinder.\n", encoding="utf-8")
    _refused(forms["lines"], rf"{source}: line 2: expected text, got a NUL character \(\\x00\) at column 9; remove it")


def test_a_failed_preparation_leaves_no_folder(tmp_path: Path) -> None:
    forms = write_forms(tmp_path, sentence_pairs(100, seed=4))
    target = forms["lines"][1]
    target.write_text(target.read_text(encoding="utf-8").replace("\n", "\n\n", 1), encoding="utf-8")
    with pytest.raises(ValueError, match="same number of lines"):
        prepare_pairs(PairCorpusSpec(PairFiles.of(forms["lines"], "de", "en")), tmp_path / "out", bpe=BPE)
    assert not (tmp_path / "out").exists()
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".out")] == []


def test_a_bad_validation_file_is_refused_before_the_bpe_is_learned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The BPE and the encoding pass take minutes at millions of pairs; a --valid file's fault is
    # known in the time the validation files take to read.
    forms = write_forms(tmp_path, sentence_pairs(100, seed=4))
    valid = tmp_path / "valid"
    valid.mkdir()
    (valid / "dev.de").write_text("Ein Hund.\nZwei Hunde.\nDrei Hunde.\n", encoding="utf-8")
    (valid / "dev.en").write_text("A dog.\nTwo dogs.\n", encoding="utf-8")

    def learned(*arguments: object) -> None:
        raise AssertionError("the BPE was learned before the validation files were read")

    monkeypatch.setattr(prepared_pairs_module, "_learn_tokenizers", learned)
    spec = PairCorpusSpec(
        PairFiles.of(forms["lines"], "de", "en"), valid=PairFiles.of([valid / "dev.de", valid / "dev.en"], "de", "en")
    )
    with pytest.raises(ValueError, match=r"got 3 line\(s\) in .*dev.de and 2 line\(s\) in .*dev.en"):
        prepare_pairs(spec, tmp_path / "out", bpe=BPE, progress=False)
    assert not (tmp_path / "out").exists()


def test_validation_pairs_that_are_training_pairs_too_are_counted_in_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pairs = sentence_pairs(100, seed=5)
    forms = write_forms(tmp_path, pairs)
    valid = tmp_path / "valid"
    valid.mkdir()
    new = [("Ein ganz neuer Satz.", "A WHOLLY NEW SENTENCE."), ("Noch einer.", "ONE MORE.")]
    validation = [pairs[40], *new, pairs[7], pairs[99]]
    valid_tsv = write_forms(valid, validation)["tsv"]
    caplog.set_level(logging.WARNING, logger="transformer_lab.data")
    spec = PairCorpusSpec(PairFiles.of(forms["lines"], "de", "en"), valid=PairFiles.of(valid_tsv, "de", "en"))
    prepared = prepare_pairs(spec, tmp_path / "out", bpe=BPE, progress=False)
    assert prepared.validation_pairs == validation  # kept as given: the warning only says what they are
    warnings = [record.getMessage() for record in caplog.records if "also training pairs" in record.getMessage()]
    assert len(warnings) == 1
    assert "corpus.tsv: 3 of the 5 validation pairs are also training pairs of" in warnings[0]
    assert repr(pairs[40][0]) in warnings[0]

    # Validation pairs of their own: nothing to say.
    caplog.clear()
    write_forms(valid, new)
    prepare_pairs(spec, tmp_path / "out-new", bpe=BPE, progress=False)
    assert not [record for record in caplog.records if "also training pairs" in record.getMessage()]


def test_a_cache_folder_given_with_a_tilde_is_under_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `--set data.cache_dir=~/cache` reaches the program unexpanded (no shell expands "~" after "key="),
    # and so does "~" in a config file or a quoted TRANSFORMER_LAB_CACHE.
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    spec = PairCorpusSpec(PairFiles.of(write_forms(tmp_path, sentence_pairs(30, seed=8))["lines"], "de", "en"))
    by_setting = prepared_pairs(spec, cache_root=Path("~/cache"), progress=False)
    assert by_setting.folder.parent == home / "cache"
    monkeypatch.setenv("TRANSFORMER_LAB_CACHE", "~/variable")
    by_variable = prepared_pairs(spec, progress=False)
    assert by_variable.folder.parent == home / "variable" / "prepared"
    assert list(work.iterdir()) == []  # was: a folder named "~" made in the working folder
    recorded = with_absolute_paths({"data": {"cache_dir": "~/cache"}})
    assert recorded["data"]["cache_dir"] == str(home / "cache")  # config.json names the folder used


def test_an_unusable_cache_variable_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    forms = write_forms(tmp_path, sentence_pairs(50, seed=6))
    run = tmp_path / "run"
    overrides = ["data.vocab_size=300", "train.max_steps=1", "train.progress_bar=false"]
    arguments = ["train", "translation", "--train", *map(str, forms["lines"]), "--out", str(run)]
    arguments += [item for override in overrides for item in ("--set", override)]
    expected = "TRANSFORMER_LAB_CACHE: expected a folder this user can write (or a path where one can be made), got"
    notes = tmp_path / "notes.txt"
    notes.write_text("not a folder\n", encoding="utf-8")
    for value, why in [
        (notes, "which is a file"),
        (notes / "cache", f"a path through the file {str(notes)!r}"),
    ]:
        monkeypatch.setenv("TRANSFORMER_LAB_CACHE", str(value))
        capsys.readouterr()
        assert main(arguments) == 2
        assert capsys.readouterr().err == f"transformer-lab train: error: {expected} {str(value)!r}, {why}\n"
        assert not run.exists() and notes.read_text(encoding="utf-8") == "not a folder\n"
    # A folder this user cannot write: a real one where the user can be refused, else refused as the kernel would.
    locked = tmp_path / "locked"
    locked.mkdir()
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        locked.chmod(0o555)
    else:
        real_mkdir = Path.mkdir

        def refuse(self: Path, *arguments: object, **keywords: object) -> None:
            if self.is_relative_to(locked):
                raise PermissionError(13, "Permission denied", str(self))
            real_mkdir(self, *arguments, **keywords)  # type: ignore[arg-type]

        monkeypatch.setattr(Path, "mkdir", refuse)
    monkeypatch.setenv("TRANSFORMER_LAB_CACHE", str(locked))
    spec = PairCorpusSpec(PairFiles.of(forms["lines"], "de", "en"))
    with pytest.raises(ValueError) as raised:
        prepared_pairs(spec, progress=False)
    locked.chmod(0o755)
    assert str(raised.value) == f"{expected} {str(locked)!r}, where writing failed: Permission denied"


def test_the_cache_reuses_an_unchanged_corpus_and_rebuilds_a_changed_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    forms = write_forms(tmp_path, sentence_pairs(200, seed=5))
    spec = PairCorpusSpec(PairFiles.of(forms["tsv"], "de", "en"), num_carved_validation=15, seed=3)
    cache = tmp_path / "cache"
    caplog.set_level(logging.INFO, logger="transformer_lab.data")
    first = prepared_pairs(spec, bpe=BPE, cache_root=cache, progress=False)
    assert len(first.validation_pairs) == 15 and len(first.store) == 185

    caplog.clear()
    again = prepared_pairs(spec, bpe=BPE, cache_root=cache, progress=False)
    assert "reusing the prepared corpus" in caplog.text
    assert again.folder == first.folder and again.validation_pairs == first.validation_pairs

    # Touched but unchanged: the sha256 decides, and it is reused.
    tsv = forms["tsv"][0]
    os.utime(tsv, ns=(tsv.stat().st_atime_ns, tsv.stat().st_mtime_ns + 10**9))
    caplog.clear()
    prepared_pairs(spec, bpe=BPE, cache_root=cache, progress=False)
    assert "reusing the prepared corpus" in caplog.text

    # The same size, other bytes: rebuilt, and the store holds the new text's ids.
    text = tsv.read_text(encoding="utf-8")
    changed = text.replace("Hund", "HUND")
    assert len(changed) == len(text) and changed != text
    tsv.write_text(changed, encoding="utf-8")
    caplog.clear()
    rebuilt = prepared_pairs(spec, bpe=BPE, cache_root=cache, progress=False)
    assert "preparing the corpus again" in caplog.text and "sha256 differs" in caplog.text
    assert rebuilt.folder == first.folder
    sources = [rebuilt.tokenizers.source.decode(row) for row in rebuilt.store.rows("source", range(185))]
    sources += [source for source, _ in rebuilt.validation_pairs]
    assert any("HUND" in source for source in sources) and not any("Hund" in source for source in sources)

    # Other BPE settings: rebuilt too.
    caplog.clear()
    prepared_pairs(spec, bpe=BpeSettings(vocab_size=280, min_frequency=1), cache_root=cache, progress=False)
    assert "preparing the corpus again" in caplog.text and "the settings differ" in caplog.text


def _edit_in_place(path: Path) -> None:
    """Other bytes, the same size: what an editor saving over the file does."""
    text = path.read_text(encoding="utf-8")
    changed = text.replace("Hund", "HUND")
    assert len(changed) == len(text) and changed != text
    path.write_text(changed, encoding="utf-8")


def test_a_file_edited_while_it_is_prepared_is_refused_and_nothing_is_kept(
    tmp_path: Path, small_blocks: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    forms = write_forms(tmp_path, sentence_pairs(200, seed=6))
    tsv = forms["tsv"][0]
    original = tsv.read_bytes()
    streamed = pair_stream.stream_lines

    def edited_after_the_first_block(
        path: str | os.PathLike[str], block_bytes: int | None = None, digest: ReadDigest | None = None
    ) -> object:
        # Only the pass that hashes what it reads: the one whose records the manifest keeps.
        for number, lines in enumerate(streamed(path, block_bytes, digest)):
            if number == 1 and digest is not None:
                _edit_in_place(Path(path))
            yield lines

    monkeypatch.setattr(pair_stream, "stream_lines", edited_after_the_first_block)
    spec = PairCorpusSpec(PairFiles.of(forms["tsv"], "de", "en"), num_carved_validation=15, seed=3)
    with pytest.raises(InputChangedError, match=rf"{tsv}: changed while it was read; nothing was kept"):
        prepare_pairs(spec, tmp_path / "out", bpe=BPE, progress=False)
    assert not (tmp_path / "out").exists()
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".out")] == []

    # The same through the cache: no entry is left to be reused by the next run.
    tsv.write_bytes(original)
    cache = tmp_path / "cache"
    with pytest.raises(InputChangedError, match="changed while it was read"):
        prepared_pairs(spec, bpe=BPE, cache_root=cache, progress=False)
    assert not cache.exists() or [path for path in cache.iterdir() if not path.name.startswith(".")] == []


def test_an_edit_that_restores_size_and_mtime_is_still_seen_on_reuse(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    forms = write_forms(tmp_path, sentence_pairs(200, seed=7))
    spec = PairCorpusSpec(PairFiles.of(forms["tsv"], "de", "en"), num_carved_validation=15, seed=3)
    cache = tmp_path / "cache"
    first = prepared_pairs(spec, bpe=BPE, cache_root=cache, progress=False)
    record = first.manifest["inputs"][0]
    tsv = forms["tsv"][0]
    assert record["size"] == tsv.stat().st_size and record["inode"] == tsv.stat().st_ino
    assert record["sha256"] == sha256_of_file(tsv)

    before = tsv.stat()
    _edit_in_place(tsv)
    os.utime(tsv, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert tsv.stat().st_size == before.st_size and tsv.stat().st_mtime_ns == before.st_mtime_ns

    # A prepared folder given as is (data.prepared_dir) is refused...
    with pytest.raises(ValueError, match=rf"{first.folder} is stale: {tsv} changed \(its sha256 differs\)"):
        CorpusIdentity("tokenizer").check_prepared(first.folder, first.manifest)
    # ...and the cache prepares it again.
    caplog.set_level(logging.INFO, logger="transformer_lab.data")
    rebuilt = prepared_pairs(spec, bpe=BPE, cache_root=cache, progress=False)
    assert "preparing the corpus again" in caplog.text and "sha256 differs" in caplog.text
    assert rebuilt.manifest["inputs"][0]["sha256"] == sha256_of_file(tsv)


def test_a_manifest_without_inode_or_ctime_is_checked_by_its_sha256(tmp_path: Path) -> None:
    forms = write_forms(tmp_path, sentence_pairs(50, seed=8))
    prepared = prepare_pairs(PairCorpusSpec(PairFiles.of(forms["tsv"], "de", "en")), tmp_path / "out", bpe=BPE)
    folder, manifest = prepared.folder, prepared.manifest
    old = [{key: record[key] for key in ("path", "size", "mtime_ns", "sha256")} for record in manifest["inputs"]]
    identity = CorpusIdentity("tokenizer")
    identity.check_prepared(folder, {**manifest, "inputs": old})
    _edit_in_place(forms["tsv"][0])
    with pytest.raises(ValueError, match="its sha256 differs"):
        identity.check_prepared(folder, {**manifest, "inputs": old})


def test_the_cache_serves_its_own_tokenizer_back_and_rebuilds_for_another_or_an_old_format(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    forms = write_forms(tmp_path, sentence_pairs(120, seed=8))
    spec = PairCorpusSpec(PairFiles.of(forms["lines"], "de", "en"), num_carved_validation=10, seed=2)
    cache = tmp_path / "cache"
    caplog.set_level(logging.INFO, logger="transformer_lab.data")
    learned = prepared_pairs(spec, bpe=BPE, cache_root=cache, progress=False)
    manifest = json.loads((learned.folder / "manifest.json").read_text(encoding="utf-8"))
    # All 110 training pairs but the one whose source sentence a validation pair repeats.
    assert manifest["counts"]["train_pairs_repeating_validation"] == 1
    assert manifest["description"]["tokenizer"] == "built" and manifest["tokenizer_sample_pairs"] == 109

    # A resumed run gives the tokenizer the cache learned: the same ids, reused.
    caplog.clear()
    resumed = prepared_pairs(spec, learned.tokenizers, bpe=BPE, cache_root=cache, progress=False)
    assert "reusing the prepared corpus" in caplog.text and resumed.folder == learned.folder

    # Another tokenizer: rebuilt with its ids, and recorded as given.
    other = TokenizerPair.joint(SubwordTokenizer.train_from_pairs(sentence_pairs(50, seed=9), vocab_size=280))
    caplog.clear()
    rebuilt = prepared_pairs(spec, other, bpe=BPE, cache_root=cache, progress=False)
    assert "preparing the corpus again" in caplog.text and "the tokenizer differs" in caplog.text
    assert rebuilt.tokenizers.files() == other.files()
    lines = spec.train.paths[0].read_text(encoding="utf-8").splitlines()
    stored = list(rebuilt.store.rows("source", range(len(rebuilt.store))))
    assert [other.source.encode(other.source.decode(row)) for row in stored] == [list(row) for row in stored]
    assert {other.source.decode(row) for row in stored} <= set(lines) and len(stored) == 109
    manifest = json.loads((rebuilt.folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["description"]["tokenizer"] == "given" and manifest["tokenizer_sample_pairs"] is None

    # Without a tokenizer again: a checkpoint's ids are not a learned BPE's, rebuilt.
    caplog.clear()
    prepared_pairs(spec, bpe=BPE, cache_root=cache, progress=False)
    assert "its tokenizer was a checkpoint's" in caplog.text

    # A manifest of the previous format is refused by its version and the corpus rebuilt.
    path = learned.folder / "manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text(encoding="utf-8")), "format_version": 1}), encoding="utf-8")
    caplog.clear()
    prepared_pairs(spec, bpe=BPE, cache_root=cache, progress=False)
    assert "its manifest is unreadable" in caplog.text and "expected format_version 2, got 1" in caplog.text


def test_training_pairs_repeating_a_carved_source_are_left_out_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, small_blocks: None
) -> None:
    # Every pair twice, once with another translation: a carved pair's source stood in training too, and
    # validation scored sentences the model had learned.
    distinct = [(f"{de} {number}", en) for number, (de, en) in enumerate(sentence_pairs(60, seed=4))]
    pairs = [*distinct, *[(de, en.lower()) for de, en in distinct]]
    forms = write_forms(tmp_path, pairs)
    spec = PairCorpusSpec(PairFiles.of(forms["lines"], "de", "en"), num_carved_validation=10, seed=3)
    caplog.set_level(logging.INFO, logger="transformer_lab.data")
    prepared = prepare_pairs(spec, tmp_path / "prepared", bpe=BPE, progress=False)
    held = sorted(random.Random(3).sample(range(len(pairs)), 10))
    assert prepared.validation_pairs == [pairs[index] for index in held]
    carved_sources = {pairs[index][0] for index in held}
    kept = [pair for index, pair in enumerate(pairs) if index not in held and pair[0] not in carved_sources]
    source = prepared.tokenizers.source
    assert [source.decode(row) for row in prepared.store.rows("source", range(len(prepared.store)))] == [
        de for de, _ in kept
    ]
    left_out = len(pairs) - len(held) - len(kept)
    assert left_out >= 5  # most carved pairs' twins are in training
    assert prepared.report["train_pairs_repeating_validation"] == left_out
    assert f"left out {left_out} training pairs whose source sentence is a held-out validation pair's" in caplog.text


def test_a_training_pair_is_traced_to_its_line_past_the_pairs_left_out_and_in_a_folder_that_kept_them(
    tmp_path: Path,
) -> None:
    distinct = [(f"{de} {number}", en) for number, (de, en) in enumerate(sentence_pairs(60, seed=4))]
    pairs = [*distinct, *[(de, en.lower()) for de, en in distinct]]
    forms = write_forms(tmp_path, pairs)
    spec = PairCorpusSpec(PairFiles.of(forms["lines"], "de", "en"), num_carved_validation=10, seed=3)
    folder = prepare_pairs(spec, tmp_path / "prepared", bpe=BPE, progress=False).folder
    held = set(random.Random(3).sample(range(len(pairs)), 10))
    carved_sources = {pairs[index][0] for index in held}
    lines = [number for number, (de, _) in enumerate(pairs, 1) if number - 1 not in held and de not in carved_sources]
    for row in (0, 50, len(lines) - 1):
        assert f"line {lines[row]} of" in str(prepared_pairs_module.training_pair_origin(folder, row))
    # A folder prepared before the repeats were left out (4 input checks recorded) holds them: traced as kept.
    manifest_path = folder / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest_path.write_text(json.dumps({**manifest, "input_checks": 4}), encoding="utf-8")
    kept_before = [number for number in range(1, len(pairs) + 1) if number - 1 not in held]
    assert f"line {kept_before[50]} of" in str(prepared_pairs_module.training_pair_origin(folder, 50))


@pytest.mark.parametrize("tokenizer_given", [False, True])
def test_a_corpus_of_one_pair_copied_leaves_nothing_to_train_and_says_so(tmp_path: Path, tokenizer_given: bool) -> None:
    forms = write_forms(tmp_path, [("ein Hund", "a dog")] * 30)
    spec = PairCorpusSpec(PairFiles.of(forms["lines"], "de", "en"), num_carved_validation=3)
    tokenizers = TokenizerPair.joint(SubwordTokenizer.train_from_pairs([("ein Hund", "a dog")], vocab_size=300))
    with pytest.raises(ValueError) as refused:
        prepare_pairs(spec, tmp_path / "out", tokenizers if tokenizer_given else None, bpe=BPE, progress=False)
    assert str(refused.value) == (
        "data.valid_files: expected validation files, or training pairs other than the held-out ones, got 30 pairs "
        "whose source sentences the 3 held-out pairs all repeat (validation would score sentences the model learned, "
        "so they are left out of training); give validation files (data.valid_files) or more varied pairs"
    )
    assert not (tmp_path / "out").exists()


def test_the_batches_from_the_store_equal_the_batches_of_the_lists(tmp_path: Path) -> None:
    pairs = sentence_pairs(400, seed=6)
    forms = write_forms(tmp_path, pairs)
    spec = PairCorpusSpec(PairFiles.of(forms["lines"], "de", "en"), num_carved_validation=40, seed=9)
    prepared = prepare_pairs(spec, tmp_path / "prepared", bpe=BPE, progress=False)
    mapped = open_prepared_pairs(tmp_path / "prepared").store
    held = set(random.Random(9).sample(range(len(pairs)), 40))
    carved_sources = {pairs[index][0] for index in held}
    kept = [pair for index, pair in enumerate(pairs) if index not in held and pair[0] not in carved_sources]
    encoded = prepared.tokenizers.encode_pairs(kept)
    for shards in (1, 2):
        for shard in range(shards):
            expected = [
                collate_pairs([encoded[index] for index in batch], PAD_ID, BOS_ID, EOS_ID)
                for batch in token_budget_batches(collated_lengths(encoded), 64, True, 4, 3, shards, shard)
            ]
            lazy = epoch_pair_batches(mapped, pair_length_table(mapped), 64, 4, 3, shards, shard)
            assert len(lazy) == len(expected)
            for ours, theirs in zip(lazy, expected):
                assert torch.equal(ours.src_ids, theirs.src_ids)
                assert torch.equal(ours.tgt_in_ids, theirs.tgt_in_ids)
                assert torch.equal(ours.tgt_out_ids, theirs.tgt_out_ids)


GROWTH_SCRIPT = """
import sys
from transformer_lab.data import line_stream, pair_stream
from transformer_lab.data.pair_stream import PairFiles
from transformer_lab.data.prepared_pairs import BpeSettings, PairCorpusSpec, pairs_kind
# Blocks and chunks far smaller than the files, as they are beside a real corpus.
line_stream.BLOCK_BYTES = 1 << 15
pair_stream.CHUNK_PAIRS = 500
spec = PairCorpusSpec(PairFiles.of([sys.argv[1], sys.argv[2]], "de", "en"))
pairs_kind(spec, bpe=BpeSettings(vocab_size=300, min_frequency=1, sample=2000), progress=False).prepare(sys.argv[3])
# VmHWM: this process's own peak (ru_maxrss would keep the forking parent's across exec).
print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""


def test_preparing_a_corpus_ten_times_larger_barely_grows_the_peak_memory(tmp_path: Path) -> None:
    generator = random.Random(7)
    peaks = {}
    for count in (20_000, 200_000):
        pairs = [
            (f"{a} {b} {index}", f"{b} {a} {index}")
            for index, (a, b) in enumerate(generator.sample(WORDS, 2) for _ in range(count))
        ]
        (tmp_path / f"{count}.de").write_text("".join(f"{de}\n" for de, _ in pairs), encoding="utf-8")
        (tmp_path / f"{count}.en").write_text("".join(f"{en}\n" for _, en in pairs), encoding="utf-8")
        files = [str(tmp_path / f"{count}.de"), str(tmp_path / f"{count}.en"), str(tmp_path / f"prepared-{count}")]
        result = subprocess.run(
            [sys.executable, "-c", GROWTH_SCRIPT, *files],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")},
        )
        peaks[count] = int(result.stdout.split()[-1]) * 1024
    # Reading everything into lists costs kilobytes a pair (180,000 more pairs: > 1 GB); the
    # streamed pass holds a few blocks and chunks whatever the size: under 50 bytes a pair.
    assert peaks[200_000] - peaks[20_000] < 180_000 * 50, peaks
