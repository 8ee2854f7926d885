"""The `*.cost.json` files: one CostReport per compiled program, written atomically.

`openipu report PROGRAM.py` runs the program with `OPENIPU_COST_REPORT_DIR` set; the engine
writes each compiled program's estimate there with `write_cost_json`, and the command
renders what it finds. Only the standard library here: the engine writes these files and
the front ends (reports/, cli/) read them, so the format's one definition sits at the bottom.

Every file goes to a temporary file in the target's directory first and is moved into place
with `os.replace`: a reader (the command, possibly while the program still runs) never sees
half a file, even if the writer is killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import secrets

from openipu._src.engine.cost_model import engine_options
from openipu._src.engine.cost_model.report_schema import CostReport

#: The environment variable naming the directory the engine writes `*.cost.json` files into.
REPORT_DIR_ENV = "OPENIPU_COST_REPORT_DIR"
#: How a cost report's file name ends (what `openipu report DIR` looks for).
SUFFIX = ".cost.json"


def report_directory() -> pathlib.Path | None:
    """The directory `OPENIPU_COST_REPORT_DIR` names, or None when it is unset or empty."""
    value = os.environ.get(REPORT_DIR_ENV, "")
    return pathlib.Path(value) if value else None


def requested_directory() -> pathlib.Path | None:
    """Where compiled programs' cost reports go: `OPENIPU_COST_REPORT_DIR`, else Poplar's
    `autoReport.directory` (default the working directory) when POPLAR_ENGINE_OPTIONS turns
    `autoReport.all` or `autoReport.outputGraphProfile` on, as the original writes its
    profiles there; None when no report is asked for."""
    directory = report_directory()
    if directory is not None:
        return directory
    options = engine_options.poplar_engine_options()
    if not engine_options.auto_report_on(options):
        return None
    return pathlib.Path(str(options.get("autoReport.directory", ".")))


def cost_file_name(program_name: str) -> str:
    """`<program name>.cost.json`, with what a file name cannot hold replaced by `_`."""
    # Program names come from users (Keras model names, PopART session names) and may hold
    # path separators or spaces; the file must land in the directory, never beside it.
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", program_name).strip(".") or "program"
    return stem + SUFFIX


def write_cost_json(report: CostReport, directory: str | os.PathLike[str]) -> pathlib.Path:
    """Writes `report` to `<directory>/<program name>.cost.json`; returns the file's path.

    A program of the same name compiled again replaces its earlier file (the newest estimate
    is the one that ran). The directory is created if missing.
    """
    target = pathlib.Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    path = target / cost_file_name(str(report["program"].get("name", "program")))
    write_text_atomically(path, json.dumps(report, indent=1, sort_keys=True) + "\n")
    return path


def write_text_atomically(path: str | os.PathLike[str], text: str) -> None:
    """Replaces `path` with `text` (UTF-8) only once all of it is written."""
    final = pathlib.Path(path)
    temporary = final.with_name(f".{final.name}.{secrets.token_hex(6)}.tmp")
    try:
        # O_EXCL: a fresh file of our own; mode 0o666 lets the umask decide as open() would.
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise
