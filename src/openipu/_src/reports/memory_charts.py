"""The memory plots: bytes per IPU by category, bytes per tile, live bytes over the schedule.

An IPU runs out of memory when any one of its tiles does (a tile reaches only its own
memory), so the tile plot, not the IPU total, is where an out-of-memory program shows.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from openipu._src.engine.cost_model.report_schema import CostReport, IpuMemory
from openipu._src.reports import svg
from openipu._src.reports.formatting import format_bytes, format_count, format_share

#: The on-chip categories in the order they stack (the schema's order); others follow, sorted.
CATEGORY_ORDER = (
    "weights",
    "optimizer_state",
    "activations",
    "gradient_accumulators",
    "streams",
    "exchange",
    "code",
    "temporaries",
)
#: Held in host or streaming memory, not on the chip: listed beside the bars, never stacked.
OFF_CHIP = ("remote_buffers",)

_LEFT = 70  # room for the y axis' labels
_RIGHT = 10
_TOP = 10
_PLOT_HEIGHT = 110


def on_chip_categories(reports: Sequence[CostReport]) -> list[str]:
    """Every on-chip category the reports name, in stacking order."""
    named = {name for report in reports for ipu in report["ipus"] for name in ipu["categories"]}
    extra = sorted(named - set(CATEGORY_ORDER) - set(OFF_CHIP))
    return [name for name in CATEGORY_ORDER if name in named] + extra


def category_class(name: str) -> str:
    """The CSS class colouring a category (names outside the schema share one colour)."""
    if name in CATEGORY_ORDER or name in OFF_CHIP:
        return f"category-{name}"
    return "category-other category-" + re.sub(r"[^a-z0-9_-]", "_", name.lower())


def memory_per_ipu(report: CostReport, prefix: str) -> str:
    """One stacked bar per IPU, the categories in stacking order, a line at the capacity."""
    ipus = report["ipus"]
    categories = on_chip_categories([report])
    scale_top = max([ipu["capacity_bytes"] for ipu in ipus] + [ipu["total_bytes"] for ipu in ipus])
    left, span = 60, svg.WIDTH - 60 - 250  # labels on the left, figures on the right
    row_height = 30
    rows = []
    for row, ipu in enumerate(ipus):
        y = row * row_height
        x = float(left)
        segments = []
        for name in categories:
            size = ipu["categories"].get(name, 0)
            width = span * size / scale_top if scale_top else 0
            segments.append(
                svg.element(
                    "rect",
                    {
                        "class": f"memory-segment {category_class(name)}",
                        "x": x,
                        "y": y + 4,
                        "width": width,
                        "height": row_height - 8,
                        "data-category": name,
                        "data-bytes": size,
                    },
                    svg.title(f"IPU {ipu['index']} {name}: {format_bytes(size)} ({size:,} bytes)"),
                )
            )
            x += width
        capacity_x = left + span * ipu["capacity_bytes"] / scale_top if scale_top else left
        over = ipu["total_bytes"] > ipu["capacity_bytes"]
        figures = (
            f"{format_bytes(ipu['total_bytes'])} of {format_bytes(ipu['capacity_bytes'])}"
            f" ({format_share(ipu['total_bytes'], ipu['capacity_bytes'])})"
        )
        rows.append(
            svg.element(
                "g",
                {
                    "class": "ipu-memory over" if over else "ipu-memory",
                    "data-ipu": ipu["index"],
                    "data-total-bytes": ipu["total_bytes"],
                    "data-capacity-bytes": ipu["capacity_bytes"],
                },
                svg.element(
                    "text",
                    {"class": "bar-label", "x": left - 6, "y": y + 20},
                    f"IPU {ipu['index']}",
                )
                + "".join(segments)
                + svg.element(
                    "line",
                    {
                        "class": "capacity-line",
                        "x1": capacity_x,
                        "x2": capacity_x,
                        "y1": y,
                        "y2": y + row_height,
                        "data-bytes": ipu["capacity_bytes"],
                    },
                    svg.title(f"capacity {format_bytes(ipu['capacity_bytes'])}"),
                )
                + svg.element(
                    "text",
                    {"class": "bar-value", "x": max(x, capacity_x) + 6, "y": y + 20},
                    figures,
                ),
            )
        )
    return svg.plot(
        f"{prefix}-memory", "memory-plot", len(ipus) * row_height, "".join(rows), ipus=len(ipus)
    )


def _y_position(value: float, top: float, bottom: float = 0.0) -> float:
    span = top - bottom
    return _TOP + _PLOT_HEIGHT * (1 - (value - bottom) / span) if span else _TOP + _PLOT_HEIGHT


def _frame(top: float, marks: Sequence[tuple[float, str]], bottom: float = 0.0) -> str:
    """The axis: a baseline at `bottom` and labelled marks (value, label) on the left."""
    width = svg.WIDTH - _RIGHT
    base = _TOP + _PLOT_HEIGHT
    parts = [
        svg.element("line", {"class": "axis", "x1": _LEFT, "x2": width, "y1": base, "y2": base}),
        svg.element(
            "text",
            {"class": "axis-label", "x": _LEFT - 4, "y": base + 4},
            format_bytes(bottom) if bottom else "0",
        ),
    ]
    for value, label in marks:
        y = _y_position(value, top, bottom)
        parts.append(
            svg.element(
                "text", {"class": "axis-label", "x": _LEFT - 4, "y": y + 4}, html.escape(label)
            )
        )
    return "".join(parts)


def tile_plot(ipu: IpuMemory, bytes_per_tile: int, prefix: str) -> str:
    """One bar per tile (its bytes), the tile's capacity as a line; tiles over it marked."""
    tiles = ipu["tile_bytes"]
    top = max([bytes_per_tile, *tiles]) * 1.08 or 1
    width = (svg.WIDTH - _LEFT - _RIGHT) / max(len(tiles), 1)
    bars = []
    for index, size in enumerate(tiles):
        y = _y_position(size, top)
        bars.append(
            svg.element(
                "rect",
                {
                    "class": "tile over" if size > bytes_per_tile else "tile",
                    "x": round(_LEFT + index * width, 2),
                    "y": round(y, 2),
                    "width": round(width, 3),
                    "height": round(_TOP + _PLOT_HEIGHT - y, 2),
                    "data-tile": index,
                    "data-bytes": size,
                },
            )
        )
    capacity_y = _y_position(bytes_per_tile, top)
    capacity = svg.element(
        "line",
        {
            "class": "tile-capacity-line",
            "x1": _LEFT,
            "x2": svg.WIDTH - _RIGHT,
            "y1": capacity_y,
            "y2": capacity_y,
            "data-bytes": bytes_per_tile,
        },
        svg.title(f"tile capacity {format_bytes(bytes_per_tile)}"),
    )
    frame = _frame(top, [(bytes_per_tile, format_bytes(bytes_per_tile))])
    return svg.plot(
        f"{prefix}-ipu{ipu['index']}-tiles",
        "tile-plot",
        _TOP + _PLOT_HEIGHT + 20,
        frame + "".join(bars) + capacity,
        ipu=ipu["index"],
        tiles=len(tiles),
        tiles_over=sum(size > bytes_per_tile for size in tiles),
        max_bytes=max(tiles, default=0),
    )


