"""The datasets `transformer-lab download` fetches into one data folder, and from where.

- `multi30k` -> `multi30k/`: train, val and test_2016_flickr in de and en
  (`download_multi30k`);
- `ag-news` -> `ag_news/`: train.csv (120,000 rows), test.csv, classes.txt, readme.txt,
  and `train_subset/`, the 12,000 rows the preset's figures used (`download_ag_news`,
  `download_ag_news_subset`);
- `couplets` -> `couplet/`: wb14123's test set and the preset's training pairs built from
  Couplet-Machine (`download_couplet_test`, `download_train_couplet_machine`); wb14123's
  770,491 training pairs on request (`download_wb14123_train`).

Every file comes from a URL pinned to a commit and is checked by its sha256 (or, where no
sha256 is published, by the published MD5 or git blob id) before it takes its final name;
see `transformer_lab.data.download`. The data folder is `default_data_dir()` unless one is
named. The sources, licences, counts and filters are in docs/data.md.

A mirror (`mirror=` or the environment variable TRANSFORMER_LAB_MIRROR) serves the same
files under another address: `https://HOST/PATH` is fetched from `MIRROR/HOST/PATH`, so a
copy of the files (a company's proxy, or the tests' server on 127.0.0.1) replaces the
network without any hash changing.

A download that fails leaves no empty folder behind: the folders it created and that are
still empty are removed (a folder that holds the kept part of an interrupted file stays,
for the next run to resume).
"""

from __future__ import annotations

import contextlib
import logging
import os
import urllib.parse
from pathlib import Path
from typing import Iterator

from transformer_lab.data.ag_news import AG_NEWS_URL, download_ag_news
from transformer_lab.data.ag_news_subset import AG_NEWS_SUBSET_URL, download_ag_news_subset
from transformer_lab.data.couplet import (
    COUPLET_TEST_URL,
    WB14123_TRAIN_URL,
    download_couplet_test,
    download_wb14123_train,
)
from transformer_lab.data.couplet_machine import COUPLET_MACHINE_URL, download_train_couplet_machine
from transformer_lab.data.dataset_folder import DATA_ENVIRONMENT_VARIABLE, DOWNLOAD_NAMES, default_data_dir
from transformer_lab.data.download import check_timeout
from transformer_lab.data.multi30k import MULTI30K_URL, download_multi30k
from transformer_lab.setting_error import SettingError

logger = logging.getLogger(__name__)

DATASET_NAMES: tuple[str, ...] = tuple(DOWNLOAD_NAMES.values())
MIRROR_ENVIRONMENT_VARIABLE = "TRANSFORMER_LAB_MIRROR"
_MIRROR_SCHEMES = ("http", "https", "file")


def dataset_folder(name: str, to: str | os.PathLike[str] | None = None) -> Path:
    """The folder that `download_dataset(name, to)` fills: `<data folder>/<its folder name>`."""
    if name not in DATASET_NAMES:
        raise ValueError(f"dataset: expected one of {', '.join(DATASET_NAMES)}, got {name!r}")
    folder_name = next(folder for folder, download_name in DOWNLOAD_NAMES.items() if download_name == name)
    return (Path(to) if to is not None else default_data_dir()) / folder_name


def mirrored(url: str, mirror: str | None) -> str:
    """`url` as the mirror serves it (`MIRROR/HOST/PATH`), or `url` itself without a mirror."""
    if not mirror:
        return url
    parts = urllib.parse.urlsplit(url)
    return f"{mirror.rstrip('/')}/{parts.netloc}{parts.path}"


def _check_mirror(mirror: object) -> str | None:
    if mirror is None:
        mirror = os.environ.get(MIRROR_ENVIRONMENT_VARIABLE, "") or None
        source = MIRROR_ENVIRONMENT_VARIABLE
    else:
        source = "mirror"
    if mirror is None:
        return None
    why = _address_problem(mirror) if isinstance(mirror, str) else ""
    if why is not None or not isinstance(mirror, str):
        expected = "expected an http://, https:// or file:// address, got {given!r}" + (f" ({why})" if why else "")
        given = _without_password(mirror) if isinstance(mirror, str) else mirror
        if source == "mirror":  # the keyword: a front end names its own option (--mirror)
            raise SettingError("{mirror}: " + expected, ("mirror",), given=given)
        raise ValueError(f"{source}: " + expected.format(given=given))
    return mirror


def _without_password(address: str) -> str:
    """``address`` with the password of its user information, if any, shown as ``***``: an error repeats it."""
    try:
        parts = urllib.parse.urlsplit(address)
        if parts.password is None:
            return address
    except ValueError:
        return address
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def _address_problem(address: str) -> str | None:
    """Why ``address`` is no mirror ("" for another scheme) or urllib would fail on it once the download
    starts (a port, a host), or None.

    Checked before the first request: found there, it read as a network failure to resume from.
    """
    try:
        parts = urllib.parse.urlsplit(address)
        port = parts.port  # a port that is no number raises here
    except ValueError as error:
        return str(error)
    if parts.scheme not in _MIRROR_SCHEMES:
        return ""  # said by the expected schemes alone
    if port is not None and not 0 < port < 65536:
        return f"port {port} is out of range"
    if parts.username is not None or parts.password is not None:
        # urllib would read "user:password@host" as a host name and fail as a network error.
        return "it holds a user name or password, which the download does not send; give a mirror without them"
    if parts.query or parts.fragment:
        # The files' paths are added after the mirror: a query or fragment would take them in.
        return "it holds a query (?...) or a fragment (#...), after which the files' paths would be lost"
    if parts.scheme in ("http", "https"):
        if not parts.hostname:
            return "no host"
        try:
            parts.hostname.encode("idna")
        except UnicodeError as error:
            return f"the host {parts.hostname!r} is no host name: {error}"
    return None


