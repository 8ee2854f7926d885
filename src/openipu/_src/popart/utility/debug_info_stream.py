"""`popart.initializePoplarDebugInfo` / `closePoplarDebugInfo`: debug infos to a file.

The original starts and stops Poplar's debug-info streamer (python/popart/popart_core/
popart.cpp). Here every DebugInfo made between the two calls is kept and, on close, written
as Poplar writes them: a "contexts" list (each context's name and file names as indices
into a "stringTable", its layer, parent id, source location and values), last made first,
since Poplar writes a context when it is destroyed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from openipu._src.popart.errors import incompatible_arguments

if TYPE_CHECKING:
    from openipu._src.popart.utility.debug_context import DebugInfo


@dataclass
class _Stream:
    filename: str
    format: str
    infos: list[DebugInfo] = field(default_factory=list)


_open_stream: _Stream | None = None


def is_open() -> bool:
    """Whether initializePoplarDebugInfo is recording."""
    return _open_stream is not None


def record(info: DebugInfo) -> None:
    if _open_stream is not None:
        _open_stream.infos.append(info)


def initializePoplarDebugInfo(filename: str, format: str = "json") -> None:  # noqa: N802, A002
    # import cycle: debug_context imports this module
    from openipu._src.popart.utility.debug_context import restart_ids

    global _open_stream
    if not isinstance(filename, str) or not isinstance(format, str):
        raise incompatible_arguments(
            "initializePoplarDebugInfo",
            ["(filename: str, format: str = 'json') -> None"],
            [filename, format],
        )
    restart_ids()
    _open_stream = _Stream(filename, format)


def _context(info: DebugInfo, strings: dict[str, int]) -> dict[str, Any]:
    def index(text: str) -> int:
        return strings.setdefault(text, len(strings))

    context = info.debugContext
    entry: dict[str, Any] = {"id": info.getId(), "name": index(str(context)), "layer": info.layer}
    if context.parentId is not None:
        entry["parentId"] = context.parentId
    location = context.location
    entry["location"] = {
        "fileName": index(location.fileName),
        "functionName": index(location.functionName),
        "lineNumber": location.lineNumber,
    }
    entry.update(info.values)
    return entry


def closePoplarDebugInfo() -> None:  # noqa: N802
    """Write the recorded debug infos (JSON; "cbor" is written as JSON too) and stop."""
    global _open_stream
    stream, _open_stream = _open_stream, None
    if stream is None:
        return
    strings: dict[str, int] = {}
    contexts = [_context(info, strings) for info in reversed(stream.infos)]
    with open(stream.filename, "w", encoding="utf-8") as debug_file:
        json.dump({"contexts": contexts, "stringTable": list(strings)}, debug_file, default=str)
