"""Tests for transformer_lab.data.download and download_multi30k, against a real HTTP server.

The server runs on 127.0.0.1 (a free port, a thread) and serves gzip files the test
writes; nothing is fetched from outside.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import http.server
import inspect
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.data.loopback import Server, serve_folder, serving
from transformer_lab.data import download
from transformer_lab.data.ag_news import AG_NEWS_TRAIN_MD5, download_ag_news
from transformer_lab.data.download import download_file, partial_path
from transformer_lab.data.multi30k import (
    MULTI30K_DEFAULT_SPLITS,
    MULTI30K_EXTRA_TEST_SPLITS,
    MULTI30K_FOLDER,
    MULTI30K_MAX_BYTES,
    MULTI30K_SHA256,
    MULTI30K_SPLITS,
    download_multi30k,
    load_multi30k,
)
from transformer_lab.folders import FolderWriteError
from transformer_lab.training.run.stop_signal import Terminated, raise_on_sigterm

FILES = {
    "train.de": "Ein Mann fährt Fahrrad.\nZwei Hunde spielen.\n",
    "train.en": "A man rides a bike.\nTwo dogs play.\n",
    "val.de": "Eine Frau liest.\n",
    "val.en": "A woman reads.\n",
}

# Stand-ins for the later official test sets (the real files are not on this team's machines).
EXTRA_FILES = {
    "test_2017_flickr.de": "Ein Hund rennt.\nZwei Kinder lachen.\n",
    "test_2017_flickr.en": "A dog runs.\nTwo children laugh.\n",
    "test_2017_mscoco.de": "Ein Zug fährt.\n",
    "test_2017_mscoco.en": "A train moves.\n",
    "test_2018_flickr.de": "Eine Katze schläft.\nEin Mann kocht.\nDrei Vögel fliegen.\n",
    "test_2018_flickr.en": "A cat sleeps.\nA man cooks.\nThree birds fly.\n",
}

# The sha256 of the decompressed official files, as published with them.
PUBLISHED_SHA256 = {
    "test_2017_flickr.de": "c3078bc3b36808bf9d20eb2347ed6137016179ef59ec0d2b9b8ecc3fb2880081",
    "test_2017_flickr.en": "ce1450ddc5ab0834502579d77a170849952e15a2938b34cc503bdc25ebb4fb98",
    "test_2017_mscoco.de": "58277df3c75f92f7145a11b910b553d1cf82c439249d4dc237c899609eafac22",
    "test_2017_mscoco.en": "43051fdfa86fd5395182e718a94ca67b1b227b9f7c79596ff0f6b813216981d2",
    "test_2018_flickr.de": "39fcc8b3331d76fb42d648d019c6898b0d5e58baac87bc2a0bb93f44ec8db207",
    "test_2018_flickr.en": "4e585c2dd525911a6ea7730e9d0b516239af3f1b1ffae6a2130223cfb639f25e",
}


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    root = tmp_path / "served"
    root.mkdir()
    for name, text in FILES.items():
        (root / f"{name}.gz").write_bytes(gzip.compress(text.encode("utf-8")))
    with serve_folder(root) as served:
        yield served


def leftovers(folder: Path) -> list[str]:
    """Temporary files a download may have left behind."""
    return sorted(path.name for path in folder.iterdir() if path.name.endswith(".part"))


def test_download_multi30k_from_loopback_server(server: Server, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    hashes = {name: sha256(text) for name, text in FILES.items()}
    folder = download_multi30k(cache, base_url=server.base_url, splits=["train", "val"], expected_sha256=hashes)
    assert folder == cache / "multi30k"
    for name, text in FILES.items():
        assert (folder / name).read_text(encoding="utf-8") == text
    assert sorted(server.requests) == sorted(f"/{name}.gz" for name in FILES)
    assert leftovers(folder) == []
    assert load_multi30k("train", data_dir=cache) == [
        ("Ein Mann fährt Fahrrad.", "A man rides a bike."),
        ("Zwei Hunde spielen.", "Two dogs play."),
    ]
    # A second call finds every file with its hash and asks the server for nothing.
    download_multi30k(cache, base_url=server.base_url, splits=["train", "val"], expected_sha256=hashes)
    assert len(server.requests) == len(FILES)


def test_checksum_mismatch_names_file_and_hashes_and_leaves_nothing(server: Server, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    wrong = "0" * 64
    hashes = {"val.de": sha256(FILES["val.de"]), "val.en": wrong}
    with pytest.raises(ValueError) as error:
        download_multi30k(cache, base_url=server.base_url, splits=["val"], expected_sha256=hashes)
    message = str(error.value)
    assert "val.en" in message and wrong in message and sha256(FILES["val.en"]) in message
    folder = cache / "multi30k"
    assert (folder / "val.de").is_file()  # the good file before it stays
    assert not (folder / "val.en").exists()
    assert leftovers(folder) == []


def test_a_corrupted_cached_file_is_replaced(server: Server, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    destination = tmp_path / "cache" / "val.en"
    destination.parent.mkdir()
    destination.write_text("tampered\n", encoding="utf-8")
    download_file(f"{server.base_url}val.en.gz", destination, sha256(FILES["val.en"]), gunzip=True)
    assert destination.read_text(encoding="utf-8") == FILES["val.en"]
    assert "downloading it again (the file is kept until a verified copy replaces it)" in caplog.text
    assert sorted(path.name for path in destination.parent.iterdir()) == ["val.en"]  # no part, no lock file


def test_the_unfinished_parts_of_a_file_already_present_are_removed(server: Server, tmp_path: Path) -> None:
    destination = tmp_path / "cache" / "val.en"
    destination.parent.mkdir()
    destination.write_text(FILES["val.en"], encoding="utf-8")  # put there by hand after a download stopped
    partial_path(destination).write_bytes(b"the first half of the body")
    (destination.parent / ".val.en.abcd1234.part").write_bytes(b"half decompressed")
    download_file(f"{server.base_url}val.en.gz", destination, sha256(FILES["val.en"]), gunzip=True)
    assert sorted(path.name for path in destination.parent.iterdir()) == ["val.en"]
    assert destination.read_text(encoding="utf-8") == FILES["val.en"]


def test_a_bad_local_file_stays_until_a_verified_copy_replaces_it(server: Server, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    hashes = {name: sha256(text) for name, text in FILES.items()}
    folder = download_multi30k(cache, base_url=server.base_url, splits=["val"], expected_sha256=hashes)
    with (folder / "val.de").open("a", encoding="utf-8") as file:
        file.write("a line of someone's own\n")
    tampered = (folder / "val.de").read_bytes()
    with serve_folder(server.root) as stopped:
        pass  # its port no longer answers: the mirror is down
    with pytest.raises(ConnectionError, match="download failed"):
        download_multi30k(cache, base_url=stopped.base_url, splits=["val"], expected_sha256=hashes)
    assert (folder / "val.de").read_bytes() == tampered  # nothing better arrived, so nothing was taken away
    assert sorted(path.name for path in folder.iterdir()) == ["val.de", "val.en"]
    download_multi30k(cache, base_url=server.base_url, splits=["val"], expected_sha256=hashes)
    assert (folder / "val.de").read_text(encoding="utf-8") == FILES["val.de"]


def test_a_part_left_by_a_download_killed_while_decompressing_is_removed_by_the_next(
    server: Server, tmp_path: Path
) -> None:
    destination = tmp_path / "cache" / "val.de"
    script = (
        "import os, shutil, signal, sys\n"
        "from transformer_lab.data import download\n"
        "def killed(url, compressed, plain, max_bytes):\n"
        "    plain.write(b'half of it')\n"
        "    plain.flush()\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "download._gunzip = killed\n"
        "download.download_file(sys.argv[1], sys.argv[2], sys.argv[3], gunzip=True, progress=False)\n"
    )
    source = Path(__file__).resolve().parents[2] / "src"
    arguments = [f"{server.base_url}val.de.gz", str(destination), sha256(FILES["val.de"])]
    killed = subprocess.run(
        [sys.executable, "-c", script, *arguments], env={**os.environ, "PYTHONPATH": str(source)}, check=False
    )
    assert killed.returncode == -signal.SIGKILL
    folder = destination.parent
    (orphan,) = [name for name in leftovers(folder) if name != partial_path(destination).name]
    assert re.fullmatch(r"\.val\.de\.[a-z0-9_]{8}\.part", orphan)
    older = folder / ".val.de.k3j_x8a2.part"  # the name an earlier version's decompression gave its part
    older.write_bytes(b"older")
    another = folder / ".val.en.0123abcd.part"  # another file's part: not this download's to remove
    another.write_bytes(b"not ours")
    download_file(*arguments, gunzip=True, progress=False)
    assert destination.read_text(encoding="utf-8") == FILES["val.de"]
    # The orphans gone, and the lock file the killed download held too.
    assert sorted(path.name for path in folder.iterdir()) == [another.name, "val.de"]


def test_a_disk_that_fills_during_the_body_names_the_file_not_the_connection(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC while the body is written is the file's write refused, not "download interrupted"."""
    real_open = open

    class FullDisk:
        def __init__(self, *args: object, **kwargs: object) -> None:
            self.file = real_open(*args, **kwargs)  # type: ignore[call-overload]

        def __enter__(self) -> FullDisk:
            return self

        def __exit__(self, *exception: object) -> None:
            self.file.close()

        def write(self, data: bytes) -> int:
            self.file.write(data[:2])  # some of it fits
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(download, "open", FullDisk, raising=False)
    destination = tmp_path / "cache" / "val.en"
    with pytest.raises(FolderWriteError) as raised:
        download_file(f"{server.base_url}val.en.gz", destination, sha256(FILES["val.en"]), gunzip=True)
    assert raised.value.errno == errno.ENOSPC
    assert str(raised.value) == (
        f"could not write '{destination}' (No space left on device, ENOSPC); the files complete before it are kept"
    )
    assert not destination.exists()
    assert partial_path(destination).read_bytes() == (server.root / "val.en.gz").read_bytes()[:2]  # kept to resume


