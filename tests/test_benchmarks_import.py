"""Every benchmark script imports against the library as it is now.

The benchmarks run by hand, for figures, so nothing else notices when a name they import is
renamed or removed in the library; the lint checks neither. Importing a script runs its
imports and definitions, not its ``main()``.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parametrize("script", sorted(path.stem for path in BENCHMARKS.glob("*.py")))
def test_the_script_imports(script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The scripts import one another by name, as `python benchmarks/x.py` lets them.
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    module = importlib.import_module(script)
    assert module.__file__ is not None and Path(module.__file__).parent == BENCHMARKS
    assert script in sys.modules
