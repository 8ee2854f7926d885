"""`Patch` records and how they are applied and undone.

A patch names its target by module path and attribute path (`"Model.__new__"`
in `tf_keras.src.engine.training`), so the record can be listed and checked
without importing anything, and the target is looked up when it is applied.
The replacement is built from the original (the raw value in the owner's
`__dict__`, so a `staticmethod`/`classmethod` wrapper can be unwrapped and the
exact descriptor put back on undo).

Two ways to install:
- `apply(patch)` for the life of the process (idempotent);
- `applied(patch)`, a context manager counting its users: the first one in
  installs, the last one out restores the original (unless `apply` made the
  patch permanent meanwhile).
Both are thread-safe. This module imports only the standard library: the
start-up hook uses it before TensorFlow is imported.

Importing a patch's module may itself apply the patch: the start-up hook gives
the Keras API modules their `ipu` attribute as they load. So every entry point
imports the owner first (outside the lock, as the import may re-enter) and only
then reads the patch's state; read the other way round, the state is stale and
the hook's replacement is taken for the stock value.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import importlib
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


class Kind(enum.Enum):
    """What the original attribute is (what `check_target` expects to find)."""

    FUNCTION = "a module-level function"
    METHOD = "a function defined in the class"
    STATICMETHOD = "a staticmethod defined in the class (also `__new__`)"
    CLASSMETHOD = "a classmethod defined in the class"
    PROPERTY = "a property defined in the class"
    NEW_ATTRIBUTE = "an attribute the stock owner does not have"


@dataclass(frozen=True, eq=False)
class Patch:
    """One replaced (or added) attribute of a TensorFlow/Keras module or class."""

    module: str  # "tf_keras.src.engine.training"
    attribute: str  # "Model.__new__": classes, then the attribute
    kind: Kind
    replacement: Callable[[Any], Any] = field(repr=False)  # original (raw) -> new value
    reason: str = ""
    # The major.minor versions this patch was checked against (empty: not that package).
    tensorflow: tuple[str, ...] = ()
    tf_keras: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        return f"{self.module}:{self.attribute}"

    def __str__(self) -> str:
        return self.target


_MISSING = object()
_lock = threading.RLock()
_registry: dict[str, Patch] = {}


@dataclass
class _State:
    original: Any  # raw value from the owner's __dict__, or _MISSING
    users: int = 0  # `applied` contexts open
    permanent: bool = False  # `apply` was called


_states: dict[Patch, _State] = {}


def register(patch: Patch) -> Patch:
    """Adds `patch` to the registry (one patch per target) and returns it."""
    with _lock:
        known = _registry.get(patch.target)
        if known is not None and known is not patch:
            raise ValueError(f"Two patches target {patch.target}")
        _registry[patch.target] = patch
    return patch


def registered() -> list[Patch]:
    """The patches registered so far (`registry.all_patches()` imports every family first)."""
    with _lock:
        return list(_registry.values())


def owner_of(patch: Patch) -> Any:
    """The module or class holding the patched attribute (raises if an upgrade moved it)."""
    module = sys.modules.get(patch.module) or importlib.import_module(patch.module)
    owner = module
    for name in patch.attribute.split(".")[:-1]:
        owner = getattr(owner, name)
    return owner


def _name(patch: Patch) -> str:
    return patch.attribute.rsplit(".", 1)[-1]


def _raw(owner: Any, name: str) -> Any:
    # The owner's own __dict__ (a module's too): no inherited value, no module `__getattr__`.
    return vars(owner).get(name, _MISSING)


def original(patch: Patch) -> Any:
    """The stock value of the target (as the owner stores it), patched or not; None if absent.

    Imports the owner if needed, which may apply the patch (see the module's docstring).
    """
    owner = owner_of(patch)
    with _lock:
        state = _states.get(patch)
        value = state.original if state is not None else _raw(owner, _name(patch))
    return None if value is _MISSING else value


def is_applied(patch: Patch) -> bool:
    with _lock:
        return patch in _states


def check_target(patch: Patch) -> None:
    """Raises if the stock target is not where and what `patch` expects (a moved or removed name)."""
    owner = owner_of(patch)
    value = original(patch)
    expected = {
        Kind.FUNCTION: lambda v: callable(v) and not isinstance(v, type),
        Kind.METHOD: lambda v: callable(v) and not isinstance(v, (staticmethod, classmethod)),
        Kind.STATICMETHOD: lambda v: isinstance(v, staticmethod),
        Kind.CLASSMETHOD: lambda v: isinstance(v, classmethod),
        Kind.PROPERTY: lambda v: isinstance(v, property),
        Kind.NEW_ATTRIBUTE: lambda v: v is None,
    }[patch.kind]
    if patch.kind in (
        Kind.METHOD,
        Kind.STATICMETHOD,
        Kind.CLASSMETHOD,
        Kind.PROPERTY,
    ) and not isinstance(owner, type):
        raise TypeError(f"{patch.target}: the owner {owner!r} is not a class")
    if not expected(value):
        found = "nothing" if value is None else f"{type(value).__name__} {value!r}"
        raise TypeError(f"{patch.target}: expected {patch.kind.value}, found {found}")


def _install(patch: Patch, owner: Any) -> _State:
    name = _name(patch)
    stock = _raw(owner, name)
    setattr(owner, name, patch.replacement(None if stock is _MISSING else stock))
    state = _State(stock)
    _states[patch] = state
    return state


def _restore(patch: Patch, state: _State) -> None:
    owner = owner_of(patch)
    name = _name(patch)
    if state.original is _MISSING:
        if name in vars(owner):
            delattr(owner, name)
    else:
        setattr(owner, name, state.original)
    del _states[patch]


def apply(patch: Patch) -> None:
    """Installs `patch` for the rest of the process (or until `undo`); no-op if it is installed."""
    owner = owner_of(patch)  # first: importing it may apply the patch
    with _lock:
        state = _states.get(patch) or _install(patch, owner)
        state.permanent = True


def undo(patch: Patch) -> None:
    """Restores the original of `patch` (no-op if it is not installed). For tests."""
    with _lock:
        state = _states.get(patch)
        if state is not None:
            _restore(patch, state)


@contextlib.contextmanager
def applied(patch: Patch) -> Iterator[None]:
    """Within this context `patch` is installed; the last context to exit restores the original."""
    owner = owner_of(patch)  # first: importing it may apply the patch
    with _lock:
        state = _states.get(patch) or _install(patch, owner)
        state.users += 1
    try:
        yield
    finally:
        with _lock:
            state.users -= 1
            if state.users == 0 and not state.permanent and _states.get(patch) is state:
                _restore(patch, state)


def delegating(stock: Callable, handler: Callable[[], Callable | None]) -> Callable:
    """A function calling `handler()(stock, *args, **kwargs)`, or `stock` when no handler is set.

    The feature module that installs a patch sets the handler; the integration
    module holding the patch never imports it.
    """

    @functools.wraps(stock)
    def replacement(*args, **kwargs):
        current = handler()
        if current is None:
            return stock(*args, **kwargs)
        return current(stock, *args, **kwargs)

    return replacement
