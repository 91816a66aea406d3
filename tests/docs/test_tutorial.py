"""The tutorial runs: every English chapter executed as a notebook, its key outputs checked.

The chapters (docs/tutorial/*.py, jupytext percent format) are executed through jupytext and
nbclient on an IPython kernel, as ``make tutorial`` runs them; a cell that raises fails the
test, and so does a chapter that runs but shows something wrong (a claim that does not hold,
a twin that disagrees with torch, a copy task not learnt, an exercise whose solution does not
find what it says). The Chinese chapters must have the same code cells, so executing the
English ones runs theirs too. Every chapter ends with a summary and two or three exercises;
their solutions are the chapter's last code cells, tagged ``solution`` (collapsed in
Jupyter), and print ``exercise N: ...`` lines that the tests below read. Chapter 5 reads its data
folder from TRANSFORMER_LAB_DATA, pointed here at a small made-up corpus in the layout of the
real ones.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.serve.conftest import corpus, write_multi30k
from tests.tasks.couplet_fixture import write_couplet_folder

jupytext = pytest.importorskip("jupytext", reason="the docs extra (jupytext) is not installed")
nbclient = pytest.importorskip("nbclient", reason="the docs extra (nbclient) is not installed")
pytest.importorskip("ipykernel", reason="the docs extra (ipykernel) is not installed")

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial"
ENGLISH = sorted(TUTORIAL.glob("[0-9][0-9]_*.py"))
CHINESE = sorted((TUTORIAL / "zh").glob("[0-9][0-9]_*.py"))
CELL_TIMEOUT_SECONDS = 600


def code_cells(path: Path) -> list[str]:
    return [cell.source for cell in jupytext.read(path).cells if cell.cell_type == "code"]


def markdown_cells(path: Path) -> list[str]:
    return [cell.source for cell in jupytext.read(path).cells if cell.cell_type == "markdown"]


def chapter(prefix: str) -> Path:
    (found,) = [path for path in ENGLISH if path.name.startswith(prefix)]
    return found


# ---------------------------------------------------------------------------------------- text


def test_there_are_seven_chapters_from_0_in_each_language_with_the_same_names() -> None:
    assert [path.name[:2] for path in ENGLISH] == ["00", "01", "02", "03", "04", "05", "06"]
    assert [path.name for path in CHINESE] == [path.name for path in ENGLISH]


def cell_tags(path: Path) -> list[list[str]]:
    return [list(cell.metadata.get("tags", [])) for cell in jupytext.read(path).cells if cell.cell_type == "code"]


@pytest.mark.parametrize("english", ENGLISH, ids=lambda path: path.stem)
def test_the_chinese_chapter_has_the_english_code_cells_and_chinese_prose(english: Path) -> None:
    chinese = TUTORIAL / "zh" / english.name
    assert code_cells(chinese) == code_cells(english)
    assert cell_tags(chinese) == cell_tags(english)
    prose = "".join(markdown_cells(chinese))
    assert len(re.findall(r"[\u4e00-\u9fff]", prose)) > 300, "the Chinese chapter's prose is not in Chinese"


@pytest.mark.parametrize("path", ENGLISH + CHINESE, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_a_chapter_imports_nothing_private_and_sets_its_seeds(path: Path) -> None:
    source = "\n".join(code_cells(path))
    private = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            names = [node.module or "", *(alias.name for alias in node.names)]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        private += [name for name in names if any(part.startswith("_") for part in name.split("."))]
    assert private == []
    assert "torch.manual_seed(" in source


# The headings that close every chapter, in the folder's language.
CLOSING_HEADINGS = {
    "tutorial": ("## Summary", "## Exercises", "## Solutions"),
    "zh": ("## 小结", "## 练习", "## 参考答案"),
}


@pytest.mark.parametrize("path", ENGLISH + CHINESE, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_a_chapter_ends_with_a_summary_and_exercises_whose_solutions_are_its_last_cells(path: Path) -> None:
    cells = jupytext.read(path).cells
    markdown = "\n".join(cell.source for cell in cells if cell.cell_type == "markdown")
    positions = [markdown.find(f"\n{heading}\n") for heading in CLOSING_HEADINGS[path.parent.name]]
    assert -1 not in positions and positions == sorted(positions), positions
    numbers = re.findall(r"(?m)^(\d+)\. ", markdown[positions[1] : positions[2]])
    assert numbers in (["1", "2"], ["1", "2", "3"]), numbers
    code = [cell for cell in cells if cell.cell_type == "code"]
    solutions = [index for index, cell in enumerate(code) if "solution" in cell.metadata.get("tags", [])]
    assert solutions == list(range(len(code) - len(numbers), len(code))), "one solution cell per exercise, last"
    for number, index in enumerate(solutions, start=1):
        cell = code[index]
        assert cell.metadata.get("jupyter", {}).get("source_hidden") is True, "a solution starts collapsed"
        assert cell.source.startswith(f"# Exercise {number}:"), cell.source[:60]
        assert re.search(rf"[\"']exercise {number}: ", cell.source), f"exercise {number} prints no finding"


@pytest.mark.parametrize("path", ENGLISH + CHINESE, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_a_figure_cell_prints_where_it_wrote_the_figure(path: Path) -> None:
    source = "\n".join(code_cells(path))
    # IPython's display() prints "<IPython.core.display.Image object>" when the chapter runs as a script.
    assert "IPython.display" not in source and "display(" not in source
    assert source.count("show_figure(") == source.count('print("figure:", show_figure(')


def figures_printed(prefix: str, text: str) -> list[str]:
    """The figure paths a chapter printed; there must be one per show_figure call of its source."""
    printed = re.findall(r"(?m)^figure: (runs/tutorial-figures/[\w.-]+\.png)$", text)
    assert len(printed) == "\n".join(code_cells(chapter(prefix))).count("show_figure("), printed
    return printed


@pytest.mark.parametrize("prefix", ["00", "01"])
def test_a_chapter_run_as_a_script_prints_where_each_figure_went(prefix: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(chapter(prefix))],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=CELL_TIMEOUT_SECONDS,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "IPython.core.display" not in result.stdout
    printed = figures_printed(prefix, result.stdout)
    assert printed and all((tmp_path / path).stat().st_size > 0 for path in printed)


ROOT = TUTORIAL.parents[1]
LINKING_PAGES = [ROOT / "README.md", ROOT / "README.zh-CN.md", TUTORIAL / "README.md", TUTORIAL / "zh" / "README.md"]


@pytest.mark.parametrize("page", LINKING_PAGES + ENGLISH + CHINESE, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_of_the_readmes_and_chapters_names_an_existing_file(page: Path) -> None:
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8"))
    relative = [target for target in targets if not re.match(r"[a-z]+://", target)]
    assert [target for target in relative if not (page.parent / target).exists()] == []


def test_the_built_notebooks_links_name_the_same_files_from_where_they_are_written(tmp_path: Path) -> None:
    out = tmp_path / "build" / "tutorial"  # not beside the chapters: their ../ links must be re-aimed
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "make_tutorial.py"), "--no-execute", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    notebooks = sorted(out.glob("*/*.ipynb"))
    assert len(notebooks) == len(ENGLISH) + len(CHINESE)
    checked = 0
    for notebook in notebooks:
        source = TUTORIAL / ("zh" if notebook.parent.name == "zh" else "") / notebook.with_suffix(".py").name
        built = [cell.source for cell in jupytext.read(notebook).cells if cell.cell_type == "markdown"]
        targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", "\n".join(built))
        relative = [target for target in targets if not re.match(r"[a-z]+://", target)]
        aimed = [(notebook.parent / target).resolve() for target in relative]
        assert [target for target, path in zip(relative, aimed) if not path.exists()] == [], notebook.name
        # The same files the chapter names, in the same order.
        written = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", "\n".join(markdown_cells(source)))
        originals = [(source.parent / target).resolve() for target in written if not re.match(r"[a-z]+://", target)]
        assert aimed == originals
        checked += len(aimed)
    assert checked > 0


def test_the_readme_points_a_learner_to_chapter_0_and_to_the_chinese_readme_first() -> None:
    first_lines = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:6])
    assert "README.zh-CN.md" in first_lines and "docs/tutorial/00_attention_by_hand.py" in first_lines
    chinese_first_lines = "\n".join((ROOT / "README.zh-CN.md").read_text(encoding="utf-8").splitlines()[:4])
    assert "docs/tutorial/zh/00_attention_by_hand.py" in chinese_first_lines


# ----------------------------------------------------------------------------------- execution


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder with multi30k/ and couplet/ as a user's holds them, made-up and small."""
    root = tmp_path_factory.mktemp("tutorial-data")
    write_multi30k(root, corpus())
    write_couplet_folder(root, num_train=400, num_test=30)
    return root


