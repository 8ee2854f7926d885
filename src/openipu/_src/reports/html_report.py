"""One self-contained HTML page from one or several CostReports.

Everything is inline (style, a few lines of script, SVG plots drawn here), and the page's
Content-Security-Policy forbids loading anything, so it opens the same offline, from an
e-mail or a CI artifact. Each program's section is `<section id="p<i>">`; its plots and
figures have ids `p<i>-...`, and their exact figures in `data-*` attributes.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping

from openipu._src.engine.cost_model import report_files
from openipu._src.engine.cost_model.report_schema import CostReport
from openipu._src.reports import cycle_charts, headline, memory_charts, page_assets, svg, tables
from openipu._src.reports.formatting import format_bytes, format_count, format_seconds


def write_html_report(reports: Mapping[str, CostReport], path: str | os.PathLike[str]) -> None:
    """Writes the page for `reports` (label -> report, in the order shown) to `path`."""
    report_files.write_text_atomically(path, render_html(reports))


def render_html(reports: Mapping[str, CostReport]) -> str:
    sections = [
        _program_section(label, report, f"p{index}")
        for index, (label, report) in enumerate(reports.items())
    ]
    count = len(reports)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{page_assets.CONTENT_SECURITY_POLICY}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>openipu cost report: {count} program{'s' if count != 1 else ''}</title>"
        f"<style>{page_assets.STYLE}</style></head><body>"
        "<h1>openipu cost report</h1>"
        '<p class="note">Estimates from openipu\'s cost model of the IPU chip, not measurements '
        "on an IPU. Cycles are IPU clock cycles; times are cycles at the chip's clock.</p>"
        + _overall(reports)
        + _summary(reports)
        + "".join(sections)
        + f"<script>{page_assets.SCRIPT}</script></body></html>\n"
    )


def _overall(reports: Mapping[str, CostReport]) -> str:
    out_of_memory = [label for label, report in reports.items() if not report["fits"]]
    if not reports:
        text = "No programs."
    elif out_of_memory:
        text = f"{len(out_of_memory)} of {len(reports)} program(s) run out of memory: " + ", ".join(
            out_of_memory
        )
    else:
        text = f"All {len(reports)} program(s) fit."
    return svg.element(
        "p",
        {
            "id": "overall",
            "class": "verdict out-of-memory" if out_of_memory else "verdict fits",
            "data-programs": len(reports),
            "data-out-of-memory": len(out_of_memory),
        },
        html.escape(text),
    )


def _summary(reports: Mapping[str, CostReport]) -> str:
    rows = []
    for index, (label, report) in enumerate(reports.items()):
        clock = report["chip"]["clock_hz"]
        per_step = report["cycles"]["per_step"]
        peak = headline.fullest_ipu(report)
        cells = (
            f'<td><a href="#p{index}">{html.escape(label)}</a></td>'
            f"<td>{'fits' if report['fits'] else 'out of memory'}</td>"
            f'<td class="number">{len(report["ipus"])}</td>'
            f'<td class="number">{format_count(per_step)}</td>'
            f'<td class="number">{format_seconds(headline.seconds_at_clock(per_step, clock))}</td>'
            f'<td class="number">{format_bytes(peak["total_bytes"]) if peak else "-"}</td>'
        )
        rows.append(
            svg.element(
                "tr",
                {
                    "class": "summary-row" if report["fits"] else "summary-row oom",
                    "data-program": label,
                    "data-fits": "true" if report["fits"] else "false",
                    "data-cycles-per-step": per_step,
                },
                cells,
            )
        )
    head = "".join(
        f"<th>{name}</th>"
        for name in (
            "program",
            "memory",
            "IPUs per replica",
            "cycles per step",
            "time per step",
            "peak IPU memory",
        )
    )
    return (
        f'<table id="summary"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def _program_section(label: str, report: CostReport, prefix: str) -> str:
    chip = report["chip"]
    ops = report["ops"]
    costliest = cycle_charts.costliest_ops(ops, tables.OP_TABLE_ROWS)
    ipu_blocks = []
    for ipu in report["ipus"]:
        # This IPU's ops in schedule order: the liveness figures follow them one to one.
        names = [op["name"] for op in ops if op["ipu"] == ipu["index"]]
        ipu_blocks.append(
            f'<h4>IPU {ipu["index"]}</h4><div class="ipu-block">'
            f'<p class="note">Bytes per tile ({format_count(chip["tiles"])} tiles; the line: '
            f"{format_bytes(chip['bytes_per_tile'])} per tile)</p>"
            + memory_charts.tile_plot(ipu, chip["bytes_per_tile"], prefix)
            + f'<p class="readout" id="{prefix}-ipu{ipu["index"]}-tiles-readout"></p>'
            f'<p class="note">Live bytes after each of the IPU\'s {len(ipu["liveness"])} ops</p>'
            + memory_charts.liveness_plot(ipu, names, prefix)
            + "</div>"
        )
    description = ", ".join(
        f"{name} {value}" for name, value in report["program"].items() if name != "name"
    )
    return svg.element(
        "section",
        {
            "class": "program",
            "id": prefix,
            "data-program": label,
            "data-fits": "true" if report["fits"] else "false",
        },
        f"<h2>{html.escape(label)}</h2>"
        f'<p class="note">{html.escape(description)}</p>'
        + headline.verdict(report, prefix)
        + headline.figures(report, prefix)
        + "<h3>Memory per IPU</h3>"
        + memory_charts.memory_per_ipu(report, prefix)
        + tables.memory_table(report, prefix)
        + "<h3>Memory per tile and over the schedule</h3>"
        + "".join(ipu_blocks)
        + "<h3>Where the cycles go</h3>"
        + cycle_charts.cycle_parts(report["cycles"], prefix)
        + "<h3>Cycles per pipeline stage</h3>"
        + cycle_charts.stage_bars(report["cycles"]["per_stage"], prefix)
        + f"<h3>Costliest ops (top {min(len(ops), cycle_charts.TOP_OPS)} of {len(ops)})</h3>"
        + cycle_charts.op_bars(ops, prefix)
        + f"<details><summary>The {len(costliest)} costliest ops as a table</summary>"
        + tables.op_table(ops, costliest, prefix)
        + "</details><h3>Largest tensors</h3>"
        + tables.tensor_table(report["largest_tensors"], prefix)
        + "<h3>Program and options</h3>"
        + tables.settings_table(report["program"], f"{prefix}-program", "settings-table")
        + tables.settings_table(report["options"], f"{prefix}-options", "settings-table"),
    )
