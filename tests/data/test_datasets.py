"""`transformer-lab download` and the dataset builders, against a loopback HTTP server.

The server serves a mirror folder (`HOST/PATH` for every pinned `https://HOST/PATH`);
nothing is fetched from outside. Where the real files are needed for their pinned hashes
(Multi30k, the AG News subset), they come from the team's data folder beside the checkout
and the test is skipped without it.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import os
import pickle
import socket
import urllib.error
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import pytest

from tests.data.loopback import serve_folder
from transformer_lab.cli import main
from transformer_lab.data import couplet, download
from transformer_lab.data.ag_news import AG_NEWS_URL, resolve_ag_news_dir
from transformer_lab.data.ag_news_subset import (
    AG_NEWS_SUBSET_SHA256,
    AG_NEWS_SUBSET_URL,
    download_ag_news_subset,
    rewrite_kaggle_rows,
)
from transformer_lab.data.couplet import load_couplets
from transformer_lab.data.couplet_machine import (
    COUPLET_MACHINE_FILES,
    build_train_couplet_machine,
    couplet_machine_pairs,
    download_train_couplet_machine,
    spaced,
)
from transformer_lab.data.dataset_folder import DATA_ENVIRONMENT_VARIABLE
from transformer_lab.data.datasets import MIRROR_ENVIRONMENT_VARIABLE, download_dataset, mirrored
from transformer_lab.data.multi30k import MULTI30K_DEFAULT_SPLITS, MULTI30K_URL, resolve_multi30k_dir
from transformer_lab.folders import FolderWriteError

TEAM_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def put(mirror: Path, url: str, body: bytes) -> None:
    """Place `body` where the mirror serves `url`."""
    path = mirror / urllib.parse.unquote(urllib.parse.urlsplit(mirrored(url, "http://x")).path.lstrip("/"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)


def part_files(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.name.endswith(".part"))


def test_the_mirror_maps_host_and_path() -> None:
    url = "https://raw.githubusercontent.com/owner/repo/0123abcd/data/x.txt"
    assert mirrored(url, None) == url
    assert (
        mirrored(url, "http://127.0.0.1:8000/")
        == "http://127.0.0.1:8000/raw.githubusercontent.com/owner/repo/0123abcd/data/x.txt"
    )
    with pytest.raises(ValueError, match=r"mirror: expected an http://, https:// or file:// address, got 'ftp://x'"):
        download_dataset("multi30k", mirror="ftp://x")


def test_an_unknown_dataset_name_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["download", "wikipedia", "--to", str(tmp_path)])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "invalid choice: 'wikipedia'" in error and "multi30k" in error
    with pytest.raises(ValueError, match=r"dataset: expected one of multi30k, ag-news, couplets, got 'wikipedia'"):
        download_dataset("wikipedia", tmp_path)
    with pytest.raises(ValueError, match="wb14123_train: expected only with the dataset 'couplets'"):
        download_dataset("multi30k", tmp_path, wb14123_train=True)
    assert list(tmp_path.iterdir()) == []


def test_the_command_names_the_option_of_a_bad_download_argument(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "train.de"
    a_file.write_text("Ein Mann\n", encoding="utf-8")
    cases = [
        (
            ["--to", str(tmp_path / "data"), "--mirror", "notaurl"],
            "--mirror: expected an http://, https:// or file:// address, got 'notaurl'",
        ),
        # Found by urllib once the download started: a network failure "to resume from", or no option named.
        (
            ["--to", str(tmp_path / "data"), "--mirror", "http://127.0.0.1:abc"],
            "--mirror: expected an http://, https:// or file:// address, got 'http://127.0.0.1:abc' "
            "(Port could not be cast to integer value as 'abc')",
        ),
        (
            ["--to", str(tmp_path / "data"), "--mirror", "http://[::1"],
            "--mirror: expected an http://, https:// or file:// address, got 'http://[::1' (Invalid IPv6 URL)",
        ),
        (
            ["--to", str(tmp_path / "data"), "--mirror", "http://"],
            "--mirror: expected an http://, https:// or file:// address, got 'http://' (no host)",
        ),
        # Was: "download failed (Name or service not known)" for the host "user:secret@127.0.0.1", password shown twice.
        (
            ["--to", str(tmp_path / "data"), "--mirror", "http://user:secret@127.0.0.1:8801/"],
            "--mirror: expected an http://, https:// or file:// address, got 'http://user:***@127.0.0.1:8801/' "
            "(it holds a user name or password, which the download does not send; give a mirror without them)",
        ),
        # Was: the files' paths went into the query ("/?q=1/raw.githubusercontent.com/...").
        (
            ["--to", str(tmp_path / "data"), "--mirror", "http://127.0.0.1:8801/?q=1"],
            "--mirror: expected an http://, https:// or file:// address, got 'http://127.0.0.1:8801/?q=1' "
            "(it holds a query (?...) or a fragment (#...), after which the files' paths would be lost)",
        ),
        (
            ["--to", str(tmp_path / "data"), "--wb14123-train"],
            "--wb14123-train: expected only with the dataset 'couplets', got it with 'multi30k'",
        ),
        (["--to", str(a_file)], f"--to: expected a folder, got the file '{a_file}'"),
        (
            ["--to", str(a_file / "data")],
            f"--to: expected a folder, got a path inside the file '{a_file}': '{a_file / 'data'}'",
        ),
    ]
    for options, message in cases:
        assert main(["download", "multi30k", *options]) == 2
        assert capsys.readouterr().err.splitlines() == [f"transformer-lab download: error: {message}"]
    assert sorted(tmp_path.iterdir()) == [a_file]


def test_an_empty_to_is_refused_not_read_as_the_current_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["download", "couplets", "--to", "", "--mirror", "http://127.0.0.1:9/", "--timeout", "3"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "transformer-lab download: error: argument --to: expected a path, got an empty one "
        "(see transformer-lab download --help)"
    ]
    assert list(tmp_path.iterdir()) == []


def test_the_python_api_names_its_keywords(tmp_path: Path) -> None:
    a_file = tmp_path / "train.de"
    a_file.write_text("Ein Mann\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^to: expected a folder, got the file '.*train.de'$"):
        download_dataset("multi30k", a_file)
    with pytest.raises(ValueError, match=r"^mirror: expected an http://, https:// or file:// address, got 'x'$"):
        download_dataset("multi30k", tmp_path, mirror="x")


def test_a_checksum_mismatch_is_one_line_and_keeps_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror = tmp_path / "mirror"
    put(mirror, f"{AG_NEWS_URL}/train.csv", b'"1","not","the release"\n')
    data = tmp_path / "data"
    with serve_folder(mirror) as server:
        monkeypatch.setenv(MIRROR_ENVIRONMENT_VARIABLE, server.base_url)
        assert main(["download", "ag-news", "--to", str(data)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert error.startswith("transformer-lab download: error: train.csv (from http://127.0.0.1:")
    assert "md5 mismatch: expected b1a00f826fdfbd249f79597b59e1dc12" in error and "was not written" in error
    assert not (data / "ag_news" / "train.csv").exists() and part_files(data) == []


def test_a_missing_file_on_the_server_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    with serve_folder(tmp_path / "empty") as server:
        assert main(["download", "multi30k", "--to", str(tmp_path / "data"), "--mirror", server.base_url]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "train.de.gz: expected a file to download, got HTTP 404" in error


@pytest.mark.skipif(
    not (TEAM_DATA / "multi30k" / "train.de").is_file(), reason=f"the Multi30k files are not in {TEAM_DATA}"
)
def test_a_new_user_downloads_trains_and_translates_without_naming_a_data_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("TRANSFORMER_LAB_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    mirror = tmp_path / "mirror"
    names = [f"{split}.{language}" for split in MULTI30K_DEFAULT_SPLITS for language in ("de", "en")]
    for name in names:
        put(mirror, f"{MULTI30K_URL}/{name}.gz", gzip.compress((TEAM_DATA / "multi30k" / name).read_bytes()))
    with serve_folder(mirror) as server:
        monkeypatch.setenv(MIRROR_ENVIRONMENT_VARIABLE, server.base_url)
        # Before the download, training says the one command to run.
        assert main(["train", "translation", "--out", "runs/mt"]) == 2
        assert "run `transformer-lab download multi30k` to fetch it" in capsys.readouterr().err
        assert main(["download", "multi30k"]) == 0
        printed = capsys.readouterr().out
        assert len(server.requests) == len(names)
        assert main(["download", "multi30k"]) == 0  # everything is there: nothing is fetched again
        assert len(server.requests) == len(names)
    data = home / ".cache" / "transformer_lab" / "data" / "multi30k"
    assert f"multi30k: {data}" in printed and "next: transformer-lab train translation --out" in printed
    for name in names:
        assert (data / name).read_bytes() == (TEAM_DATA / "multi30k" / name).read_bytes()
    assert part_files(data) == []
    tiny = [
        "data.num_train=200", "data.num_validation=20", "data.vocab_size=400", "model.d_model=32",
        "model.nhead=2", "model.num_encoder_layers=1", "model.num_decoder_layers=1", "model.dim_feedforward=64",
        "train.epochs=1", "train.warmup_steps=10", "train.cooldown_steps=0", "train.progress_bar=false",
        "decode.max_len=20",
    ]  # fmt: skip
    command = ["train", "translation", "--out", "runs/mt"]
    assert main([*command, *(argument for setting in tiny for argument in ("--set", setting))]) == 0
    # evaluate finds the same folder: the validation split, scored without naming it.
    assert main(["evaluate", "translation", "--checkpoint", "runs/mt", "--split", "val", "--beam", "1"]) == 0
    assert "BLEU" in capsys.readouterr().out
    from transformer_lab import Translator

    translations = Translator("runs/mt").translate(["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen."])
    assert len(translations) == 2 and all(isinstance(text, str) for text in translations)


SOURCES = {
    "cldldq+zgdl+zgdldq+zgdlw.txt": ["风 来 \t=>\t雨 去 ", "山 高\t=>\t水 长", "风 来 \t=>\t雨 去 "],
    "mannual.txt": ["天 \t=>\t地 ", "一 二 三\t=>\t四 五", "\t=>\t"],
    "qts_for_duilian.txt": ["春 眠\t=>\t秋 思", "白 日\t=>\t青 天"],
}


def test_the_couplet_machine_rules() -> None:
    test_lines = ["青 天 ", "月 明 "]  # wb14123's format: spaced, a trailing space
    build = couplet_machine_pairs(SOURCES, test_lines)
    # Spaces go; unequal or empty pairs, the repeated pair and the pair with a test line are left out.
    assert build.pairs == [("风来", "雨去"), ("山高", "水长"), ("天", "地"), ("春眠", "秋思")]
    assert (build.read, build.empty_or_unequal, build.duplicates, build.in_test_set) == (8, 2, 1, 1)
    assert spaced("风来") == "风 来 "
    with pytest.raises(ValueError, match=r"mannual\.txt: line 2: expected 'upper<TAB>=><TAB>lower', got '一 二'"):
        couplet_machine_pairs({"mannual.txt": ["天\t=>\t地", "一 二"]}, [])


def test_the_couplet_machine_split_is_downloaded_built_and_checked(tmp_path: Path) -> None:
    files = {name: SOURCES.get(name, ["花 开\t=>\t叶 落"]) for name in COUPLET_MACHINE_FILES}
    bodies = {name: "".join(line + "\n" for line in lines).encode() for name, lines in files.items()}
    mirror = tmp_path / "mirror"
    for name, body in bodies.items():
        (mirror / name).parent.mkdir(parents=True, exist_ok=True)
        (mirror / name).write_bytes(body)
    data = tmp_path / "data"
    (data / "couplet" / "test").mkdir(parents=True)
    (data / "couplet" / "test" / "in.txt").write_text("青 天 \n", encoding="utf-8")
    (data / "couplet" / "test" / "out.txt").write_text("白 日 \n", encoding="utf-8")
    expected_in = "风 来 \n山 高 \n天 \n春 眠 \n" + "花 开 \n"
    expected_out = "雨 去 \n水 长 \n地 \n秋 思 \n" + "叶 落 \n"
    hashes = {"in.txt": hashlib.sha256(expected_in.encode()).hexdigest(), "out.txt": "0" * 64}
    sources = {name: hashlib.sha256(body).hexdigest() for name, body in bodies.items()}
    with serve_folder(mirror) as server:
        with pytest.raises(ValueError, match=r"out\.txt: sha256 mismatch: expected 0{64}.*nothing was written"):
            download_train_couplet_machine(data, server.base_url, source_sha256=sources, expected_sha256=hashes)
        split = data / "couplet" / "train_couplet_machine"
        assert not (split / "in.txt").exists() and part_files(data) == []
        # The '+' of the file names travels quoted.
        assert "/cldldq%2Bzgdl%2Bzgdldq%2Bzgdlw.txt" in server.requests
        hashes["out.txt"] = hashlib.sha256(expected_out.encode()).hexdigest()
        fetched = len(server.requests)
        download_train_couplet_machine(data, server.base_url, source_sha256=sources, expected_sha256=hashes)
        assert len(server.requests) == fetched  # the sources were kept and checked, not fetched again
        assert (split / "in.txt").read_text(encoding="utf-8") == expected_in
        assert (split / "out.txt").read_text(encoding="utf-8") == expected_out
        assert load_couplets("train_couplet_machine", data).pairs[-1] == ("花开", "叶落")
        # Built and checked: no network at all (nothing listens on port 9).
        download_train_couplet_machine(data, "http://127.0.0.1:9/", source_sha256=sources, expected_sha256=hashes)


def test_the_wb14123_training_pairs_are_checked_by_their_git_blob_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bodies = {"in.txt": "风 来 \n".encode(), "out.txt": "雨 去 \n".encode()}
    blobs = {name: hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest() for name, body in bodies.items()}
    monkeypatch.setattr(couplet, "WB14123_TRAIN_GIT_BLOB", blobs)
    for name, body in bodies.items():
        (tmp_path / "mirror" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "mirror" / name).write_bytes(body)
    with serve_folder(tmp_path / "mirror") as server:
        folder = couplet.download_wb14123_train(tmp_path / "data", server.base_url)
    assert load_couplets("train", tmp_path / "data").pairs == [("风来", "雨去")]
    assert folder == tmp_path / "data" / "couplet" / "train"


@pytest.mark.skipif(
    not (TEAM_DATA / "ag_news" / "train_subset").is_dir(), reason=f"the AG News subset is not in {TEAM_DATA}"
)
def test_the_ag_news_subset_is_rebuilt_byte_for_byte(tmp_path: Path) -> None:
    source = (TEAM_DATA / "ag_news" / "train_subset" / "validation_12k_kaggle_format.csv").read_bytes()
    put(tmp_path / "mirror", AG_NEWS_SUBSET_URL, source)
    with serve_folder(tmp_path / "mirror") as server:
        subset = download_ag_news_subset(tmp_path / "ag_news", mirrored(AG_NEWS_SUBSET_URL, server.base_url))
    assert subset.read_bytes() == (TEAM_DATA / "ag_news" / "train_subset" / "train_subset_12k.csv").read_bytes()
    assert hashlib.sha256(subset.read_bytes()).hexdigest() == AG_NEWS_SUBSET_SHA256
    bad = tmp_path / "bad.csv"
    bad.write_text("label,text\n1,x\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.csv: line 1: expected the header Class Index,Title,Description"):
        rewrite_kaggle_rows(bad)


@pytest.mark.skipif(not (TEAM_DATA / "couplet").is_dir(), reason=f"the data folder is not in {TEAM_DATA}")
def test_the_pinned_hashes_are_those_of_the_verified_files() -> None:
    from transformer_lab.data.ag_news import AG_NEWS_SHA256
    from transformer_lab.data.ag_news_subset import KAGGLE_FILE, KAGGLE_SHA256, SUBSET_FILE, SUBSET_FOLDER
    from transformer_lab.data.couplet import COUPLET_TEST_SHA256
    from transformer_lab.data.couplet_machine import SPLIT, TRAIN_COUPLET_MACHINE_SHA256
    from transformer_lab.data.download import sha256_of_file

    pinned = {
        **{f"ag_news/{name}": sha256 for name, sha256 in AG_NEWS_SHA256.items()},
        f"ag_news/{SUBSET_FOLDER}/{SUBSET_FILE}": AG_NEWS_SUBSET_SHA256,
        f"ag_news/{SUBSET_FOLDER}/{KAGGLE_FILE}": KAGGLE_SHA256,
        **{f"couplet/test/{name}": sha256 for name, sha256 in COUPLET_TEST_SHA256.items()},
        **{f"couplet/{SPLIT}/{name}": sha256 for name, sha256 in TRAIN_COUPLET_MACHINE_SHA256.items()},
    }
    assert {path: sha256_of_file(TEAM_DATA / path) for path in pinned} == pinned


def test_offline_the_download_names_the_next_step_and_leaves_no_empty_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise urllib.error.URLError(socket.gaierror(-2, "Name or service not known"))

    real_urlopen = download.urllib.request.urlopen
    monkeypatch.setattr(download.urllib.request, "urlopen", no_network)
    data = tmp_path / "data" / "nested"
    assert main(["download", "couplets", "--to", str(data)]) == 1
    failed, next_step = capsys.readouterr().err.splitlines()
    assert failed.startswith("transformer-lab download: failed: https://") and "Name or service not known" in failed
    assert next_step.startswith("next: if this machine cannot reach the sources, fetch them from a copy with --mirror")
    assert f"${MIRROR_ENVIRONMENT_VARIABLE}" in next_step and f"copy the files into {data / 'couplet'} " in next_step
    assert list(tmp_path.iterdir()) == []  # not data/, nested/, couplet/ nor couplet/test/

    # With a mirror that does not answer (a closed port), the next step is to check it.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        mirror = f"http://127.0.0.1:{closed.getsockname()[1]}"
    monkeypatch.setattr(download.urllib.request, "urlopen", real_urlopen)
    assert main(["download", "multi30k", "--to", str(data), "--mirror", mirror]) == 1
    failed, next_step = capsys.readouterr().err.splitlines()
    assert failed.startswith(f"transformer-lab download: failed: {mirror}/raw.githubusercontent.com/")
    assert next_step.startswith(f"next: check that {mirror} serves each https://HOST/PATH as {mirror}/HOST/PATH;")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_download_keeps_the_folders_it_did_not_create_and_those_with_a_kept_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    (data / "multi30k").mkdir(parents=True)  # there before: stays, although empty
    with pytest.raises(ConnectionError):
        download_dataset("multi30k", data, mirror="http://127.0.0.1:9", timeout=5)
    assert [path.name for path in data.iterdir()] == ["multi30k"]

    def cut_short(*args: object, **kwargs: object) -> None:
        partial = download.partial_path(data / "couplet" / "test" / "in.txt")
        partial.write_bytes(b"half")  # what an interrupted transfer keeps for the next run
        raise ConnectionError("interrupted")

    monkeypatch.setattr(download, "_copy_response", cut_short)
    with pytest.raises(ConnectionError):
        download_dataset("couplets", data)
    assert part_files(data) == [download.partial_path(data / "couplet" / "test" / "in.txt")]


@pytest.mark.parametrize(
    ("code", "said"), [(errno.EROFS, "Read-only file system, EROFS"), (errno.EPERM, "Operation not permitted, EPERM")]
)
def test_a_data_folder_the_system_refuses_is_one_line_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, code: int, said: str
) -> None:
    """A read-only disk (or /sys) under --to is the folder's one line, exit 2, before any request."""

    def refused(path: Path, *args: object, **kwargs: object) -> None:
        raise (PermissionError if code == errno.EPERM else OSError)(code, os.strerror(code), str(path))

    monkeypatch.setattr(Path, "mkdir", refused)
    data = tmp_path / "data"
    # A closed port: were anything requested, the command would fail on the connection instead.
    options = ["--mirror", "http://127.0.0.1:9/", "--timeout", "3"]
    assert main(["download", "multi30k", "--to", str(data), *options]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"transformer-lab download: error: --to: could not write '{data / 'multi30k'}' ({said}); nothing was downloaded"
    ]
    # The default folder (from $TRANSFORMER_LAB_DATA here) is named as the default, not as --to.
    monkeypatch.setenv(DATA_ENVIRONMENT_VARIABLE, str(data))
    assert main(["download", "couplets", *options]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"transformer-lab download: error: the data folder (${DATA_ENVIRONMENT_VARIABLE}, else the default): "
        f"could not write '{data / 'couplet' / 'test'}' ({said}); nothing was downloaded"
    ]
    with pytest.raises(FolderWriteError) as raised:  # the Python API: the same errno, the folder named
        download_dataset("ag-news", data, mirror="http://127.0.0.1:9/", timeout=3)
    assert raised.value.errno == code and str(raised.value).startswith(f"could not write '{data / 'ag_news'}' (")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("refused", ["mkdir", "write_text"])
