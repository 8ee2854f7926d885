"""The layers of openipu/_src, bottom to top: config and system, the engine, the front ends.

Read from the source (every `import` of an `openipu._src` package, function-local
ones included): a layer imports only itself and the layers below it, so a
newcomer can read the engine without the front ends. An openipu module imported inside a
function (an import cycle, or TensorFlow kept out of a light entry point) says why in a
comment beside the import.
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


#: Function-local imports of openipu modules without a written reason, each with why it may
#: stay so for now (keyed by file and imported module).
LOCAL_IMPORTS_WITHOUT_REASON: dict[tuple[str, str], str] = {}


def _imported_module(node: ast.Import | ast.ImportFrom) -> str | None:
    """The openipu module `node` imports (relative imports are within openipu), else None."""
    if isinstance(node, ast.ImportFrom):
        if node.level:
            return "." * node.level + (node.module or "")
        return node.module if node.module and node.module.split(".")[0] == "openipu" else None
    names = [alias.name for alias in node.names if alias.name.split(".")[0] == "openipu"]
    return names[0] if names else None


def _is_reason(comment: str) -> bool:
    # A linter's or type checker's directive is not a reason.
    text = comment.split("#", 1)[1].strip()
    return bool(text) and not text.startswith(("noqa", "type:", "pragma"))


def _local_imports_without_reason(path: pathlib.Path) -> list[tuple[int, str]]:
    lines = path.read_text().splitlines()
    local = {
        node
        for function in ast.walk(ast.parse("\n".join(lines)))
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(function)
        if isinstance(node, ast.Import | ast.ImportFrom)
    }
    missing = []
    for node in sorted(local, key=lambda node: node.lineno):
        module = _imported_module(node)
        if module is None:
            continue
        line = lines[node.lineno - 1]
        above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
        if not (
            ("#" in line and _is_reason(line)) or (above.startswith("#") and _is_reason(above))
        ):
            missing.append((node.lineno, module))
    return missing


def test_function_local_imports_of_openipu_say_why():
    # An openipu module imported inside a function (an import cycle, TensorFlow kept out of
    # a light entry point) has its reason in a comment on that line or the line above.
    missing = []
    for path in sorted(SOURCE.rglob("*.py")):
        name = str(path.relative_to(SOURCE))
        for line, module in _local_imports_without_reason(path):
            if (name, module) not in LOCAL_IMPORTS_WITHOUT_REASON:
                missing.append(f"{name}:{line} imports {module} with no reason written beside it")
    assert missing == []


def test_the_local_imports_without_reason_are_still_there():
    for name, module in LOCAL_IMPORTS_WITHOUT_REASON:
        assert module in [m for _, m in _local_imports_without_reason(SOURCE / name)], name


def test_the_reason_check_reads_comments_and_not_directives(tmp_path):
    path = tmp_path / "example.py"
    path.write_text(
        "def f():\n"
        "    from openipu._src.system import configure\n"
        "    # import cycle: b imports this module\n"
        "    from openipu._src import b\n"
        "    from openipu._src import c  # lazy: c imports TensorFlow\n"
        "    from openipu._src import d  # noqa: F401\n"
        "    import json\n"
    )
    assert _local_imports_without_reason(path) == [
        (2, "openipu._src.system"),
        (6, "openipu._src"),
    ]
