"""The helpers of the original's test_utils that read Poplar's report files (profiles,
event traces, compute sets, tile memory, cycles).

Emulated IPUs run no Poplar graph, so no such report (profile.pop, PVA) is ever written:
each of these helpers raises a clear error when used, rather than pretending with empty
or invented numbers. openipu's cost model writes its own reports instead (`*.cost.json`
with POPLAR_ENGINE_OPTIONS autoReport, rendered by `openipu report`).
"""

from __future__ import annotations

import fnmatch

from openipu._src.errors import unavailable_function

NO_REPORTS = (
    "{name} reads Poplar's report files (graph and execution profiles, event traces), "
    "which openipu does not write: emulated IPUs run no Poplar graph. openipu's cost model "
    "writes its own estimates instead: POPLAR_ENGINE_OPTIONS autoReport writes a *.cost.json "
    "per compiled program, which `openipu report` renders (see docs/cost-model.md)"
)


class _NeedsReportFiles:
    """Construction fails with `NO_REPORTS`: there is nothing for these objects to read."""

    def __init__(self, *args, **kwargs) -> None:
        raise NotImplementedError(NO_REPORTS.format(name=type(self).__name__))


class ReportHelper(_NeedsReportFiles):
    """Poplar auto-report directories (report_helper.py)."""


class ReportJSON(_NeedsReportFiles):
    """IPU event traces (report_helper.py)."""


class TensorMap(_NeedsReportFiles):
    """The tensor-to-tile map of a compilation report (report_helper.py)."""


class TestCaseExtensions:
    """Assertions on PVA reports (test_case_extensions.py); each one raises."""

    __test__ = False  # not a pytest test class

    def __getattr__(self, name: str):
        if name.startswith("assert_"):
            raise NotImplementedError(NO_REPORTS.format(name=f"TestCaseExtensions.{name}"))
        raise AttributeError(name)


# Of the original's events_utils.py.
(
    enable_ipu_events,
    extract_all_strings_from_event_trace,
    extract_all_types_from_event_trace,
    extract_all_events,
) = (
    unavailable_function(name, NO_REPORTS.format(name=name))
    for name in (
        "enable_ipu_events",
        "extract_all_strings_from_event_trace",
        "extract_all_types_from_event_trace",
        "extract_all_events",
    )
)


def missing_whitelist_entries_in_names(names, whitelist) -> list[str]:
    """The patterns `*entry*` of `whitelist` that match none of `names` (report_helper.py);
    it reads no report, so it works here."""
    patterns = [f"*{entry}*" for entry in whitelist]
    return [p for p in patterns if not any(fnmatch.fnmatch(name, p) for name in names)]