def test_building_the_couplet_machine_split_on_a_disk_that_refuses_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refused: str
) -> None:
    sources, test = tmp_path / "sources", tmp_path / "test"
    for folder, contents in ((sources, {name: "花 开\t=>\t叶 落\n" for name in COUPLET_MACHINE_FILES}), (test, {})):
        for name, text in {
            **contents,
            **({"in.txt": "青 天 \n", "out.txt": "白 日 \n"} if folder == test else {}),
        }.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text, encoding="utf-8")
    out = tmp_path / "split"
    if refused == "write_text":
        out.mkdir()

    def full(path: Path, *args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(Path, refused, full)
    with pytest.raises(FolderWriteError) as raised:  # was: the bare OSError "[Errno 28] ..."
        build_train_couplet_machine(sources, test, out)
    named = out if refused == "mkdir" else out / "in.txt"
    assert raised.value.errno == errno.ENOSPC
    assert str(raised.value).startswith(
        f"could not write '{named}' (No space left on device, ENOSPC); nothing was written"
    )
    assert not out.exists() or list(out.iterdir()) == []  # no partial file left


def test_a_data_folder_that_is_a_file_is_named_with_no_download_that_could_not_go_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `download --to FILE` refuses a file as its folder, so advising it would send the user in a circle.
    notes = tmp_path / "notes.txt"
    notes.write_text("not data\n", encoding="utf-8")
    for resolve, folder in (
        (resolve_multi30k_dir, "multi30k"),
        (resolve_ag_news_dir, "ag_news"),
        (lambda data_dir: couplet.resolve_couplet_split_dir("test", data_dir), "couplet"),
    ):
        for given, where in ((notes, "which is a file"), (notes / "data", f"inside the file {str(notes)!r}")):
            with pytest.raises(FileNotFoundError) as error:
                resolve(given)
            message = str(error.value)
            assert f"expected a folder holding {folder}/ (or its files), got {str(given)!r}, {where}" in message
            assert "download" not in message and "name the folder the data files are in" in message
    assert main(["lab", "tgt-padding-mask", "--data-dir", str(notes)]) == 2
    assert "which is a file; name the folder" in capsys.readouterr().err
    # A folder named and missing gets its download, and no advice to name the folder just named.
    with pytest.raises(FileNotFoundError) as error:
        resolve_multi30k_dir(tmp_path / "nothing")
    assert "which does not exist; run `transformer-lab download multi30k --to" in str(error.value)
    assert "--data-dir" not in str(error.value)


def test_a_missing_default_data_folder_suggests_the_argument_of_the_api_or_the_flag_of_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The library's error told a Python caller to "pass --data-dir", a flag it has no way to give.
    monkeypatch.setenv("TRANSFORMER_LAB_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError) as error:
        resolve_multi30k_dir(None)
    assert str(error.value).endswith("run `transformer-lab download multi30k` to fetch it (or pass data_dir)")
    assert str(pickle.loads(pickle.dumps(error.value))) == str(error.value)  # the same in another process
    assert main(["train", "translation", "--out", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.rstrip().endswith("to fetch it (or pass --data-dir)")
    assert not (tmp_path / "run").exists()


def test_two_builds_of_the_ag_news_subset_at_once_both_end_with_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One build renamed away the fixed-name partial the other was still checking, which then failed with
    # "[Errno 2] No such file or directory: '.train_subset_12k.csv.build.part'".
    from transformer_lab.data import ag_news_subset

    kaggle = tmp_path / "kaggle.csv"
    kaggle.write_text('"Class Index","Title","Description"\n"3","Oil","Prices rose"\n', encoding="utf-8")
    expected = hashlib.sha256(ag_news_subset.rewrite_kaggle_rows(kaggle)).hexdigest()
    destination = tmp_path / "subset.csv"
    write = ag_news_subset.write_through_temporary
    builds: list[Path] = []

    def another_build_meanwhile(path: Path, write_file: Callable[[BinaryIO], object]) -> None:
        def and_then_the_other(file: BinaryIO) -> None:
            write_file(file)
            builds.append(path)
            if len(builds) == 1:  # while the first build's file is open, a second one runs whole
                ag_news_subset.build_ag_news_subset(kaggle, destination, expected)

        write(path, and_then_the_other)

    monkeypatch.setattr(ag_news_subset, "write_through_temporary", another_build_meanwhile)
    assert ag_news_subset.build_ag_news_subset(kaggle, destination, expected) == destination
    assert hashlib.sha256(destination.read_bytes()).hexdigest() == expected
    assert sorted(path.name for path in tmp_path.iterdir()) == ["kaggle.csv", "subset.csv"]  # no partial left


def test_an_empty_data_folder_is_refused_not_taken_for_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--data-dir ''` (or data.data_dir: '') read ./multi30k from wherever the command ran, and recorded ''.
    monkeypatch.chdir(tmp_path)
    for option in (["--data-dir", ""], ["--set", "data.data_dir="]):
        assert main(["train", "translation", *option, "--out", str(tmp_path / "run")]) == 2
        assert capsys.readouterr().err.strip() == (
            "transformer-lab train: error: data_dir (--data-dir): expected a folder, got '' (leave it out for "
            "$TRANSFORMER_LAB_DATA or the default data folder; '.' for the working folder)"
        )
    assert not (tmp_path / "run").exists()
