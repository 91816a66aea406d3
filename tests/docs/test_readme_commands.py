"""Every command the READMEs show parses with the real command line, and each is run by a test or says why not.

The commands are those of the READMEs' ``bash`` blocks, the inline ``transformer-lab ...``
spans with arguments and the inline ``make TARGET`` spans. Each is read as the user would
type it: ``a|b`` is one command per alternative, ``[...]`` an option that may be given (it
is, here), a trailing ``# ...`` a comment. Every ``transformer-lab`` command (also after
``torchrun -m transformer_lab``) must parse with the CLI's own parser, so an option renamed
or removed in the code fails here, and every ``make`` target must exist. Every command must
also match one row of :data:`COVERAGE`: a test file that runs that command (on small data;
the file must hold the marker) or the reason it is not run by the tests.
"""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path

import pytest

from transformer_lab.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
READMES = [ROOT / "README.md", ROOT / "README.zh-CN.md"]

# (a regular expression matched at the start of the command, and either ("run", "tests/FILE.py", "a string
# the file holds") or ("not run", "why")). The first matching row counts.
OWN_DATA = "tests/tasks/test_translation_own_data.py"  # translation on the user's files
CLASSIFY = "tests/cli/test_classify_command.py"
LABELLED = "tests/tasks/test_labelled_classification.py"  # classification on the user's labelled files
COVERAGE: list[tuple[str, tuple[str, ...]]] = [
    (r"make TORCH_INDEX=", ("not run", "installs torch from PyTorch's index; test_readme.py reads the recipe")),
    (r"make demo$", ("not run", "sets up .venv (downloads); transformer-lab demo itself is run below")),
    (r"make test$", ("not run", "it is the test suite")),
    (r"make test-gpu$", ("not run", "needs a CUDA GPU")),
    (r"make test-kernels$", ("not run", "reruns the suite's convergence tests on other kernels; CI runs it")),
    (r"make lint$", ("not run", "CI runs it before the tests")),
    (r"make setup$", ("not run", "creates .venv (downloads); every make target above runs it first")),
    (r"make tutorial$", ("not run", "tests/docs/test_tutorial.py executes every chapter, as it does")),
    (r"make browser$", ("not run", "installs Debian packages: needs root and apt-get")),
    (r"transformer-lab demo", ("run", "tests/cli/test_train_and_demo_commands.py", '"demo"')),
    (r"transformer-lab download", ("run", "tests/data/test_datasets.py", '"download"')),
    (r"transformer-lab train (copy|reverse|sort) ", ("run", "tests/cli/test_train_and_demo_commands.py", '"reverse"')),
    (r"transformer-lab evaluate (copy|reverse|sort) ", ("run", "tests/tasks/test_synthetic_evaluate.py", '"evaluate"')),
    (r"transformer-lab prepare translation --preset base", ("not run", "WMT14's 4.5 M pairs are not here")),
    (r"transformer-lab prepare translation", ("run", OWN_DATA, '"prepare"')),
    (r"transformer-lab train translation --prepared", ("run", OWN_DATA, "--prepared")),
    (r"transformer-lab train translation --init-from", ("run", OWN_DATA, "--init-from")),
    (r"transformer-lab train translation --train", ("run", OWN_DATA, '"--train"')),
    (r"transformer-lab train translation", ("run", "tests/data/test_datasets.py", '"train", "translation"')),
    (r"transformer-lab config ", ("run", "tests/training/test_config_file.py", '"config"')),
    (r"transformer-lab translate", ("run", OWN_DATA, '"translate"')),
    (r"transformer-lab evaluate translation --checkpoint runs/wmt14", ("not run", "newstest2014 is not here")),
    (r"transformer-lab evaluate translation", ("run", OWN_DATA, '"evaluate"')),
    (r"transformer-lab train couplet", ("run", "tests/tasks/test_couplet.py", '"train", "couplet"')),
    (r"transformer-lab couplet ", ("run", "tests/tasks/test_couplet.py", '"couplet", "--checkpoint"')),
    (r"transformer-lab evaluate couplet", ("run", "tests/tasks/test_couplet.py", '"evaluate"')),
    (r"transformer-lab prepare classification", ("run", LABELLED, '"prepare", "classification"')),
    (r"transformer-lab train classification", ("run", CLASSIFY, '"classification"')),
    (r"transformer-lab classify", ("run", CLASSIFY, '"classify"')),
    (r"transformer-lab evaluate classification", ("run", CLASSIFY, '"evaluate"')),
    (r"transformer-lab average-checkpoints", ("run", "tests/tasks/test_translation.py", '"average-checkpoints"')),
    (r"transformer-lab lab ", ("run", "tests/lab/test_mask_experiments.py", '"lab"')),
    (r"transformer-lab plot ", ("run", "tests/lab/test_figures.py", '"plot"')),
    (r"transformer-lab explain", ("run", "tests/cli/test_explain_command.py", '"explain"')),
    (r"transformer-lab serve", ("run", "tests/serve/test_browser.py", '"serve"')),
    (r"transformer-lab export --checkpoint \S+ --format onnx", ("run", "tests/export/test_onnx.py", '"export"')),
    (r"transformer-lab export", ("run", "tests/export/test_ctranslate2.py", '"export"')),
    (r"torchrun --standalone .* train copy", ("run", "tests/training/test_distributed.py", "torchrun")),
    (r"torchrun --standalone", ("not run", "the preset's full run; test_distributed.py runs the Trainer so")),
    (r"torchrun --nnodes 2", ("not run", "needs two machines")),
    (r"torchrun --nproc-per-node 8", ("not run", "needs eight GPUs")),
]

