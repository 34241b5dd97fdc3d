"""Every relative import in gpualign/ resolves, the ones inside functions too: many run only on a GPU path
(a lazy `from . import name` in a module moved to another package would fail there alone); so does every
import of gpualign's modules in the tests and scripts."""

import ast
import importlib
import pathlib

import gpualign


def _relative_imports():
    root = pathlib.Path(gpualign.__file__).parent
    for path in sorted(root.rglob("*.py")):
        parts = ("gpualign", *path.relative_to(root).with_suffix("").parts)
        package = parts[:-1]  # (an __init__'s package is its own folder)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[:len(package) - (node.level - 1)]
                yield f"{path.name}:{node.lineno}", ".".join(base + ((node.module,) if node.module else ())), node.names


def _absolute_imports():
    root = pathlib.Path(gpualign.__file__).parent.parent
    for path in sorted([*(root / "tests").rglob("*.py"), *(root / "scripts").glob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith("gpualign"):
                yield f"{path.name}:{node.lineno}", node.module, node.names
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("gpualign."):
                        yield f"{path.name}:{node.lineno}", alias.name, []


def test_every_import_of_gpualign_resolves():
    bad = []
    for where, target, names in [*_relative_imports(), *_absolute_imports()]:
        module = importlib.import_module(target)
        for alias in names:
            if not hasattr(module, alias.name):
                try:
                    importlib.import_module(f"{target}.{alias.name}")
                except ImportError:
                    bad.append(f"{where}: {target} has no {alias.name}")
    assert bad == []
