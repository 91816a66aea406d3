"""The READMEs say what is true: how to install, which extras exist, what `make` downloads."""

from __future__ import annotations

import re
import shutil
import subprocess
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


def _torch_spec() -> str:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    spec = re.search(r"^TORCH_SPEC \?= (\S+)$", makefile, flags=re.MULTILINE)
    assert spec is not None and re.search(r"^TORCH_INDEX \?=$", makefile, flags=re.MULTILINE)
    return spec.group(1)


def test_the_readmes_say_which_torch_make_installs_and_how_to_take_the_cpu_build() -> None:
    spec = _torch_spec()
    for readme in READMES:
        text = readme.read_text(encoding="utf-8")
        assert f"`{spec}`" in text, readme.name
        assert "make TORCH_INDEX=https://download.pytorch.org/whl/cpu test" in text, readme.name
        assert "CUDA" in text and "CPU" in text


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_takes_torch_from_torch_index_only_when_it_is_set(tmp_path: Path) -> None:
    def torch_install_line(*variables: str) -> str:
        # -n prints the recipe without running it; -B as if nothing were installed yet.
        result = subprocess.run(
            ["make", "-n", "-B", "setup", f"VENV={tmp_path / 'venv'}", *variables],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        (line,) = [line for line in result.stdout.splitlines() if line.endswith(f' "{_torch_spec()}"')]
        return " ".join(line.split())

    pip, spec, cpu = f"{tmp_path / 'venv'}/bin/pip", _torch_spec(), "https://download.pytorch.org/whl/cpu"
    assert torch_install_line() == f'{pip} install --quiet "{spec}"'
    assert torch_install_line(f"TORCH_INDEX={cpu}") == f'{pip} install --quiet --index-url {cpu} "{spec}"'