# Placeholders that must be numbers for the parser.
NUMBERS = {"NATS": "0.5", "N": "2"}


def _lines(readme: Path) -> list[str]:
    text = readme.read_text(encoding="utf-8")
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                lines.append(line)
    outside = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    for span in re.findall(r"`(transformer-lab [^`]*)`", outside):
        # A bare command name in a sentence (`transformer-lab evaluate`) is not a command to run.
        if len(span.split()) >= 3 and "..." not in span and "COMMAND" not in span:
            lines.append(" ".join(span.split()))
    lines += re.findall(r"`(make [\w-]+)`", outside)
    return lines


def _commands(line: str) -> list[str]:
    """The commands a README line stands for: each alternative of ``a|b``, with its ``[...]`` options given."""
    line = re.sub(r"\s*>\s*\S+$", "", line)  # a shell redirection
    line = line.replace("[", "").replace("]", "").replace(" ...", "")
    tokens = shlex.split(line)
    choices = [token.split("|") if "|" in token and not token.startswith("http") else [token] for token in tokens]
    return [shlex.join(variant) for variant in itertools.product(*choices)]


def readme_commands() -> list[str]:
    found = [command for readme in READMES for line in _lines(readme) for command in _commands(line)]
    return sorted(set(found))


def _argv(command: str) -> list[str] | None:
    """The CLI's arguments of ``command``, or None if it does not run the CLI."""
    tokens = shlex.split(command)
    if tokens[0] == "transformer-lab":
        arguments = tokens[1:]
    elif tokens[0] == "torchrun":
        arguments = tokens[tokens.index("transformer_lab") + 1 :]
    else:
        return None
    return [NUMBERS.get(argument, argument) for argument in arguments]


def test_the_readmes_show_commands_of_every_kind() -> None:
    commands = readme_commands()
    for start in ("make demo", "transformer-lab download", "transformer-lab train", "torchrun", "transformer-lab plot"):
        assert any(command.startswith(start) for command in commands), start


@pytest.mark.parametrize("command", [command for command in readme_commands() if _argv(command) is not None])
def test_every_readme_command_parses_with_the_command_line(command: str) -> None:
    argv = _argv(command)
    assert argv is not None
    try:
        build_parser().parse_args(argv)
    except SystemExit as error:
        pytest.fail(f"the README's command does not parse ({error}): {command}")


def test_every_readme_command_is_run_by_a_test_or_says_why_not() -> None:
    unlisted, stale = [], []
    for command in readme_commands():
        row = next((verdict for pattern, verdict in COVERAGE if re.match(pattern, command)), None)
        if row is None:
            unlisted.append(command)
        elif row[0] == "run":
            _, path, marker = row
            file = ROOT / path
            if not file.is_file() or marker not in file.read_text(encoding="utf-8"):
                stale.append(f"{command}: {path} does not hold {marker!r}")
    assert unlisted == [], "add a COVERAGE row (a test that runs it, or why none can)"
    assert stale == []


def test_the_make_targets_the_readmes_name_exist() -> None:
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(encoding="utf-8"), flags=re.MULTILINE))
    named = {command.split()[-1] for command in readme_commands() if command.startswith("make ")}
    assert named <= targets
