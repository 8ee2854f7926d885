"""The cycle plots: where a step's cycles go, cycles per pipeline stage, the costliest ops."""

from __future__ import annotations

from collections.abc import Sequence

from openipu._src.engine.cost_model.report_schema import Cycles, OpCost
from openipu._src.reports import svg
from openipu._src.reports.formatting import format_count, format_share

#: How many ops the bar chart shows (the table and the JSON have them all).
TOP_OPS = 20


def cycle_breakdown(cycles: Cycles) -> dict[str, int]:
    """The parts of the estimate, in the schema's order (per_step/per_call are derived)."""
    return {
        "compute": cycles["compute"],
        "exchange": cycles["exchange"],
        "sync": cycles["sync"],
        "host_io": cycles["host_io"],
        "collectives": cycles["collectives"],
        "pipeline_bubble": cycles["pipeline_bubble"],
    }


def cycle_parts(cycles: Cycles, prefix: str) -> str:
    parts = cycle_breakdown(cycles)
    total = sum(parts.values())
    bars = [
        svg.Bar(
            label=part.replace("_", " "),
            value=count,
            value_text=f"{format_count(count)} ({format_share(count, total)})",
            css_class=f"cycle-part part-{part}",
            data={"part": part, "cycles": count},
        )
        for part, count in parts.items()
    ]
    return svg.horizontal_bars(f"{prefix}-cycle-parts", "cycle-parts-plot", bars)


def stage_bars(per_stage: Sequence[int], prefix: str) -> str:
    bars = [
        svg.Bar(
            label=f"stage {stage}",
            value=cycles,
            value_text=format_count(cycles),
            css_class="stage-bar",
            data={"stage": stage, "cycles": cycles},
        )
        for stage, cycles in enumerate(per_stage)
    ]
    return svg.horizontal_bars(f"{prefix}-stages", "stage-plot", bars)


def costliest_ops(ops: Sequence[OpCost], limit: int = TOP_OPS) -> list[OpCost]:
    """The `limit` ops of most cycles, most first (ties in schedule order)."""
    return sorted(ops, key=lambda op: -op["cycles"])[:limit]


def op_bars(ops: Sequence[OpCost], prefix: str) -> str:
    total = sum(op["cycles"] for op in ops)
    bars = [
        svg.Bar(
            label=op["name"],
            value=op["cycles"],
            value_text=f"{format_count(op['cycles'])} ({format_share(op['cycles'], total)})",
            css_class="op-bar",
            data={"op": op["name"], "rank": rank, "cycles": op["cycles"]},
            tooltip=(
                f"{op['name']} ({op['type']}, IPU {op['ipu']}, stage {op['stage']}): "
                f"{format_count(op['cycles'])} cycles, {format_count(op['flops'])} FLOPs"
            ),
        )
        for rank, op in enumerate(costliest_ops(ops))
    ]
    return svg.horizontal_bars(f"{prefix}-ops", "op-plot", bars)