_executed: dict[str, list[str]] = {}


def run_chapter(path: Path, working_dir: Path) -> list[str]:
    """Execute one chapter; return each code cell's printed text (stdout and stderr, and plain-text results)."""
    notebook = jupytext.read(path)
    client = nbclient.NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_SECONDS,
        kernel_name="python3",
        resources={"metadata": {"path": str(working_dir)}},
    )
    client.execute()  # a cell that raises raises CellExecutionError here
    outputs = []
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        texts: list[str] = []
        for output in cell.outputs:
            if output.output_type == "stream":
                texts.append(output.text)
            elif output.output_type == "execute_result":
                texts.append(output.get("data", {}).get("text/plain", ""))
        outputs.append("".join(texts))
    return outputs


@pytest.fixture
def executed(
    request: pytest.FixtureRequest,
    data_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> Any:
    """``executed("01")``: the outputs of chapter 01's code cells, executing it once per test run."""

    def run(prefix: str) -> str:
        if prefix not in _executed:
            monkeypatch.setenv("TRANSFORMER_LAB_DATA", str(data_dir))  # the kernel inherits the environment
            monkeypatch.setenv("OMP_NUM_THREADS", "1")
            # The kernel's connection file and IPython's profile go to the test's folders, not the user's home.
            monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path_factory.mktemp("jupyter-runtime")))
            monkeypatch.setenv("IPYTHONDIR", str(tmp_path_factory.mktemp("ipython")))
            _executed[prefix] = run_chapter(chapter(prefix), tmp_path_factory.mktemp(f"chapter-{prefix}"))
        return "\n".join(_executed[prefix])

    return run


