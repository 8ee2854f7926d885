"""The figures a reader looks at first: fits or not, cycles and time per step and per call.

Each figure is an element with a stable id (`<prefix>-<figure>`) and its exact value in
`data-value` (cycles and bytes as integers, seconds as Python's `repr` of the float), so the
page can be checked against its CostReport.
"""

from __future__ import annotations

import html

from openipu._src.engine.cost_model.report_schema import CostReport, IpuMemory
from openipu._src.reports import svg
from openipu._src.reports.formatting import (
    format_bytes,
    format_count,
    format_seconds,
    format_share,
)


def seconds_at_clock(cycles: int, clock_hz: float) -> float:
    return cycles / clock_hz if clock_hz else 0.0


def fullest_ipu(report: CostReport) -> IpuMemory | None:
    """The IPU nearest its capacity (or furthest over it); None for a report of no IPUs."""
    return max(
        report["ipus"],
        key=lambda ipu: ipu["total_bytes"] / (ipu["capacity_bytes"] or 1),
        default=None,
    )


def verdict(report: CostReport, prefix: str) -> str:
    """Fits (and how full), or out of memory (and the IPUs and tiles that overflow)."""
    chip = report["chip"]
    problems = []
    for ipu in report["ipus"]:
        if ipu["total_bytes"] > ipu["capacity_bytes"]:
            problems.append(
                f"IPU {ipu['index']} needs {format_bytes(ipu['total_bytes'])} of "
                f"{format_bytes(ipu['capacity_bytes'])}"
            )
        over = sum(size > chip["bytes_per_tile"] for size in ipu["tile_bytes"])
        if over:
            problems.append(
                f"{format_count(over)} of IPU {ipu['index']}'s tiles over their "
                f"{format_bytes(chip['bytes_per_tile'])}"
            )
    if report["fits"]:
        fullest = fullest_ipu(report)
        text = "Fits" + (
            f": at most {format_share(fullest['total_bytes'], fullest['capacity_bytes'])} of an "
            f"IPU's memory (IPU {fullest['index']})"
            if fullest
            else ""
        )
    else:
        text = "Out of memory" + (": " + "; ".join(problems) if problems else "")
    return svg.element(
        "p",
        {
            "id": f"{prefix}-verdict",
            "class": "verdict fits" if report["fits"] else "verdict out-of-memory",
            "data-fits": "true" if report["fits"] else "false",
        },
        html.escape(text),
    )


def _figure(prefix: str, name: str, label: str, value: object, text: str) -> str:
    return f"<dt>{html.escape(label)}</dt>" + svg.element(
        "dd",
        {"id": f"{prefix}-{name}", "class": "figure", "data-value": value},
        html.escape(text),
    )


def figures(report: CostReport, prefix: str) -> str:
    """The headline list: cycles and time per step and per call, IPUs, peak memory, chip."""
    cycles, chip, program = report["cycles"], report["chip"], report["program"]
    clock = chip["clock_hz"]
    step_seconds = seconds_at_clock(cycles["per_step"], clock)
    call_seconds = seconds_at_clock(cycles["per_call"], clock)
    clock_text = f"at {clock / 1e9:.3g} GHz"
    replicas = int(str(program.get("replicas", 1)))
    ipus_per_replica = int(str(program.get("ipus_per_replica", len(report["ipus"]))))
    peak = fullest_ipu(report)
    items = [
        _figure(
            prefix,
            "cycles-per-step",
            "Cycles per step",
            cycles["per_step"],
            f"{format_count(cycles['per_step'])} cycles",
        ),
        _figure(
            prefix,
            "time-per-step",
            "Time per step",
            repr(step_seconds),
            f"{format_seconds(step_seconds)} {clock_text}",
        ),
        _figure(
            prefix,
            "cycles-per-call",
            "Cycles per call",
            cycles["per_call"],
            f"{format_count(cycles['per_call'])} cycles",
        ),
        _figure(
            prefix,
            "time-per-call",
            "Time per call",
            repr(call_seconds),
            f"{format_seconds(call_seconds)} {clock_text}",
        ),
        _figure(
            prefix,
            "steps-per-call",
            "Steps per call",
            program.get("steps_per_call", 1),
            str(program.get("steps_per_call", 1)),
        ),
        _figure(
            prefix,
            "ipus",
            "IPUs",
            replicas * ipus_per_replica,
            f"{replicas * ipus_per_replica} ({replicas} replica(s) of {ipus_per_replica})",
        ),
    ]
    if peak is not None:
        items.append(
            _figure(
                prefix,
                "peak-memory",
                "Peak IPU memory",
                peak["total_bytes"],
                f"{format_bytes(peak['total_bytes'])} of {format_bytes(peak['capacity_bytes'])} "
                f"(IPU {peak['index']})",
            )
        )
    items.append(
        _figure(
            prefix,
            "chip",
            "Chip",
            chip["version"],
            f"{chip['version']}: {format_count(chip['tiles'])} tiles of "
            f"{format_bytes(chip['bytes_per_tile'])}, {clock / 1e9:.3g} GHz",
        )
    )
    return f'<dl class="headline" id="{prefix}-headline">' + "".join(items) + "</dl>"