def liveness_plot(ipu: IpuMemory, op_names: Sequence[str], prefix: str) -> str:
    """Live bytes after each op of this IPU's schedule, the peak marked.

    `op_names` are this IPU's ops in schedule order (for the peak's tooltip), when known.
    """
    live = ipu["liveness"]
    low, high = min(live, default=0), max(live, default=0)
    # Variables stay live throughout: from zero, what changes would be a flat line on top of
    # them, so the axis starts near the lowest point once that is over half the peak.
    bottom = max(low - (high - low) * 0.1, 0) if low > high / 2 else 0.0
    top = high + (high - bottom) * 0.1 or 1
    step = (svg.WIDTH - _LEFT - _RIGHT) / max(len(live) - 1, 1)
    points = " ".join(
        f"{_LEFT + index * step:.2f},{_y_position(size, top, bottom):.2f}"
        for index, size in enumerate(live)
    )
    content = _frame(top, [(high, format_bytes(high))], bottom)
    if live:
        # The x axis: the schedule, first op to last.
        below = _TOP + _PLOT_HEIGHT + 16
        content += svg.element(
            "text", {"class": "axis-label start", "x": _LEFT, "y": below}, "op 0"
        )
        content += svg.element(
            "text",
            {"class": "axis-label", "x": svg.WIDTH - _RIGHT, "y": below},
            f"op {len(live) - 1}",
        )
    content += svg.element(
        "polyline", {"class": "liveness-line", "points": points, "data-points": len(live)}
    )
    if live:
        peak = max(range(len(live)), key=live.__getitem__)
        after = f" after {op_names[peak]}" if len(op_names) == len(live) else ""
        content += svg.element(
            "circle",
            {
                "class": "liveness-peak",
                "cx": _LEFT + peak * step,
                "cy": _y_position(live[peak], top, bottom),
                "r": 4,
                "data-step": peak,
                "data-bytes": live[peak],
            },
            svg.title(
                f"peak {format_bytes(live[peak])} ({format_count(live[peak])} bytes) at op {peak}{after}"
            ),
        )
    return svg.plot(
        f"{prefix}-ipu{ipu['index']}-liveness",
        "liveness-plot",
        _TOP + _PLOT_HEIGHT + 20,
        content,
        ipu=ipu["index"],
        points=len(live),
        peak_bytes=max(live, default=0),
    )