def claim_tables(text: str) -> dict[str, list[str]]:
    """Each lab table's name -> the last column ("holds") of its rows."""
    tables: dict[str, list[str]] = {}
    for block in re.split(r"(?m)^(?=lab [a-z-]+: )", text):
        header = re.match(r"lab ([a-z-]+): ", block)
        if header:
            tables[header.group(1)] = re.findall(r"(?m)^.+  (?:equal|differ) .*  (yes|NO)$", block)
    return tables


def test_chapter_0_writes_attention_by_hand_and_shows_why_scores_are_divided_by_sqrt_d_k(executed: Any) -> None:
    text = executed("00")
    assert figures_printed("00", text) == [
        "runs/tutorial-figures/architecture.png",
        "runs/tutorial-figures/score-scaling.png",
    ]
    assert "each row sums to tensor([1.000, 1.000])" in text
    (difference,) = re.findall(r"check against torch.nn.MultiheadAttention: max \|ours - torch\| = (\S+)", text)
    assert float(difference) < 1e-5
    rows = re.findall(
        r"(?m)^d_k +(\d+): variance +(\S+) -> (\S+), largest weight (\S+) -> (\S+), gradient (\S+) -> (\S+)$", text
    )
    assert [int(row[0]) for row in rows] == [4, 16, 64, 256, 1024]
    for d_k, variance, scaled_variance, _, scaled_largest, _, _ in rows:
        # The score's variance is d_k, and 1 once divided by sqrt(d_k); scaled, no key takes over.
        assert 0.8 < float(variance) / int(d_k) < 1.25 and 0.8 < float(scaled_variance) < 1.25
        assert float(scaled_largest) < 0.4
    largest = [float(row[3]) for row in rows]
    assert largest == sorted(largest) and largest[-1] > 0.9  # unscaled, the softmax saturates
    assert float(rows[-1][5]) < float(rows[-1][6]) / 5  # and its gradient fades
    # The exercises' solutions.
    (keys_change,) = re.findall(r"exercise 1: permuting keys and values changes the output by (\S+)", text)
    assert float(keys_change) < 1e-5
    assert "exercise 1: permuting the queries permutes the output rows the same way: True" in text
    assert "exercise 2: the hidden row holds by hand nan, torch nan, transformer_lab 0.0" in text
    too_much = re.findall(r"exercise 3: d_k +(\d+): variance (\S+), largest weight (\S+)", text)
    assert [int(d_k) for d_k, _, _ in too_much] == [16, 256, 1024]
    assert all(float(variance) < 1.5 / int(d_k) for d_k, variance, _ in too_much)
    assert 1 / 16 < float(too_much[-1][2]) < 0.08  # nearly uniform over 16 keys


