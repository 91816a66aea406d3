"""Write the tutorial's chapters as notebooks and, where an IPython kernel is installed, run them.

The chapters' source is the jupytext percent-format ``.py`` files in ``docs/tutorial/``
(English) and ``docs/tutorial/zh/`` (Chinese); the notebooks are build output, written under
``--out`` (``build/tutorial`` by default, git-ignored), never committed. Each notebook runs
in its own folder, where its figures and small training runs land (``runs/``).

    python docs/make_tutorial.py [--out build/tutorial] [--no-execute] [--chapters 01 03]

Chapter 5 reads Multi30k and the couplets from the data folder that ``transformer-lab download
multi30k`` and ``transformer-lab download couplets`` fill (``$TRANSFORMER_LAB_DATA``, else
``transformer_lab/data`` in ``$XDG_CACHE_HOME``, ``~/.cache`` where that is unset), or from the
``data_dir`` its first code cell sets. Needs the ``docs`` extra: ``pip install -e ".[docs]"``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
import time
from pathlib import Path

TUTORIAL = Path(__file__).resolve().parent / "tutorial"
LANGUAGES = {"en": TUTORIAL, "zh": TUTORIAL / "zh"}
# The most seconds one chapter may run before the build stops it (a chapter takes ~1 minute).
CELL_TIMEOUT_SECONDS = 600


def chapters(folder: Path) -> list[Path]:
    """The chapter files of one language, in reading order (``00_...py``, ``01_...py`` ...)."""
    return sorted(folder.glob("[0-9][0-9]_*.py"))


# The terminal colour codes (CSI sequences) an IPython traceback is written with.
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

# A markdown link's target: (text)(target) where the target is a relative path, maybe with an #anchor.
RELATIVE_LINK = re.compile(r"(\]\()(?![a-z][a-z0-9+.-]*:|#|/)([^)#\s]+)")


def relinked(markdown: str, source_folder: Path, target_folder: Path) -> str:
    """``markdown`` with each relative link re-aimed from ``source_folder`` to its file, seen from ``target_folder``.

    A chapter links to ``../results.md`` from docs/tutorial/; its notebook is written elsewhere
    (build/tutorial/en/), where that path names nothing.
    """

    def moved(match: re.Match[str]) -> str:
        aimed = os.path.relpath((source_folder / match.group(2)).resolve(), target_folder.resolve())
        return match.group(1) + Path(aimed).as_posix()

    return RELATIVE_LINK.sub(moved, markdown)


def failure_line(error: BaseException) -> str:
    """The last line of a chapter's error, without the colour codes the kernel writes its traceback in."""
    text = ANSI_ESCAPE.sub("", str(error))
    return text.splitlines()[-1] if text.strip() else repr(error)


def can_execute() -> bool:
    """Whether nbclient and an IPython kernel are installed here."""
    return all(importlib.util.find_spec(name) is not None for name in ("nbclient", "ipykernel"))


def build(out: Path, execute: bool, selected: list[str]) -> int:
    import jupytext
    import nbformat

    failures = 0
    for language, folder in LANGUAGES.items():
        for chapter in chapters(folder):
            if selected and not any(chapter.name.startswith(prefix) for prefix in selected):
                continue
            notebook = jupytext.read(chapter)
            target = out / language / chapter.with_suffix(".ipynb").name
            target.parent.mkdir(parents=True, exist_ok=True)
            for cell in notebook.cells:
                if cell.cell_type == "markdown":
                    cell.source = relinked(cell.source, folder, target.parent)
            if execute:
                from nbclient import NotebookClient
                from nbclient.exceptions import CellExecutionError

                started = time.perf_counter()
                client = NotebookClient(
                    notebook,
                    timeout=CELL_TIMEOUT_SECONDS,
                    kernel_name="python3",
                    resources={"metadata": {"path": str(target.parent)}},
                )
                try:
                    client.execute()
                    status = f"executed in {time.perf_counter() - started:.0f} s"
                except CellExecutionError as error:
                    failures += 1
                    status = f"FAILED: {failure_line(error)}"
            else:
                status = "written, not executed"
            nbformat.write(notebook, target)
            print(f"{target}: {status}")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("build/tutorial"), help="folder for the .ipynb files")
    parser.add_argument("--no-execute", action="store_true", help="write the notebooks without running them")
    parser.add_argument("--chapters", nargs="*", default=[], help="chapter numbers to build (default: all)")
    arguments = parser.parse_args(argv)
    if importlib.util.find_spec("jupytext") is None:
        print('make_tutorial: jupytext is not installed; pip install -e ".[docs]"', file=sys.stderr)
        return 2
    execute = not arguments.no_execute
    if execute and not can_execute():
        print('make_tutorial: nbclient or ipykernel missing, writing without running; pip install -e ".[docs]"')
        execute = False
    failures = build(arguments.out, execute, arguments.chapters)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
