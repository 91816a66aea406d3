"""The READMEs say what is true: how to install, which extras exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from transformer_lab.extras import EXTRA_OF_PACKAGE, install_command

ROOT = Path(__file__).resolve().parents[2]
READMES = [ROOT / "README.md", ROOT / "README.zh-CN.md"]


def _extras_in_pyproject() -> list[str]:
    # A regular expression, not tomllib: the tests run on Python 3.10 too.
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return re.findall(r"^(\w+) = \[", section, flags=re.MULTILINE)


def _section(text: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of any level."""
    start = text.index(heading) + len(heading)
    following = re.search(r"^#+ ", text[start:], flags=re.MULTILINE)
    return text[start : start + following.start()] if following else text[start:]


def test_the_extras_paragraph_names_every_extra_of_pyproject() -> None:
    extras = _extras_in_pyproject()
    assert {"serve", "plots", "couplet", "data", "deploy", "tensorboard", "docs", "bench", "dev"} <= set(extras)
    paragraph = _section((ROOT / "README.md").read_text(encoding="utf-8"), "### Extras")
    assert [extra for extra in extras if f"`[{extra}]`" not in paragraph] == []
    chinese = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    assert [extra for extra in extras if f"`[{extra}]`" not in chinese] == []
    # Every extra a feature asks for exists.
    assert set(EXTRA_OF_PACKAGE.values()) <= set(extras)


@pytest.mark.parametrize("readme", READMES, ids=lambda path: path.name)
def test_no_readme_installs_a_package_that_is_not_published(readme: Path) -> None:
    text = readme.read_text(encoding="utf-8")
    # transformer-lab is not on PyPI (and `transformerlab`, one hyphen away, is someone else's).
    assert re.findall(r"pip install [\"']?transformer-?lab", text) == []
    assert 'pip install -e ".[' in text and "pip install -e ." in text
    assert install_command("deploy") == 'pip install -e ".[deploy]"'