def test_chapter_1_computes_the_rows_claim_and_the_polarity_table(executed: Any) -> None:
    text = executed("01")
    assert figures_printed("01", text) == ["runs/tutorial-figures/masks.png"]
    tables = claim_tables(text)
    assert set(tables) >= {"encoder-row-mask", "key-padding-polarity"}
    for name in ("encoder-row-mask", "key-padding-polarity"):
        assert tables[name] and set(tables[name]) == {"yes"}, (name, tables[name])
    assert text.count("claim holds") >= 2 and "does NOT hold" not in text
    assert "scores = Q K^T / sqrt(head_dim)    [2, 2, 3, 4]" in text
    (together,) = re.findall(r"exercise 1: max \|one mask - two masks\| = (\S+)", text)
    assert float(together) < 1e-6
    assert "exercise 2: the float mask hides the same positions: True" in text
    (float_bool,) = re.findall(r"exercise 2: max \|float mask - bool mask\| = (\S+)", text)
    assert float(float_bool) < 1e-6
    assert "exercise 3: max |output change| = 0.0e+00" in text


def test_chapter_2_builds_the_parts_and_its_twin_agrees_with_torch(executed: Any) -> None:
    text = executed("02")
    assert figures_printed("02", text) == ["runs/tutorial-figures/positions.png"]
    (difference,) = re.findall(r"twin check: max \|ours - torch.nn.Transformer\| = (\S+)", text)
    assert float(difference) < 1e-5
    assert "scaled / looked up: tensor([4., 4., 4., 4.])" in text
    assert text.count("the encoder's memory: True") == 3 and "the encoder's memory: False" not in text
    (post_norm,) = re.findall(r"norm_first=False  std of each layer's output: \[(.*)\]", text)
    assert all(abs(float(value) - 1.0) < 0.05 for value in post_norm.split(", "))
    (pre_norm,) = re.findall(r"norm_first=True   std of each layer's output: \[(.*)\]", text)
    pre_norm_sizes = [float(value) for value in pre_norm.split(", ")]
    assert pre_norm_sizes == sorted(pre_norm_sizes) and pre_norm_sizes[-1] > 1.5
    (moved,) = re.findall(r"change per position after changing position 2: tensor\(\[(.*)\]\)", text)
    assert [float(value) > 0 for value in moved.split(", ")] == [False, False, True, False, False]
    (rotation,) = re.findall(r"exercise 1: max \|R_5 PE\[pos\] - PE\[pos \+ 5\]\| over 45 positions = (\S+)", text)
    assert float(rotation) < 1e-5
    ((formula, counted),) = re.findall(r"exercise 2: formula (\d+), model.parameters\(\) (\d+)", text)
    assert formula == counted
    assert "exercise 2: the base model without embeddings: 44.1 M" in text
    (final_norm,) = re.findall(r"exercise 3: std of the pre-norm stack's output with a final norm: (\S+)", text)
    assert abs(float(final_norm) - 1.0) < 0.05


@pytest.mark.convergence
def test_chapter_3_trains_the_copy_task_and_the_cache_changes_nothing(executed: Any) -> None:
    text = executed("03")
    assert figures_printed("03", text) == ["runs/tutorial-figures/lr-schedule.png"]
    (greedy, beam) = re.findall(r"exact match on 500 unseen sequences: greedy (\S+), beam (\S+)", text)[0]
    assert float(greedy) >= 0.9 and float(beam) >= 0.9
    assert "beam scores at least as high on every sentence here: True" in text
    assert "same tokens with and without the cache: True" in text
    (step_difference,) = re.findall(r"cache check: max \|logits with cache - without\| over \d+ steps = (\S+)", text)
    assert float(step_difference) < 1e-4
    assert "padded logits changed, loss unchanged: True" in text
    ours, torchs = re.findall(r"ours (\S+)  torch's (\S+)", text)[0]
    assert ours == torchs
    smoothed = {
        name.strip(): float(value)
        for name, value in re.findall(
            r"(?m)^(uniform|fairly sure \(0.7\)|the smoothed target|almost certain \(0.999\))" r"\s+\S+\s+(\S+)$", text
        )
    }
    assert min(smoothed, key=lambda name: smoothed[name]) == "the smoothed target"
    ((floor, vocabulary, reached),) = re.findall(
        r"exercise 1: floor (\S+) for a vocabulary of (\d+); the loss at the smoothed target (\S+)", text
    )
    assert abs(float(floor) - 0.582) < 0.001 and vocabulary == "14" and reached == floor
    assert re.search(r"exercise 1: last training loss \S+, above the floor: True", text)
    assert re.search(r"exercise 2: peak 0.01443 = highest rate 0.01443: True", text)
    assert "exercise 2: the rate is half its peak at step 600 = 4 x warmup" in text
    assert "exercise 3: a beam of one finds the greedy tokens for every sentence: True" in text


