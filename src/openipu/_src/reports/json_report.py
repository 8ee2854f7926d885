"""The report's data as one JSON file: the same CostReports the page shows, by label."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import cast

from openipu._src.engine.cost_model import report_files
from openipu._src.engine.cost_model.report_schema import CostReport

FORMAT = "openipu-cost-reports"
VERSION = 1


def write_json_report(reports: Mapping[str, CostReport], path: str | os.PathLike[str]) -> None:
    """`{"format", "version", "reports": {label: CostReport}}`, labels in the page's order."""
    document = {"format": FORMAT, "version": VERSION, "reports": dict(reports)}
    report_files.write_text_atomically(path, json.dumps(document, indent=1) + "\n")


def read_json_report(path: str | os.PathLike[str]) -> dict[str, CostReport]:
    """The reports `write_json_report` wrote, in their order."""
    with open(path, encoding="utf-8") as stream:
        document = json.load(stream)
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"{os.fspath(path)} is not an openipu cost report collection")
    return cast(dict[str, CostReport], document["reports"])