def _check_data_folder(root: Path, given: bool) -> None:
    """Refuse a data folder that is a file, or lies inside one, before any folder is made.

    ``given``: the folder came from the caller's ``to`` (a front end names its own option,
    --to), not from the default.
    """
    blocking = next((path for path in (root, *root.parents) if path.exists() and not path.is_dir()), None)
    if blocking is None:
        return
    inside = "the file" if blocking == root else f"a path inside the file {str(blocking)!r}:"
    if given:
        raise SettingError("{to}: expected a folder, got {inside} {given!r}", ("to",), inside=inside, given=str(root))
    raise ValueError(
        f"the data folder (${DATA_ENVIRONMENT_VARIABLE}, else the default): expected a folder, "
        f"got {inside} {str(root)!r}"
    )


def _folders(root: Path) -> set[Path]:
    """`root`, the folders under it and its ancestors, those that exist."""
    found = {path for path in (root, *root.parents) if path.is_dir()}
    if root.is_dir():
        found.update(Path(folder) for folder, _, _ in os.walk(root))
    return found


@contextlib.contextmanager
def _no_empty_folder_left(root: Path) -> Iterator[None]:
    """On any failure, remove the folders created under (and up to) `root` since entry that are still empty.

    An offline first run would otherwise leave `<root>/multi30k/` and its parents empty,
    which later reads like a data folder whose files went missing.
    """
    existed = _folders(root)
    try:
        yield
    except BaseException:
        created = sorted(_folders(root) - existed, key=lambda path: len(path.parts), reverse=True)
        for folder in created:  # deepest first, so that a parent is empty once its children are gone
            with contextlib.suppress(OSError):  # not empty (a kept partial file), or already gone
                folder.rmdir()
        raise


def download_dataset(
    name: str,
    to: str | os.PathLike[str] | None = None,
    *,
    mirror: str | None = None,
    wb14123_train: bool = False,
    timeout: float = 60.0,
    progress: bool = True,
) -> Path:
    """Download dataset `name` (one of DATASET_NAMES) into the data folder `to`.

    Args:
        name: "multi30k", "ag-news" or "couplets".
        to: the data folder; None takes `default_data_dir()` ($TRANSFORMER_LAB_DATA, else
            the user's cache folder).
        mirror: fetch from this copy of the sources instead (see the module docstring);
            None reads TRANSFORMER_LAB_MIRROR.
        wb14123_train: with "couplets", also wb14123's 770,491 training pairs (~60 MB).
        timeout: seconds to wait on each connection.
        progress: show a progress bar per file (on a terminal only).

    Returns:
        the dataset's folder in the data folder.

    Raises:
        ValueError: an unknown name, a bad mirror, or a file that fails its hash.
        FileNotFoundError, ConnectionError: see `transformer_lab.data.download.download_file`.
    """
    if name not in DATASET_NAMES:
        raise ValueError(f"dataset: expected one of {', '.join(DATASET_NAMES)}, got {name!r}")
    if wb14123_train and name != "couplets":
        # A SettingError: a front end names its own option (--wb14123-train).
        raise SettingError(
            "{wb14123_train}: expected only with the dataset 'couplets', got it with {given!r}",
            ("wb14123_train",),
            given=name,
        )
    mirror = _check_mirror(mirror)
    # Before any folder is made or file fetched: 1e308 s would fail deep in the socket layer.
    timeout = check_timeout(timeout)
    root = Path(to) if to is not None else default_data_dir()
    _check_data_folder(root, given=to is not None)
    with _no_empty_folder_left(root):
        return _download(name, root, mirror, wb14123_train, timeout, progress)


def _download(name: str, root: Path, mirror: str | None, wb14123_train: bool, timeout: float, progress: bool) -> Path:
    if name == "multi30k":
        return download_multi30k(root, base_url=mirrored(MULTI30K_URL, mirror), timeout=timeout, progress=progress)
    if name == "ag-news":
        folder = download_ag_news(root, base_url=mirrored(AG_NEWS_URL, mirror), timeout=timeout, progress=progress)
        download_ag_news_subset(folder, mirrored(AG_NEWS_SUBSET_URL, mirror), timeout=timeout, progress=progress)
        return folder
    test = download_couplet_test(root, mirrored(COUPLET_TEST_URL, mirror), timeout=timeout, progress=progress)
    download_train_couplet_machine(root, mirrored(COUPLET_MACHINE_URL, mirror), timeout=timeout, progress=progress)
    if wb14123_train:
        download_wb14123_train(root, mirrored(WB14123_TRAIN_URL, mirror), timeout=timeout, progress=progress)
    return test.parent