def test_a_folder_under_the_file_name_is_refused_naming_it_before_any_request(server: Server, tmp_path: Path) -> None:
    destination = tmp_path / "cache" / "val.en"
    (destination / "notes").mkdir(parents=True)
    with pytest.raises(
        ValueError, match=r"val\.en: expected a file to download \(or nothing there yet\), got a folder"
    ):
        download_file(f"{server.base_url}val.en.gz", destination, sha256(FILES["val.en"]), gunzip=True)
    assert server.requests == [] and (destination / "notes").is_dir()


def test_a_named_pipe_under_the_file_name_is_refused_not_waited_on(server: Server, tmp_path: Path) -> None:
    # Hashing it to see whether the file was already there blocked for ever, waiting for a writer.
    destination = tmp_path / "cache" / "val.en"
    destination.parent.mkdir()
    os.mkfifo(destination)
    with pytest.raises(ValueError, match=r"val\.en: expected a file to download .*, got something that is not a "):
        download_file(f"{server.base_url}val.en.gz", destination, sha256(FILES["val.en"]), gunzip=True)
    assert server.requests == []


def test_plain_download_without_gunzip(server: Server, tmp_path: Path) -> None:
    body = (server.root / "val.de.gz").read_bytes()
    destination = download_file(
        f"{server.base_url}val.de.gz", tmp_path / "out" / "val.de.gz", hashlib.sha256(body).hexdigest()
    )
    assert destination.read_bytes() == body


