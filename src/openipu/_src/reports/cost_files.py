"""Finding and reading the `*.cost.json` files the engine writes, and naming the reports."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Sequence
from typing import cast

from openipu._src.engine.cost_model import report_files
from openipu._src.engine.cost_model.report_schema import CostReport

#: The keys every CostReport has (a file without them is not one).
_REQUIRED = frozenset(CostReport.__required_keys__)


class ReportError(Exception):
    """A path that holds no readable cost report; the message names it."""


def find_cost_files(directory: pathlib.Path) -> list[pathlib.Path]:
    """Every `*.cost.json` below `directory`, in path order (the page's order)."""
    return sorted(path for path in directory.rglob("*" + report_files.SUFFIX) if path.is_file())


def load_cost_report(path: pathlib.Path) -> CostReport:
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ReportError(f"{path}: cannot read a cost report ({error})") from error
    missing = _REQUIRED - set(values) if isinstance(values, dict) else _REQUIRED
    if missing:
        raise ReportError(f"{path}: not a cost report (missing {', '.join(sorted(missing))})")
    return cast(CostReport, values)


def load_directory(directory: pathlib.Path) -> dict[str, CostReport]:
    """The cost reports below `directory`, labelled by their path relative to it, less
    the `.cost.json` (`bert/train`)."""
    return {
        str(path.relative_to(directory))[: -len(report_files.SUFFIX)]: load_cost_report(path)
        for path in find_cost_files(directory)
    }


def by_program_name(reports: Sequence[CostReport]) -> dict[str, CostReport]:
    """Reports labelled by their program's name (`name (2)`, ... for a name seen before)."""
    labelled: dict[str, CostReport] = {}
    for report in reports:
        name = str(report["program"].get("name", "program"))
        label, count = name, 1
        while label in labelled:
            count += 1
            label = f"{name} ({count})"
        labelled[label] = report
    return labelled
