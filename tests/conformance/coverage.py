"""How many of the original's test scenarios the conformance suite covers.

Reads the manifests (`originals.txt` here for graphcore/tensorflow, and one per
repository's subfolder: `popart/`, `keras/`, `addons/`; each lists, per original test
file, the Python-level scenarios, i.e. test functions or methods, that need no IPU
hardware) and, per file, the test module `test_<stem>.py` next to its manifest (or
the module the file line names), whose tests name the scenario they
follow with `@pytest.mark.follows("test_method")`. A scenario is covered when some
test follows it, and passing when none of those tests is an expected failure
(`pytest.mark.xfail`, a difference from the original) or skipped. Prints a table and the
totals:

    python tests/conformance/coverage.py

Manifest format: a file line `<owner/repo> <path> <count> [module]`, then its scenarios, one
per line, indented: `  name` for one counted, `  -name  reason` for one left out
(needs hardware). Lines starting with `#` are comments.
"""

from __future__ import annotations

import ast
import dataclasses
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
MANIFEST = HERE / "originals.txt"


@dataclasses.dataclass
class Original:
    repo: str
    path: str
    count: int
    folder: pathlib.Path = HERE
    module_name: str | None = None
    scenarios: list[str] = dataclasses.field(default_factory=list)
    hardware_only: list[str] = dataclasses.field(default_factory=list)

    @property
    def stem(self) -> str:
        return pathlib.PurePosixPath(self.path).stem

    @property
    def module(self) -> pathlib.Path:
        return self.folder / (self.module_name or f"test_{self.stem}.py")


def manifests() -> list[pathlib.Path]:
    """This folder's manifest, then those of its subfolders (one per original repository)."""
    return [MANIFEST, *sorted(HERE.glob("*/originals.txt"))]


def read_all_manifests() -> list[Original]:
    return [original for path in manifests() for original in read_manifest(path)]


def read_manifest(path: pathlib.Path = MANIFEST) -> list[Original]:
    originals: list[Original] = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not raw[0].isspace():
            repo, file_path, count, *module = line.split()
            originals.append(
                Original(repo, file_path, int(count), path.parent, module[0] if module else None)
            )
            continue
        if not originals:
            raise ValueError(f"{path}:{number}: a scenario before any file")
        name = line.split()[0]
        if name.startswith("-"):
            originals[-1].hardware_only.append(name[1:])
        else:
            originals[-1].scenarios.append(name)
    return originals


def _marks(decorator: ast.expr) -> tuple[str, list[str]] | None:
    """('follows', ['name']) for `pytest.mark.follows("name")`, ('xfail', []) etc."""
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)):
        return None
    if node.value.attr != "mark":
        return None
    args = []
    if isinstance(decorator, ast.Call):
        args = [
            a.value
            for a in decorator.args
            if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
    return node.attr, args


@dataclasses.dataclass
class Followed:
    test: str
    scenarios: list[str]
    expected_to_fail: bool


def followed_scenarios(module: pathlib.Path) -> list[Followed]:
    """The tests of a module with the scenarios they follow (module-level marks apply to all)."""
    tree = ast.parse(module.read_text())
    module_marks: list[tuple[str, list[str]]] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            values = (
                node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            )
            module_marks += [m for m in map(_marks, values) if m]
    found: list[Followed] = []

    def visit(body, inherited):
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, inherited + [m for m in map(_marks, node.decorator_list) if m])
            elif isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                marks = inherited + [m for m in map(_marks, node.decorator_list) if m]
                names = [n for kind, args in marks if kind == "follows" for n in args]
                failing = any(kind in ("xfail", "skip", "skipif") for kind, _ in marks)
                if names:
                    found.append(Followed(node.name, names, failing))

    visit(tree.body, module_marks)
    return found


@dataclasses.dataclass
class Row:
    original: Original
    covered: set[str]
    passing: set[str]
    unknown: set[str]


def rows(originals: list[Original] | None = None) -> list[Row]:
    result = []
    for original in originals if originals is not None else read_all_manifests():
        tests = followed_scenarios(original.module) if original.module.exists() else []
        named = {n for t in tests for n in t.scenarios}
        counted = set(original.scenarios)
        failing = {n for t in tests if t.expected_to_fail for n in t.scenarios}
        passing = named - failing
        result.append(Row(original, named & counted, passing & counted, named - counted))
    return result


def main() -> int:
    table = rows()
    width = max(len(r.original.path) for r in table) if table else 10
    print(f"{'original test file':<{width}}  covered  passing  scenarios")
    covered = passing = total = 0
    repo = None
    for row in table:
        if row.original.repo != repo:
            repo = row.original.repo
            print(f"[{repo}]")
        n = row.original.count
        print(f"{row.original.path:<{width}}  {len(row.covered):>7}  {len(row.passing):>7}  {n:>9}")
        covered += len(row.covered)
        passing += len(row.passing)
        total += n
        for name in sorted(row.unknown):
            print(f"  warning: {name} is not a counted scenario of {row.original.path}")
    print(f"{'total':<{width}}  {covered:>7}  {passing:>7}  {total:>9}")
    if total:
        print(
            f"covered {covered}/{total} ({100 * covered / total:.1f}%), passing {passing}/{total} ({100 * passing / total:.1f}%)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