def test_missing_remote_file_and_bad_gzip(server: Server, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"missing\.gz.*404"):
        download_file(f"{server.base_url}missing.gz", tmp_path / "missing", "a" * 64, gunzip=True)
    (server.root / "plain.gz").write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match=r"plain\.gz: expected gzip-compressed data"):
        download_file(f"{server.base_url}plain.gz", tmp_path / "plain", "a" * 64, gunzip=True)
    assert not (tmp_path / "missing").exists() and not (tmp_path / "plain").exists()
    assert leftovers(tmp_path) == []


def test_a_body_or_its_gzip_expansion_past_the_bound_is_refused_as_it_is_written(
    server: Server, tmp_path: Path
) -> None:
    # 65 MiB of zeros in a 65 KB gzip body: past Multi30k's bound, refused without writing it all.
    (server.root / "val.de.gz").write_bytes(gzip.compress(bytes(MULTI30K_MAX_BYTES + (1 << 20)), compresslevel=1))
    with pytest.raises(ValueError, match=rf"val\.de\.gz: expected at most {MULTI30K_MAX_BYTES:,} bytes decompressed"):
        download_multi30k(tmp_path / "data", base_url=server.base_url, splits=["val"], progress=False)
    folder = tmp_path / "data" / MULTI30K_FOLDER
    assert not (folder / "val.de").exists() and leftovers(folder) == []
    body = (server.root / "val.en.gz").read_bytes()
    with pytest.raises(ValueError, match=r"expected at most 10 bytes downloaded \(max_bytes\)"):
        download_file(f"{server.base_url}val.en.gz", tmp_path / "x", hashlib.sha256(body).hexdigest(), max_bytes=10)
    assert not (tmp_path / "x").exists() and leftovers(tmp_path) == []
    with pytest.raises(ValueError, match="max_bytes"):
        download_file(f"{server.base_url}val.en.gz", tmp_path / "x", "a" * 64, max_bytes=0)


