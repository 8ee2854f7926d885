"""`popart.DebugContext` and `popart.DebugInfo` (spec 13.10.3).

On the hardware a debug context carries a name and a source location into the profile. We
have no profile, so a DebugContext is the name itself: a `str` subclass, which is why it
converts implicitly wherever a builder method takes `debugContext` (fact sheet: "str converts
implicitly"). It also keeps the parent DebugInfo's id and the place it was made, which
`popart.initializePoplarDebugInfo` writes out (utility/debug_info_stream.py).
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass
from typing import Any

from openipu._src.popart.utility import debug_info_stream

_ids = itertools.count(1)


@dataclass(frozen=True)
class SourceLocation:
    fileName: str  # noqa: N815 - the original's field names
    functionName: str  # noqa: N815
    lineNumber: int  # noqa: N815


def _caller_location() -> SourceLocation:
    """Where the user's code made the DebugContext (two frames up: __new__'s caller)."""
    frame = sys._getframe(2)
    return SourceLocation(frame.f_code.co_filename, frame.f_code.co_name, frame.f_lineno)


class DebugContext(str):
    """`DebugContext()`, `DebugContext(name)` or `DebugContext(parentDebugInfo, name)`."""

    parentId: int | None
    location: SourceLocation

    def __new__(cls, *args: Any) -> DebugContext:
        parent: DebugInfo | None = None
        if args and isinstance(args[0], DebugInfo):
            parent, args = args[0], args[1:]
        if len(args) > 1:
            raise TypeError(f"DebugContext takes at most a parent DebugInfo and a name, got {args}")
        name = args[0] if args else ""
        if not isinstance(name, str):
            raise TypeError(f"DebugContext: name must be a str, got {type(name).__name__} {name!r}")
        context = super().__new__(cls, name)
        context.parentId = None if parent is None else parent.getId()
        context.location = getattr(name, "location", None) or _caller_location()
        return context


class DebugInfo:
    """Profile information attached to a debug context: a unique id and named values."""

    def __init__(self, debugContext: str | DebugContext = "", layer: str = "popart") -> None:  # noqa: N803
        self._id = next(_ids)
        if not isinstance(debugContext, DebugContext):
            debugContext = DebugContext(str(debugContext))  # noqa: N806
        self.debugContext = debugContext
        self.layer = layer
        self.values: dict[str, Any] = {}
        debug_info_stream.record(self)

    def getId(self) -> int:  # noqa: N802
        return self._id

    def setValue(self, name: str, value: Any) -> bool:  # noqa: N802
        """Records `value` under `name`; False (and no change) if the name is already set,
        as the original keeps the first value of a key."""
        if not isinstance(name, str):
            raise TypeError(f"DebugInfo.setValue: name must be a str, got {name!r}")
        if name in self.values:
            return False
        self.values[name] = value
        return True


def restart_ids() -> None:
    """A new debug-info stream numbers its contexts from 1, as Poplar's does."""
    global _ids
    _ids = itertools.count(1)
