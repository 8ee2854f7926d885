"""Submodules that a public package imports on first use, as attributes (`ipu.config`).

A name whose module is not there (not implemented, or needing a package that is not
installed) must behave as a missing attribute: `hasattr` is False, `getattr(m, name,
default)` gives the default, and `dir()` does not list it. An ImportError escaping
`__getattr__` would break all three, and with them programs that probe the API.
"""

from __future__ import annotations

import importlib
import importlib.util
import types
from collections.abc import Iterable

import _openipu_startup


class LazySubmodules:
    """The lazily imported submodules `names` of the package `package`, shown to users as
    `public_name` (the original's module path)."""

    def __init__(self, package: str, public_name: str, names: Iterable[str]) -> None:
        self._package = package
        self._public_name = public_name
        self._names = frozenset(names)
        self._missing: dict[str, ImportError] = {}

    def attribute(self, name: str) -> types.ModuleType:
        """The submodule `name`, imported now; AttributeError if it is not there."""
        if name not in self._names:
            raise AttributeError(f"module {self._public_name!r} has no attribute {name!r}")
        if name not in self._missing:
            try:
                return importlib.import_module(f"{self._package}.{name}")
            except ImportError as error:
                if self._exists(name) and not isinstance(error, ModuleNotFoundError):
                    raise  # a broken module, not a missing one: show the real error
                self._missing[name] = error
        raise AttributeError(
            f"module {self._public_name!r} has no attribute {name!r}: its module cannot be "
            f"imported ({self._missing[name]})"
        ) from self._missing[name]

    def listing(self, module_globals: Iterable[str]) -> list[str]:
        """`dir()` of the package: its globals and the submodules that are there."""
        present = {name for name in self._names if name not in self._missing and self._exists(name)}
        return sorted(set(module_globals) | present)

    def _exists(self, name: str) -> bool:
        # The alias finder answers for every alias name: look for the module it points to.
        full_name = f"{self._package}.{name}"
        target = _openipu_startup.resolve_alias(full_name) or full_name
        try:
            return importlib.util.find_spec(target) is not None
        except ImportError:
            return False
