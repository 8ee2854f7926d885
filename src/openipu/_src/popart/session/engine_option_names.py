"""Poplar's check of engine option names (`SessionOptions.engineOptions`).

Poplar's Engine refuses an option it does not know with "Unrecognised option '<name>'"
(a poplar_exception; the original's options_test matches that ending). Its options are
named `<category>.<name>`; these are the categories Poplar documents. Values and names
within a category are not checked here: the emulator acts on few of them.
"""

from __future__ import annotations

from collections.abc import Mapping

from openipu._src.popart.errors import poplar_exception

CATEGORIES = frozenset(
    {
        "autoReport", "debug", "opt", "profiler", "target", "streamCallbacks", "exchange",
        "platform", "compilation", "dynamicMemory", "progressBar", "instrumentation",
    }
)  # fmt: skip


def check_engine_option_names(options: Mapping[str, str]) -> None:
    for name in options:
        if name.split(".", 1)[0] not in CATEGORIES or "." not in name:
            raise poplar_exception(f"Unrecognised option '{name}'")
