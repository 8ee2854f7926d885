"""`openipu report PROGRAM_OR_DIR`: the cost model's estimates as an HTML page and JSON.

A directory: every `*.cost.json` below it is rendered. A Python program: it runs in a child
process with `OPENIPU_COST_REPORT_DIR` naming a temporary directory, where the engine writes
one `<program name>.cost.json` per compiled program; those are rendered once it ends (also
when it fails: a program that runs out of memory is the one whose report matters most).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile
from collections.abc import Sequence

from openipu._src.engine.cost_model import report_files
from openipu._src.engine.cost_model.report_schema import CostReport
from openipu._src.reports import cost_files, html_report, json_report

#: The exit status of a command-line mistake (argparse's too): a missing path, no reports.
USAGE_ERROR = 2


def output_paths(out: str | None, default: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """The HTML and JSON files: `OUT` (or `default`) with `.html` and `.json` suffixes.

    `OUT` may be a directory (then `report.html` and `report.json` in it).
    """
    base = pathlib.Path(out) if out else default
    if base.is_dir():
        base = base / "report.html"
    html_path = base if base.suffix == ".html" else base.with_suffix(".html")
    return html_path, html_path.with_suffix(".json")


def run(path: str, out: str | None, program_args: Sequence[str] = ()) -> int:
    target = pathlib.Path(path)
    if not target.exists():
        print(f"openipu report: {path}: no such file or directory", file=sys.stderr)
        return USAGE_ERROR
    if target.is_dir():
        if program_args:
            print(
                f"openipu report: {path} is a directory: arguments ({' '.join(program_args)}) "
                "are for a program",
                file=sys.stderr,
            )
            return USAGE_ERROR
        return _render_directory(target, *output_paths(out, target / "report.html"))
    if target.suffix != ".py":
        print(
            f"openipu report: {path}: neither a directory of *.cost.json files nor a Python program",
            file=sys.stderr,
        )
        return USAGE_ERROR
    html_path, json_path = output_paths(out, target.with_suffix(".report.html"))
    with tempfile.TemporaryDirectory(prefix="openipu-cost-") as directory:
        status = _run_program(target, pathlib.Path(directory), program_args)
        if not cost_files.find_cost_files(pathlib.Path(directory)):
            ended = f" (it exited with status {status})" if status else ""
            print(
                f"openipu report: {path} compiled no IPU program: no cost reports{ended}",
                file=sys.stderr,
            )
            return USAGE_ERROR
        rendered = _render_directory(pathlib.Path(directory), html_path, json_path)
    if status:
        print(f"openipu report: {path} exited with status {status}", file=sys.stderr)
    return status or rendered


def _run_program(program: pathlib.Path, directory: pathlib.Path, args: Sequence[str]) -> int:
    """Runs `program` as `python PROGRAM ARGS` would, its estimates written to `directory`."""
    environment = {**os.environ, report_files.REPORT_DIR_ENV: str(directory)}
    return subprocess.run([sys.executable, str(program), *args], env=environment).returncode


def _render_directory(
    directory: pathlib.Path, html_path: pathlib.Path, json_path: pathlib.Path
) -> int:
    try:
        reports: dict[str, CostReport] = cost_files.load_directory(directory)
    except cost_files.ReportError as error:
        print(f"openipu report: {error}", file=sys.stderr)
        return USAGE_ERROR
    if not reports:
        print(
            f"openipu report: {directory}: no cost reports (*{report_files.SUFFIX}) found",
            file=sys.stderr,
        )
        return USAGE_ERROR
    html_path.parent.mkdir(parents=True, exist_ok=True)
    html_report.write_html_report(reports, html_path)
    json_report.write_json_report(reports, json_path)
    out_of_memory = sum(not report["fits"] for report in reports.values())
    print(
        f"{len(reports)} program(s), {out_of_memory} out of memory: wrote {html_path} and {json_path}"
    )
    return 0