def test_chapter_4_shows_the_target_padding_mask_changes_nothing_the_loss_reads(executed: Any) -> None:
    text = executed("04")
    tables = claim_tables(text)
    for name in ("tgt-padding-mask", "decoder-rows"):
        assert len(tables.get(name, [])) == 6 and set(tables[name]) == {"yes"}, (name, tables.get(name))
    assert text.count("claim holds") == 2 and "does NOT hold" not in text
    (real_length, rows) = re.findall(
        r"sentence \d+: (\d+) real positions of \d+\nrows the key padding mask changes: \[(.*)\]", text
    )[0]
    assert [int(row) for row in rows.split(", ")][0] == int(real_length)
    assert "exercise 1: in every sentence only padded rows change: True" in text
    ((by_hand, library),) = re.findall(r"exercise 2: by hand (\S+), with ignore_index (\S+)", text)
    assert abs(float(by_hand) - float(library)) < 1e-5


def test_chapter_5_trains_both_applications_from_the_data_folder_and_draws_chinese(executed: Any) -> None:
    text = executed("05")
    assert figures_printed("05", text) == [
        "runs/tutorial-figures/translation-curve.png",
        "runs/tutorial-figures/translation.png",
        "runs/tutorial-figures/couplet.png",
    ]
    for task in ("translation", "couplet"):
        ((first, last),) = re.findall(rf"{task}: training loss (\S+) -> (\S+)", text)
        assert float(last) < float(first), (task, first, last)
    assert "each row sums to 1: True" in text
    assert len(re.findall(r"(?m)^upper: .+   reference: .+   model: .+$", text)) == 3
    assert re.search(r"(?m)^source: .+\nreference: .+\nmodel: +\S", text), "no translation printed"
    ((subwords, words),) = re.findall(r"exercise 1: (\d+) subwords for (\d+) words", text)
    assert int(subwords) >= int(words) > 0
    assert "exercise 1: decode(encode(sentence)) gives the sentence back: True" in text
    assert re.search(r"exercise 2: [1-3] candidates, best first by score: True", text)
    assert re.search(r"exercise 3: [1-3] candidates, each as long as the upper line: True", text)
    assert re.search(r"exercise 3: for 'hello world': 0 candidates, error: \S", text)
    from transformer_lab.lab.fonts import installed_cjk_family

    if installed_cjk_family() is not None:
        # The couplet's heat map is labelled with Chinese characters: none may be drawn as a box.
        assert "missing from font" not in text and "no font for it" not in text


@pytest.mark.convergence
def test_chapter_6_pools_without_padding_and_learns_the_task(executed: Any) -> None:
    text = executed("06")
    (difference,) = re.findall(r"pooling check: max \|logits alone - logits padded\| = (\S+)", text)
    assert float(difference) < 1e-5
    (accuracy,) = re.findall(r"test accuracy: (\S+)", text)
    assert float(accuracy) > 0.7
    (first_pooling,) = re.findall(r"exercise 1: pooling='first': max \|logits alone - logits padded\| = (\S+)", text)
    assert float(first_pooling) < 1e-5
    ((combined, overall),) = re.findall(r"exercise 2: weighted by the class shares (\S+) = overall (\S+)", text)
    assert abs(float(combined) - float(overall)) <= 0.0015  # both printed to 3 decimals


def test_a_chapter_that_fails_is_one_plain_line_naming_its_notebook_and_the_error(tmp_path: Path) -> None:
    # Chapter 5 without its data: the kernel's coloured traceback becomes one line of words.
    out = tmp_path / "build"
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "make_tutorial.py"), "--chapters", "05", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TRANSFORMER_LAB_DATA": str(tmp_path / "no-data")},
    )
    assert result.returncode != 0
    failed = [line for line in result.stdout.splitlines() + result.stderr.splitlines() if "FAILED" in line]
    assert len(failed) == 2, result.stdout + result.stderr  # the English and the Chinese chapter
    for line in failed:
        assert "\x1b" not in line
        assert "05_applications.ipynb: FAILED: DatasetMissingError: TRANSFORMER_LAB_DATA=" in line
