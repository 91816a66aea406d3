"""Dependencies point one way: no module imports a package of a layer above its own.

The layers, bottom up: ``nn`` and ``data``; ``models``; ``training``, ``decoding`` and
``evaluation``; ``tasks``; ``export``, ``serve``, ``lab`` and the Python API; ``cli``.
Imports inside functions count as much as those at the top of a file. And no import circle,
at any level: a task is a package whose ``__init__`` only assembles ``TASK`` from its modules
(``data``, ``predict``, ``train``, ``evaluate``), which never import it.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import transformer_lab
from transformer_lab.tasks.task import Task

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
        elif isinstance(node, ast.ImportFrom) and (node.level or node.module):
            found.append(from_module(node, package))
    return found


def from_module(node: ast.ImportFrom, package: str) -> str:
    """The module a ``from ... import`` in ``package`` reads from, a relative one resolved."""
    if not node.level:
        return str(node.module)
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


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


def module_name(path: Path, root: Path = PACKAGE_ROOT) -> str:
    """The dotted name of the module in ``path`` under the package folder ``root`` (``__init__.py``: the package)."""
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = PACKAGE_ROOT) -> dict[str, set[str]]:
    """Each module of the package in ``root`` -> the package's modules it imports (``from p import m``: ``p.m``)."""
    paths = {module_name(path, root): path for path in sorted(root.rglob("*.py"))}
    graph = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        named = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                named |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = from_module(node, package)
                named |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base for alias in node.names}
        graph[module] = {name for name in named if name in paths and name != module}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules of each import circle of ``graph``, each circle once."""
    reached = {}
    for start in graph:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            module = todo.pop()
            if module not in seen:
                seen.add(module)
                todo += graph[module]
        reached[start] = seen
    circles = {
        frozenset(other for other in reached[module] if module in reached[other])
        for module in graph
        if module in reached[module]
    }
    return sorted(sorted(circle) for circle in circles)


def test_no_import_circle_anywhere() -> None:
    assert import_circles(import_graph()) == []


def test_the_check_sees_a_circle_through_a_function_and_a_package(tmp_path: Path) -> None:
    package = tmp_path / "probe"
    (package / "task").mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "task" / "__init__.py").write_text("from probe.task import evaluate\n", encoding="utf-8")
    (package / "task" / "evaluate.py").write_text("def f():\n    from .. import task\n", encoding="utf-8")
    (package / "alone.py").write_text("from probe.task import evaluate\n", encoding="utf-8")
    assert import_circles(import_graph(package)) == [["probe.task", "probe.task.evaluate"]]


def test_a_task_package_init_defines_its_task_and_nothing_else() -> None:
    inits = sorted((PACKAGE_ROOT / "tasks").glob("*/__init__.py"))
    assert {path.parent.name for path in inits} >= {"classification", "couplet", "synthetic", "translation"}
    for path in inits:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        statements = [node for node in tree.body if not isinstance(node, (ast.Import, ast.ImportFrom))]
        if ast.get_docstring(tree) is not None:
            statements = statements[1:]
        assert all(isinstance(node, ast.Assign) for node in statements), path
        names = [target.id for node in statements for target in node.targets if isinstance(target, ast.Name)]
        # One task, or a family of tasks sharing one model and checkpoint kind (copy, reverse, sort).
        assert names in (["TASK"], ["TASKS"]), f"{path}: defines {names}"
        module = importlib.import_module(module_name(path))
        tasks = [module.TASK] if names == ["TASK"] else list(module.TASKS)
        assert tasks and all(isinstance(task, Task) for task in tasks), path


def test_a_task_package_modules_never_import_its_init() -> None:
    graph = import_graph()
    for path in sorted((PACKAGE_ROOT / "tasks").glob("*/__init__.py")):
        package = module_name(path)
        modules = [module for module in graph if module.startswith(package + ".")]
        assert modules, package
        assert [module for module in modules if package in graph[module]] == [], package


def test_outside_the_tasks_only_the_api_and_the_demo_name_a_task() -> None:
    # The commands, the server, the exporters and the lab reach tasks through the registry and the Task
    # contract. transformer_lab.api gives the tasks' objects their documented public names (Translator, ...),
    # and `make demo` is the copy task's showcase by definition.
    task_packages = {module_name(path) for path in (PACKAGE_ROOT / "tasks").glob("*/__init__.py")}
    naming = {
        module
        for module, imports in import_graph().items()
        if not module.startswith("transformer_lab.tasks")
        for imported in imports
        if any(imported == package or imported.startswith(package + ".") for package in task_packages)
    }
    assert naming == {"transformer_lab.api", "transformer_lab.cli.demo_command", "transformer_lab.lab.demo"}
