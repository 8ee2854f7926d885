"""`popart.DebugContext` and `popart.DebugInfo` (spec 13.10.3).

On the hardware a debug context carries a name and a source location into the profile. We
have no profile, so a DebugContext is the name itself: a `str` subclass, which is why it
converts implicitly wherever a builder method takes `debugContext` (fact sheet: "str converts
implicitly").
"""

from __future__ import annotations

import itertools
from typing import Any

_ids = itertools.count(1)


class DebugContext(str):
    """A debug name; `DebugContext()` is the empty name."""

    def __new__(cls, name: str = "") -> DebugContext:
        if not isinstance(name, str):
            raise TypeError(f"DebugContext: name must be a str, got {type(name).__name__} {name!r}")
        return super().__new__(cls, name)


class DebugInfo:
    """Profile information attached to a debug context: a unique id and named values."""

    def __init__(self, debugContext: str | DebugContext = "", layer: str = "popart") -> None:
        self._id = next(_ids)
        self.debugContext = DebugContext(str(debugContext))
        self.layer = layer
        self.values: dict[str, Any] = {}

    def getId(self) -> int:
        return self._id

    def setValue(self, name: str, value: Any) -> bool:
        """Records `value` under `name`; False (and no change) if the name is already set,
        as the original keeps the first value of a key."""
        if not isinstance(name, str):
            raise TypeError(f"DebugInfo.setValue: name must be a str, got {name!r}")
        if name in self.values:
            return False
        self.values[name] = value
        return True
