"""The project speaks only of itself: no issue numbers or work sessions in its files; results.md stays a reference."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("src", "tests", "benchmarks", "docs")
# "issue 20", "issue #22", "issues #4 and #6"; "the eighth session", "this session"; the team's folder.
FORBIDDEN = re.compile(
    r"\bissues? #?\d+|\b(this|that|next|previous|earlier|later|first|second|third|fourth|fifth|sixth|seventh|"
    r"eighth|ninth|tenth) session\b|\.\./shared\b",
    re.IGNORECASE,
)


def _project_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "README.zh-CN.md"]
    for folder in FOLDERS:
        files += [path for path in (ROOT / folder).rglob("*") if path.suffix in (".py", ".md", ".sh", ".cpp")]
    return [path for path in files if path.resolve() != Path(__file__).resolve()]


def test_no_file_speaks_of_issue_numbers_or_sessions() -> None:
    found = []
    for path in _project_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if FORBIDDEN.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert found == []


def test_results_stays_a_reference_of_at_most_500_lines() -> None:
    lines = (ROOT / "docs" / "results.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 500, f"docs/results.md has {len(lines)} lines: move history to docs/experiments/"
