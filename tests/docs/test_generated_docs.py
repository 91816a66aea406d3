"""The generated blocks of docs/architecture.md and docs/masks.md match the code.

`docs/make_docs.py` writes the package map, the concept table and the printed shape walk
from the code itself; a module added, renamed or re-described without rerunning it would
leave the page stale. `--check` rebuilds the text blocks (no figures, no training) and
compares.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_doc_blocks_are_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "make_docs.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, (
        "docs/architecture.md or docs/masks.md is stale: run `python docs/make_docs.py`\n"
        + result.stdout
        + result.stderr
    )
