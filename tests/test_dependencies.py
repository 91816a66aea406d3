"""Dependencies point one way: no module imports a package of a layer above its own.

The layers, bottom up: ``nn`` and ``data``; ``models``; ``training``, ``decoding`` and
``evaluation``; ``tasks``; ``export``, ``serve``, ``lab`` and the Python API; ``cli``.
Imports inside functions count as much as those at the top of a file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import transformer_lab

LAYERS = {
    "nn": 0,
    "data": 0,
    "models": 1,
    "training": 2,
    "decoding": 2,
    "evaluation": 2,
    "tasks": 3,
    "export": 4,
    "serve": 4,
    "lab": 4,
    "api": 4,
    "cli": 5,
}
PACKAGE_ROOT = Path(transformer_lab.__file__).parent


def imported_modules(path: Path, package: str) -> list[str]:
    """Every module ``path`` (a module of ``package``) imports, anywhere in the file, relative imports resolved."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                found.append(".".join([*base, node.module] if node.module else base))
            elif node.module:
                found.append(node.module)
    return found


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if parts[0] == "transformer_lab" and len(parts) > 1 else None


def upward_imports(module: str, path: Path) -> list[str]:
    """The imports of ``module`` (whose file is ``path``) from a layer above its own."""
    own = layer_of(module)
    if own is None:
        return []
    package = module.rpartition(".")[0]
    return [name for name in imported_modules(path, package) if (layer_of(name) or -1) > own]


def modules() -> list[tuple[str, Path]]:
    return [
        (".".join(("transformer_lab", *path.relative_to(PACKAGE_ROOT).with_suffix("").parts)), path)
        for path in sorted(PACKAGE_ROOT.rglob("*.py"))
    ]


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = [f"{module} imports {name}" for module, path in modules() for name in upward_imports(module, path)]
    assert upward == []


def test_nn_knows_only_torch_and_data_knows_no_model() -> None:
    for module, path in modules():
        own = module.split(".")[1]
        if own not in ("nn", "data"):
            continue
        for imported in imported_modules(path, module.rpartition(".")[0]):
            parts = imported.split(".")
            if parts[0] == "transformer_lab" and len(parts) > 1 and parts[1] in LAYERS:
                assert parts[1] == own, f"{module} imports {imported}"


def test_the_check_sees_an_upward_import_inside_a_function(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from . import registry\nfrom ..models import config\n\n\ndef f():\n    from ..lab import figures\n",
        encoding="utf-8",
    )
    assert upward_imports("transformer_lab.tasks.probe", probe) == ["transformer_lab.lab"]
