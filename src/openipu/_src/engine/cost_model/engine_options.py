"""POPLAR_ENGINE_OPTIONS, read as the original's programs set it (a JSON object).

Two of its settings act on the cost model: `debug.allowOutOfMemory` (compile a program
that does not fit) and the auto-report switches, which make each compiled program write
its report (in `autoReport.directory`) and, as in the original (poplar_executor.cc sets
debug.allowOutOfMemory when compiler reports are on), allow out-of-memory programs too.
Only the standard library: report_files reads it.
"""

from __future__ import annotations

import json
import os

_AUTO_REPORT_KEYS = ("autoReport.all", "autoReport.outputGraphProfile")


def poplar_engine_options() -> dict[str, object]:
    """The options POPLAR_ENGINE_OPTIONS holds ({} when unset or not a JSON object)."""
    raw = os.environ.get("POPLAR_ENGINE_OPTIONS", "")
    if not raw:
        return {}
    try:
        options = json.loads(raw)
    except ValueError:
        return {}
    return options if isinstance(options, dict) else {}


def _is_true(value: object) -> bool:
    return str(value).lower() == "true"


def auto_report_on(options: dict[str, object]) -> bool:
    """Whether the options ask for compilation reports."""
    return any(_is_true(options.get(key, "")) for key in _AUTO_REPORT_KEYS)


def allow_out_of_memory(options: dict[str, object]) -> bool:
    """Whether the options let a program that does not fit compile anyway."""
    return _is_true(options.get("debug.allowOutOfMemory", "")) or auto_report_on(options)
