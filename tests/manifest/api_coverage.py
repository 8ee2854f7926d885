"""The documented public names of the four API families, counted: resolved, and exercised.

Families (one manifest each): TensorFlow's `ipu` module (`tensorflow_ipu.txt`), Keras on
the IPU (`keras_ipu.txt`), PopART (`popart.txt`), ipu_tensorflow_addons
(`ipu_tensorflow_addons.txt`). A name is *exercised* when a behavioural test (a
`test_*.py` outside tests/manifest) uses it: it names it (a method: in a file that also
names its class; `__init__`/`call`/`build` run whenever the class is used), or it is an
operator of a table that a test drives operator by operator (PopART's `ai.graphcore`
operators: tests/popart/test_graphcore_op_table.py builds every one). This is read from
the tests' text, so it says that a test uses the name, not how thoroughly.

`python tests/manifest/api_coverage.py` prints the figure the README quotes.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).parent
TESTS = HERE.parent
FAMILIES = {
    "TensorFlow ipu": "tensorflow_ipu.txt",
    "Keras on the IPU": "keras_ipu.txt",
    "PopART": "popart.txt",
    "ipu_tensorflow_addons": "ipu_tensorflow_addons.txt",
}
#: Methods that run whenever their class is used.
IMPLICIT_METHODS = {"__init__", "__call__", "call", "build"}
#: How programs reach a class's methods without naming the class.
OWNER_ALIASES = {
    "AiGraphcoreOpset1": ("aiGraphcore",),
    "Builder": ("Builder", "builder"),
}
#: Names whose implementation is still to come: their issue is open (other work).
PENDING: set[str] = set()


def manifest_names(file_name: str) -> list[str]:
    """The names of a manifest (its last column; `tensorflow_ipu.txt` has sections first)."""
    lines = (HERE / file_name).read_text().splitlines()
    return [line.split()[-1] for line in lines if line.strip() and not line.startswith("#")]


@functools.cache
def _behavioural_tests() -> dict[pathlib.Path, frozenset[str]]:
    """Each behavioural test file's words."""
    return {
        path: frozenset(re.findall(r"\w+", path.read_text()))
        for path in TESTS.rglob("test_*.py")
        if HERE not in path.parents
    }


@functools.cache
def _graphcore_operator_methods() -> frozenset[str]:
    from openipu._src.popart.graphcore_ops import GRAPHCORE_OPS

    return frozenset(_plain(op_type) for op_type in GRAPHCORE_OPS)


def _plain(name: str) -> str:
    return name.replace("_", "").lower()


def _word(words: frozenset[str], word: str) -> bool:
    return word in words


def exercising_tests(name: str) -> list[pathlib.Path]:
    """The behavioural test files that use `name`."""
    parts = name.split(".")
    last, owner = parts[-1], parts[-2]
    tests = _behavioural_tests()
    if owner == "AiGraphcoreOpset1" and _plain(last) in _graphcore_operator_methods():
        return [TESTS / "popart" / "test_graphcore_op_table.py"]
    is_method = (owner[:1].isupper() or owner == "strategy_model") and not last[:1].isupper()
    if is_method and owner != "strategy_model":
        owners = OWNER_ALIASES.get(owner, (owner,))
        return [
            path
            for path, words in tests.items()
            if any(_word(words, o) for o in owners)
            and (last in IMPLICIT_METHODS or _word(words, last))
        ]
    return [path for path, words in tests.items() if _word(words, last)]


def resolves(name: str) -> bool:
    """Whether `name` exists at its documented path."""
    sys.path.insert(0, str(HERE))
    try:
        from test_popart_public_api import test_popart_public_name_resolves
        from test_public_api import _resolve
    finally:
        sys.path.remove(str(HERE))
    try:
        if name.startswith("strategy_model."):
            return callable(getattr(_strategy_model(), name.split(".", 1)[1], None))
        if name.startswith("popart."):
            # The Builder's methods are forwarded per instance (test_popart_public_api.py).
            test_popart_public_name_resolves(name)
            return True
        return _resolve(name) is not None
    except (ImportError, AttributeError, AssertionError):
        return False


@functools.cache
def _strategy_model():
    import tensorflow as tf
    from tensorflow.python import ipu

    with ipu.ipu_strategy.IPUStrategy().scope():
        return tf.keras.Sequential([tf.keras.layers.Dense(1)])


@dataclasses.dataclass(frozen=True)
class FamilyCount:
    family: str
    names: int
    resolved: int
    exercised: int
    pending: int


def count(family: str) -> FamilyCount:
    names = manifest_names(FAMILIES[family])
    pending = [n for n in names if n in PENDING]
    resolved = [n for n in names if n not in PENDING and resolves(n)]
    exercised = [n for n in resolved if exercising_tests(n)]
    return FamilyCount(family, len(names), len(resolved), len(exercised), len(pending))


def figure() -> str:
    """The README's table: per family, names documented, resolved and exercised."""
    rows = [count(family) for family in FAMILIES]
    lines = [
        "| API family | documented names | resolve | exercised by a test | pending (not built yet) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {row.family} | {row.names} | {row.resolved} | {row.exercised} | {row.pending} |"
        )
    total = FamilyCount(
        "all",
        *(sum(getattr(r, f) for r in rows) for f in ("names", "resolved", "exercised", "pending")),
    )
    lines.append(
        f"| **all** | {total.names} | {total.resolved} | {total.exercised} | {total.pending} |"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(figure())