def test_bad_arguments_download_nothing(server: Server, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no sha256|sha256 for every file"):
        download_multi30k(tmp_path, base_url=server.base_url, splits=["val"], expected_sha256={"val.de": "a" * 64})
    with pytest.raises(ValueError, match="split must be one of"):
        download_multi30k(tmp_path, base_url=server.base_url, splits=["dev"])
    with pytest.raises(ValueError, match="expected_sha256 must be a sha256"):
        download_file(f"{server.base_url}val.de.gz", tmp_path / "x", "not-a-hash")
    with pytest.raises(ValueError, match="url must start with"):
        download_file("ftp://example.invalid/x.gz", tmp_path / "x", "a" * 64)
    assert server.requests == []


def test_official_table_covers_every_split() -> None:
    assert sorted(MULTI30K_SHA256) == sorted(
        f"{split}.{language}" for split in MULTI30K_SPLITS for language in ("de", "en")
    )
    assert all(len(value) == 64 and value == value.lower() for value in MULTI30K_SHA256.values())
    assert len(set(MULTI30K_SHA256.values())) == len(MULTI30K_SHA256)


def test_shipped_hashes_of_the_later_test_sets_are_the_published_ones() -> None:
    assert {name: MULTI30K_SHA256[name] for name in PUBLISHED_SHA256} == PUBLISHED_SHA256
    assert sorted(PUBLISHED_SHA256) == sorted(
        f"{split}.{language}" for split in MULTI30K_EXTRA_TEST_SPLITS for language in ("de", "en")
    )


def serve_extra_files(server: Server) -> dict[str, str]:
    """Put the stand-in later test sets on the server; their decompressed sha256 by file name."""
    for name, text in EXTRA_FILES.items():
        (server.root / f"{name}.gz").write_bytes(gzip.compress(text.encode("utf-8")))
    return {name: sha256(text) for name, text in EXTRA_FILES.items()}


def test_download_the_later_test_sets_when_asked(server: Server, tmp_path: Path) -> None:
    hashes = serve_extra_files(server)
    cache = tmp_path / "cache"
    folder = download_multi30k(
        cache, base_url=server.base_url, splits=list(MULTI30K_EXTRA_TEST_SPLITS), expected_sha256=hashes
    )
    assert sorted(server.requests) == sorted(f"/{name}.gz" for name in EXTRA_FILES)
    for name, text in EXTRA_FILES.items():
        assert (folder / name).read_text(encoding="utf-8") == text
    assert leftovers(folder) == []
    assert load_multi30k("test_2017_mscoco", data_dir=cache) == [("Ein Zug fährt.", "A train moves.")]
    assert load_multi30k("test_2018_flickr", cache, source_language="en", target_language="de")[2] == (
        "Three birds fly.",
        "Drei Vögel fliegen.",
    )
    assert len(load_multi30k("test_2017_flickr", data_dir=cache)) == 2
    # One split alone, asked again: everything is cached, nothing is fetched.
    download_multi30k(cache, base_url=server.base_url, splits=["test_2018_flickr"], expected_sha256=hashes)
    assert len(server.requests) == len(EXTRA_FILES)


def test_the_default_download_is_unchanged_and_skips_the_later_test_sets(server: Server, tmp_path: Path) -> None:
    assert inspect.signature(download_multi30k).parameters["splits"].default == MULTI30K_DEFAULT_SPLITS
    assert MULTI30K_DEFAULT_SPLITS == ("train", "val", "test_2016_flickr")
    defaults = {
        **FILES,
        "test_2016_flickr.de": "Ein Boot.\n",
        "test_2016_flickr.en": "A boat.\n",
    }
    for name, text in defaults.items():
        (server.root / f"{name}.gz").write_bytes(gzip.compress(text.encode("utf-8")))
    hashes = {**{name: sha256(text) for name, text in defaults.items()}, **serve_extra_files(server)}
    folder = download_multi30k(tmp_path / "cache", base_url=server.base_url, expected_sha256=hashes)
    assert sorted(server.requests) == sorted(f"/{name}.gz" for name in defaults)
    assert sorted(path.name for path in folder.iterdir()) == sorted(defaults)


def test_a_file_that_disagrees_with_the_shipped_hash_is_deleted_and_named(server: Server, tmp_path: Path) -> None:
    serve_extra_files(server)  # stand-ins, so their hashes are not the official ones
    cache = tmp_path / "cache"
    with pytest.raises(ValueError) as error:
        download_multi30k(cache, base_url=server.base_url, splits=["test_2018_flickr"])
    message = str(error.value)
    assert "test_2018_flickr.de" in message
    assert PUBLISHED_SHA256["test_2018_flickr.de"] in message and sha256(EXTRA_FILES["test_2018_flickr.de"]) in message
    assert "deleted" in message
    folder = cache / "multi30k"
    assert not (folder / "test_2018_flickr.de").exists() and not (folder / "test_2018_flickr.en").exists()
    assert leftovers(folder) == []
    assert server.requests == ["/test_2018_flickr.de.gz"]  # it stops at the first bad file
    with pytest.raises(FileNotFoundError, match=r"splits=\['test_2018_flickr'\]"):
        load_multi30k("test_2018_flickr", data_dir=cache)


def test_md5_checked_download_for_sources_without_a_sha256(server: Server, tmp_path: Path) -> None:
    body = '"1","a","b"\n'
    (server.root / "train.csv").write_text(body, encoding="utf-8")
    md5 = hashlib.md5(body.encode("utf-8")).hexdigest()
    destination = download_file(server.base_url + "train.csv", tmp_path / "cache" / "train.csv", expected_md5=md5)
    assert destination.read_text(encoding="utf-8") == body
    with pytest.raises(ValueError, match="md5 mismatch: expected 0{32}"):
        download_file(server.base_url + "train.csv", tmp_path / "other" / "train.csv", expected_md5="0" * 32)
    assert not (tmp_path / "other" / "train.csv").exists() and leftovers(tmp_path / "other") == []
    with pytest.raises(ValueError, match="expected exactly one checksum"):
        download_file(server.base_url + "train.csv", tmp_path / "x.csv", expected_sha256="0" * 64, expected_md5=md5)
    with pytest.raises(ValueError, match="expected_md5 must be a md5 of 32 hex digits"):
        download_file(server.base_url + "train.csv", tmp_path / "x.csv", expected_md5="abc")


def test_download_ag_news_checks_the_training_file_against_the_published_md5(server: Server, tmp_path: Path) -> None:
    (server.root / "train.csv").write_text('"1","not","the release"\n', encoding="utf-8")
    with pytest.raises(ValueError, match=f"train.csv .*md5 mismatch: expected {AG_NEWS_TRAIN_MD5}"):
        download_ag_news(tmp_path / "cache", base_url=server.base_url, splits=("train",))
    assert server.requests == ["/train.csv"]
    assert not (tmp_path / "cache" / "ag_news" / "train.csv").exists()
    with pytest.raises(ValueError, match="splits must hold only train, test"):
        download_ag_news(tmp_path / "cache", base_url=server.base_url, splits=("validation",))


SHARED_COUPLET_TEST = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "couplet" / "test"


@pytest.mark.skipif(not SHARED_COUPLET_TEST.is_dir(), reason=f"the wb14123 test files are not in {SHARED_COUPLET_TEST}")
def test_download_couplet_test_checks_the_pinned_hashes(server: Server, tmp_path: Path) -> None:
    from transformer_lab.data.couplet import download_couplet_test, load_couplets

    for name in ("in.txt", "out.txt"):  # the real files, served from the loopback server
        (server.root / name).write_bytes((SHARED_COUPLET_TEST / name).read_bytes())
    cache = tmp_path / "cache"
    folder = download_couplet_test(cache, base_url=server.base_url)
    assert folder == cache / "couplet" / "test"
    assert len(load_couplets("test", cache).pairs) == 4000
    # A changed file is refused by its sha256 and leaves nothing behind.
    (server.root / "in.txt").write_bytes(b"tampered\n")
    with pytest.raises(ValueError, match="sha256"):
        download_couplet_test(tmp_path / "other", base_url=server.base_url)
    assert not (tmp_path / "other" / "couplet" / "test" / "in.txt").exists()


class RangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves `files` (path -> bytes) with HTTP Range support; can cut a body short, once.

    `cut_after` bytes into the next full-body answer the connection closes although the
    Content-Length promised more: what a dropped network looks like to the client.
    """

    files: dict[str, bytes]
    ranges: list[str | None]
    cut_after: list[int]
    # What a 416 answer (a range that starts at or past the end) sends as Content-Range;
    # nginx and Apache send "bytes */SIZE", the RFC's form.
    unsatisfiable_range: str | None = "bytes */{size}"

    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        body = self.files.get(self.path)
        self.ranges.append(self.headers.get("Range"))
        if body is None:
            self.send_error(404)
            return
        start = 0
        requested = self.headers.get("Range")
        if requested:
            start = int(requested.removeprefix("bytes=").rstrip("-"))
            if start >= len(body):
                self.send_response(416)
                if self.unsatisfiable_range is not None:
                    self.send_header("Content-Range", self.unsatisfiable_range.format(size=len(body)))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        if self.cut_after and not requested:
            self.wfile.write(body[: self.cut_after.pop()])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body[start:])

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (base signature)
        pass


@pytest.fixture
def range_server() -> Iterator[tuple[str, type[RangeHandler]]]:
    handler = type("Handler", (RangeHandler,), {"files": {}, "ranges": [], "cut_after": []})
    with serving(handler) as base_url:
        yield base_url, handler


def test_an_interrupted_download_resumes_where_it_stopped(
    range_server: tuple[str, type[RangeHandler]], tmp_path: Path
) -> None:
    base_url, handler = range_server
    body = bytes(range(256)) * 4096  # 1 MiB
    handler.files["/big.bin"] = body
    handler.cut_after.append(300_000)
    destination = tmp_path / "data" / "big.bin"
    expected = hashlib.sha256(body).hexdigest()
    with pytest.raises(ConnectionError, match=r"interrupted.*300000 bytes are kept.*resumes") as error:
        download_file(f"{base_url}/big.bin", destination, expected)
    assert "\n" not in str(error.value)
    assert not destination.exists()  # half a file is never taken for the whole
    assert partial_path(destination).stat().st_size == 300_000
    download_file(f"{base_url}/big.bin", destination, expected)
    assert handler.ranges == [None, "bytes=300000-"]  # the second request asked only for the rest
    assert destination.read_bytes() == body
    assert leftovers(destination.parent) == []


class UnmeasuredCutHandler(RangeHandler):
    """Sends the whole file with no Content-Length (until the connection closes), cut after ``cut_after``
    bytes once; a Range request gets the rest, measured."""

    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        if self.headers.get("Range") or not self.cut_after:
            super().do_GET()
            return
        self.ranges.append(None)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(self.files[self.path][: self.cut_after.pop()])


def test_a_gzip_body_of_no_length_cut_short_is_kept_and_resumed_not_deleted_as_bad_data(tmp_path: Path) -> None:
    # Without a length, a cut connection ends the body as a whole one would; the gzip stream's missing end
    # said it, but the body was read as bad data and deleted, so the next call began again from nothing.
    text = "".join(f"{number * 7919 % 100003} {number}\n" for number in range(5000))  # 60 KB, gzip about 25 KB
    body = gzip.compress(text.encode("utf-8"))
    assert len(body) > 900
    handler = type("Handler", (UnmeasuredCutHandler,), {"files": {"/t.gz": body}, "ranges": [], "cut_after": [900]})
    destination = tmp_path / "train.de"
    with serving(handler) as base_url:
        url = f"{base_url}/t.gz"
        with pytest.raises(ConnectionError) as error:
            download_file(url, destination, sha256(text), gunzip=True)
        assert str(error.value) == (
            f"{url}: download interrupted (the body ended inside its gzip stream, and the server sent no length "
            f"to tell a cut connection from a short file); 900 bytes are kept in {partial_path(destination)} and "
            "the same command resumes from there"
        )
        assert partial_path(destination).read_bytes() == body[:900] and not destination.exists()
        download_file(url, destination, sha256(text), gunzip=True)
    assert handler.ranges == [None, "bytes=900-"]
    assert destination.read_text(encoding="utf-8") == text
    assert leftovers(tmp_path) == []


def test_a_measured_gzip_body_that_ends_early_is_bad_data(
    range_server: tuple[str, type[RangeHandler]], tmp_path: Path
) -> None:
    # With its length sent and received whole, a gzip stream without its end is the file's fault: no resume can mend it.
    base_url, handler = range_server
    handler.files["/short.gz"] = gzip.compress(b"hello\n" * 1000)[:-12]
    with pytest.raises(
        ValueError, match=r"short\.gz: expected gzip-compressed data, got data that does not decompress"
    ):
        download_file(f"{base_url}/short.gz", tmp_path / "short", sha256("hello\n" * 1000), gunzip=True)
    assert leftovers(tmp_path) == [] and not (tmp_path / "short").exists()


@pytest.mark.parametrize(
    ("signal_number", "raised"),
    [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Terminated)],
    ids=["SIGINT", "SIGTERM"],
)
def test_a_download_stopped_while_decompressing_keeps_its_body_and_the_next_only_decompresses(
    range_server: tuple[str, type[RangeHandler]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    signal_number: int,
    raised: type[BaseException],
) -> None:
    base_url, handler = range_server
    body = gzip.compress(FILES["train.de"].encode("utf-8") * 1000)
    handler.files["/train.de.gz"] = body
    destination = tmp_path / "data" / "train.de"
    expected = sha256(FILES["train.de"] * 1000)

    def stopped(url: str, compressed: object, plain: IO[bytes], max_bytes: int) -> None:
        plain.write(b"half of it")
        plain.flush()
        os.kill(os.getpid(), signal_number)  # Ctrl-C, or SIGTERM as the command line takes it
        threading.Event().wait(5)  # the handler raises here, in the main thread

    with monkeypatch.context() as patched:
        patched.setattr(download, "_gunzip", stopped)
        with raise_on_sigterm(), pytest.raises(raised):
            download_file(f"{base_url}/train.de.gz", destination, expected, gunzip=True, progress=False)
    assert not destination.exists()
    # The decompressed part is removed; the body, received whole, is kept for the next call.
    assert leftovers(destination.parent) == [partial_path(destination).name]
    assert partial_path(destination).read_bytes() == body
    download_file(f"{base_url}/train.de.gz", destination, expected, gunzip=True, progress=False)
    # The second call asked for the bytes after the body, got 416 with the body's size, and downloaded nothing.
    assert handler.ranges == [None, f"bytes={len(body)}-"]
    assert destination.read_text(encoding="utf-8") == FILES["train.de"] * 1000
    assert leftovers(destination.parent) == []


def test_a_kept_body_that_is_the_whole_file_is_checked_not_downloaded_again(
    range_server: tuple[str, type[RangeHandler]], tmp_path: Path
) -> None:
    """A 416 whose Content-Range gives the kept size as the full size: the body is whole; its hash decides."""
    base_url, handler = range_server
    body = b"the server's bytes\n" * 100
    handler.files["/file.txt"] = body
    destination = tmp_path / "file.txt"
    partial_path(destination).write_bytes(body)  # left by a call stopped while it hashed
    download_file(f"{base_url}/file.txt", destination, hashlib.sha256(body).hexdigest())
    assert handler.ranges == [f"bytes={len(body)}-"]
    assert destination.read_bytes() == body and leftovers(tmp_path) == []
    # Whole but wrong (same size, other bytes): the hash check deletes it, as for any body.
    other = tmp_path / "other.txt"
    partial_path(other).write_bytes(b"X" * len(body))
    with pytest.raises(ValueError, match="sha256 mismatch"):
        download_file(f"{base_url}/file.txt", other, hashlib.sha256(body).hexdigest())
    assert not other.exists() and leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("kept", "unsatisfiable_range"),
    [
        (b"a longer file's bytes, " * 100, "bytes */{size}"),  # more than the file: not its prefix
        (b"the server's bytes\n" * 100, None),  # the full size not given: nothing says it is whole
        (b"the server's bytes\n" * 100, "bytes 0-10/*"),  # not the form that gives it
    ],
    ids=["longer-than-the-file", "no-content-range", "another-content-range"],
)
def test_a_416_that_does_not_say_the_kept_body_is_whole_restarts_the_download(
    range_server: tuple[str, type[RangeHandler]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kept: bytes,
    unsatisfiable_range: str | None,
) -> None:
    base_url, handler = range_server
    body = b"the server's bytes\n" * 100
    handler.files["/file.txt"] = body
    monkeypatch.setattr(handler, "unsatisfiable_range", unsatisfiable_range)
    destination = tmp_path / "file.txt"
    partial_path(destination).write_bytes(kept)
    download_file(f"{base_url}/file.txt", destination, hashlib.sha256(body).hexdigest())
    assert handler.ranges == [f"bytes={len(kept)}-", None]
    assert destination.read_bytes() == body and leftovers(tmp_path) == []


class StallingHandler(http.server.BaseHTTPRequestHandler):
    """Sends the first 300,000 bytes of a 1 MiB body, then stalls without closing: a connection that hangs."""

    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        self.send_response(200)
        self.send_header("Content-Length", str(1 << 20))
        self.end_headers()
        self.wfile.write(bytes(300_000))
        self.wfile.flush()
        threading.Event().wait(5)  # past the client's timeout

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (base signature)
        pass


def test_the_bytes_that_arrived_before_a_connection_stalls_are_kept(tmp_path: Path) -> None:
    destination = tmp_path / "big.bin"
    with serving(StallingHandler) as base_url:
        with pytest.raises(ConnectionError, match=r"interrupted .* 300000 bytes are kept"):
            download_file(f"{base_url}/big.bin", destination, "0" * 64, timeout=1)
    # Kept as they arrived, not lost with a chunk that waited to fill a whole MiB.
    assert partial_path(destination).stat().st_size == 300_000


class AlignedRangeHandler(RangeHandler):
    """Answers a range with 206 from the block it starts in (``align`` bytes; 0: from the file's start)."""

    align = 0

    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        body = self.files[self.path]
        requested = self.headers.get("Range")
        if not requested:
            super().do_GET()  # which records the request
            return
        self.ranges.append(requested)
        asked = int(requested.removeprefix("bytes=").rstrip("-"))
        start = asked - asked % self.align if self.align else 0
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        self.wfile.write(body[start:])


@pytest.mark.parametrize(("align", "requests"), [(0, ["bytes=5000-"]), (4096, ["bytes=5000-", None])])
def test_a_part_sent_from_another_place_than_the_kept_bytes_end_is_not_appended_to_them(
    tmp_path: Path, align: int, requests: list[str | None]
) -> None:
    # A 206 whose Content-Range starts before the kept bytes end (the file's start, or a block's) was appended
    # after them: the body failed its hash and was deleted, kept bytes and all.
    body = bytes(range(256)) * 400
    handler = type("Handler", (AlignedRangeHandler,), {"files": {"/f.bin": body}, "ranges": [], "cut_after": []})
    handler.align = align
    destination = tmp_path / "f.bin"
    partial_path(destination).write_bytes(body[:5000])
    with serving(handler) as base_url:
        download_file(f"{base_url}/f.bin", destination, hashlib.sha256(body).hexdigest())
    assert handler.ranges == requests  # from the file's start it is the whole file; else asked for again whole
    assert destination.read_bytes() == body
    assert leftovers(tmp_path) == []


class PortalHandler(http.server.BaseHTTPRequestHandler):
    """Answers every request, Range or not, with the same small HTML page and 200: a captive portal."""

    page = b"<!DOCTYPE html><html><body>Sign in to continue</body></html>"

    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's name)
        pass


class UnmeasuredPortalHandler(PortalHandler):
    """The same page with no Content-Length (a generated page, sent until the connection closes)."""

    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.end_headers()
        self.wfile.write(self.page)


@pytest.mark.parametrize(
    ("handler", "answer"),
    [
        (PortalHandler, f"an answer of {len(PortalHandler.page)} bytes for the whole file, fewer than those kept"),
        (UnmeasuredPortalHandler, "an HTML page for the whole file"),
    ],
)
def test_a_whole_answer_that_is_no_file_leaves_the_kept_bytes_as_they_were(
    tmp_path: Path, handler: type[http.server.BaseHTTPRequestHandler], answer: str
) -> None:
    # A sign-in page answering a resume with 200 was written from the start over the kept bytes, then
    # failed its check and was deleted: a large partial download lost to a page of 60 bytes. A page of no
    # length (generated, sent in chunks) has no size to compare: its type says it.
    kept = bytes(range(256)) * 40
    destination = tmp_path / "f.bin"
    partial_path(destination).write_bytes(kept)
    with serving(handler) as base_url, pytest.raises(ConnectionError) as error:
        url = f"{base_url}/f.bin"
        download_file(url, destination, hashlib.sha256(kept + b"rest").hexdigest())
    assert str(error.value) == (
        f"{url}: expected the rest of the file after the 10240 bytes kept in {partial_path(destination)}, got "
        f"{answer}, so not the file (a proxy's or a sign-in page?); the kept bytes are left as they were and the "
        "same command resumes from there"
    )
    assert partial_path(destination).read_bytes() == kept and not destination.exists()


class LoopHandler(http.server.BaseHTTPRequestHandler):
    """Redirects every request to itself."""

    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        self.send_response(302)
        self.send_header("Location", self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's name)
        pass


def test_a_redirect_loop_is_one_line_from_the_api_too(tmp_path: Path) -> None:
    # urllib's reason spans three lines; the command line joined them, the Python API passed them on.
    with serving(LoopHandler) as base_url, pytest.raises(ConnectionError) as error:
        url = f"{base_url}/f.bin"
        download_file(url, tmp_path / "f.bin", sha256("never\n"))
    assert str(error.value).startswith(f"{url}: download failed with HTTP 302 The HTTP server returned a redirect")
    assert "\n" not in str(error.value) and "  " not in str(error.value)
    assert not (tmp_path / "f.bin").exists()


def test_a_resumed_body_that_fails_its_hash_is_deleted(
    range_server: tuple[str, type[RangeHandler]], tmp_path: Path
) -> None:
    base_url, handler = range_server
    handler.files["/file.txt"] = b"the server's bytes\n" * 100
    destination = tmp_path / "file.txt"
    partial_path(destination).write_bytes(b"bytes from another file")  # a stale part
    with pytest.raises(ValueError, match="sha256 mismatch"):
        download_file(f"{base_url}/file.txt", destination, hashlib.sha256(b"the server's bytes\n" * 100).hexdigest())
    assert handler.ranges == ["bytes=23-"]
    assert not destination.exists() and leftovers(tmp_path) == []
    # With the bad part gone, the next call fetches the whole file and it checks out.
    download_file(f"{base_url}/file.txt", destination, hashlib.sha256(b"the server's bytes\n" * 100).hexdigest())
    assert destination.read_bytes() == b"the server's bytes\n" * 100


@pytest.mark.parametrize("gunzip", [False, True], ids=["plain", "gzip"])
def test_an_html_page_or_an_empty_body_sent_for_the_file_is_named_as_one(
    range_server: tuple[str, type[RangeHandler]], tmp_path: Path, gunzip: bool
) -> None:
    # A proxy's, a rate limit's or a sign-in page sent with 200 was "sha256 mismatch" (a damaged file, a
    # mirror's wrong copy?) or, for a gzip file, "data that does not decompress (Not a gzipped file (b'<!'))".
    base_url, handler = range_server
    handler.files["/train.de.gz"] = b"\n  <!DOCTYPE HTML>\n<html><head><title>Rate limit exceeded</title></head></html>"
    destination = tmp_path / "train.de"
    with pytest.raises(ValueError) as error:
        download_file(f"{base_url}/train.de.gz", destination, sha256("Ein Mann.\n"), gunzip=gunzip)
    assert str(error.value) == (
        f"train.de (from {base_url}/train.de.gz): expected the file, got an HTML page "
        "('<!DOCTYPE HTML> <html><head><title>Rate limit exceeded</t...'): the server, a proxy or a sign-in page "
        f"answered with a page instead; the downloaded file was deleted, {destination} was not written"
    )
    assert not destination.exists() and leftovers(tmp_path) == []
    # An empty body was "sha256 mismatch: expected ..., got e3b0c442...", the hash of nothing.
    handler.files["/train.de.gz"] = b""
    with pytest.raises(ValueError) as error:
        download_file(f"{base_url}/train.de.gz", destination, sha256("Ein Mann.\n"), gunzip=gunzip)
    assert str(error.value) == (
        f"train.de (from {base_url}/train.de.gz): expected the file, got an empty body (0 bytes); "
        f"{destination} was not written"
    )
    assert not destination.exists() and leftovers(tmp_path) == []
    # Any other body that fails its check is still said as a mismatch.
    handler.files["/train.de.gz"] = b"<p>not a page's start</p>"
    with pytest.raises(ValueError, match="does not decompress" if gunzip else "sha256 mismatch"):
        download_file(f"{base_url}/train.de.gz", destination, sha256("Ein Mann.\n"), gunzip=gunzip)


def test_a_body_part_that_is_a_symbolic_link_is_removed_never_written_through(
    range_server: tuple[str, type[RangeHandler]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    base_url, handler = range_server
    body = b"the server's bytes\n" * 100
    handler.files["/file.txt"] = body
    precious = tmp_path / "notes.txt"
    precious.write_bytes(b"a user's notes\n")
    destination = tmp_path / "data" / "file.txt"
    destination.parent.mkdir()
    partial_path(destination).symlink_to(precious)
    download_file(f"{base_url}/file.txt", destination, hashlib.sha256(body).hexdigest())
    assert precious.read_bytes() == b"a user's notes\n"  # the link's target is never written
    assert handler.ranges == [None]  # the link's size is no offset to resume from
    assert destination.read_bytes() == body and not destination.is_symlink()
    assert not os.path.lexists(partial_path(destination))
    assert "got a symbolic link; removed, never followed" in caplog.text


def test_git_blob_ids_check_files_as_git_does(range_server: tuple[str, type[RangeHandler]], tmp_path: Path) -> None:
    base_url, handler = range_server
    handler.files["/in.txt"] = "晚 风 摇 树 \n".encode()
    # `printf '晚 风 摇 树 \n' | git hash-object --stdin`
    blob = hashlib.sha1(b"blob %d\0" % len(handler.files["/in.txt"]) + handler.files["/in.txt"]).hexdigest()
    destination = download_file(f"{base_url}/in.txt", tmp_path / "in.txt", expected_git_blob=blob)
    assert destination.read_bytes() == handler.files["/in.txt"]  # accepted: the hand-made id is what it checks
    with pytest.raises(ValueError, match=r"git-blob mismatch: expected 0{40}"):
        download_file(f"{base_url}/in.txt", tmp_path / "other.txt", expected_git_blob="0" * 40)


def test_a_file_address_of_a_named_pipe_is_refused_not_waited_on(tmp_path: Path) -> None:
    # Was: the read of the pipe waited for a writer for ever; --timeout applies to connections, not to files.
    pipe = tmp_path / "mirror" / "train.de"
    pipe.parent.mkdir()
    os.mkfifo(pipe)

    def writer_that_ends_it() -> None:  # should the check fail, the read ends with the test, not never
        time.sleep(10)
        with contextlib.suppress(OSError):  # no reader: the check held
            os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))

    threading.Thread(target=writer_that_ends_it, daemon=True).start()
    destination = tmp_path / "data" / "train.de"
    with pytest.raises(ValueError) as error:
        download_file(pipe.as_uri(), destination, sha256("Ein Mann.\n"), timeout=1)
    assert str(error.value) == (
        f"{pipe.as_uri()}: expected a file to download, got a named pipe or a device, which may never end"
    )
    assert not destination.exists() and leftovers(destination.parent) == []
    # A plain file at a file:// address is still downloaded.
    source = tmp_path / "mirror" / "val.de"
    source.write_text("Ein Mann.\n", encoding="utf-8")
    download_file(source.as_uri(), destination, sha256("Ein Mann.\n"))
    assert destination.read_text(encoding="utf-8") == "Ein Mann.\n"
