"""The layers of openipu/_src, bottom to top: config and system, the engine, the front ends.

Read from the source (every `import` of an `openipu._src` package, function-local
ones included): a layer imports only itself and the layers below it, so a
newcomer can read the engine without the front ends.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import openipu._src as src_package

SOURCE = pathlib.Path(src_package.__file__).parent
BELOW = {
    "integration": set(),
    "errors": set(),
    "config": {"system", "integration", "errors"},
    "system": {"config", "integration", "errors"},
    "engine": {"config", "system", "integration", "errors"},
}
#: Modules that may reach a layer above theirs, each with the reason (none today).
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()


def _imported_packages(path: pathlib.Path) -> set[str]:
    packages = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[:2] == ["openipu", "_src"]:
                packages.update([parts[2]] if len(parts) > 2 else [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[:2] == ["openipu", "_src"] and len(parts) > 2:
                    packages.add(parts[2])
    return packages


def _layer_of(path: pathlib.Path) -> str:
    relative = path.relative_to(SOURCE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


@pytest.mark.parametrize("layer", sorted(BELOW))
def test_a_layer_imports_only_itself_and_the_layers_below(layer):
    violations = []
    for path in sorted(SOURCE.rglob("*.py")):
        if _layer_of(path) != layer:
            continue
        name = str(path.relative_to(SOURCE))
        for package in _imported_packages(path) - {layer} - BELOW[layer]:
            if (name, package) not in KNOWN_EXCEPTIONS:
                violations.append(f"{name} imports openipu._src.{package}")
    assert violations == []


def test_the_known_exceptions_are_still_needed():
    # An exception that no longer applies must leave the list.
    for name, package in KNOWN_EXCEPTIONS:
        assert package in _imported_packages(SOURCE / name), (name, package)
