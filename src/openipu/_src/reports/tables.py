"""The report's tables: bytes by category and IPU, the largest tensors, the costliest ops,
the program's compile decisions and the options that changed the estimate."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence

from openipu._src.engine.cost_model.report_schema import CostReport, OpCost, TensorSize
from openipu._src.reports import svg
from openipu._src.reports.formatting import format_bytes, format_count, format_share
from openipu._src.reports.memory_charts import OFF_CHIP, category_class, on_chip_categories

#: How many of the costliest ops the op table lists (the JSON has every op).
OP_TABLE_ROWS = 50


def _table(table_id: str, css_class: str, header: Sequence[str], rows: Sequence[str]) -> str:
    head = "".join(f"<th>{html.escape(name)}</th>" for name in header)
    return (
        f'<table id="{table_id}" class="{css_class}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _cells(*values: str, numeric_from: int = 1) -> str:
    """`<td>`s, escaped; those from `numeric_from` on are right-aligned figures."""
    return "".join(
        f'<td class="number">{html.escape(v)}</td>'
        if i >= numeric_from
        else f"<td>{html.escape(v)}</td>"
        for i, v in enumerate(values)
    )


def memory_table(report: CostReport, prefix: str) -> str:
    """Bytes per category (rows) and IPU (columns); doubles as the memory plot's legend."""
    ipus = report["ipus"]
    rows = []
    for name in [*on_chip_categories([report]), *OFF_CHIP]:
        if not any(name in ipu["categories"] for ipu in ipus):
            continue
        swatch = f'<span class="swatch {category_class(name)}"></span>'
        label = name.replace("_", " ") + (" (off chip)" if name in OFF_CHIP else "")
        figures = _cells(
            *[format_bytes(ipu["categories"].get(name, 0)) for ipu in ipus], numeric_from=0
        )
        rows.append(
            f'<tr class="category-row" data-category="{html.escape(name)}">'
            f"<td>{swatch}{html.escape(label)}</td>{figures}</tr>"
        )
    for css_class, label, sizes in (
        ("total-row", "total on chip", [ipu["total_bytes"] for ipu in ipus]),
        ("capacity-row", "capacity", [ipu["capacity_bytes"] for ipu in ipus]),
    ):
        figures = _cells(*[format_bytes(size) for size in sizes], numeric_from=0)
        rows.append(f'<tr class="{css_class}"><th>{label}</th>{figures}</tr>')
    header = ["category", *[f"IPU {ipu['index']}" for ipu in ipus]]
    return _table(f"{prefix}-memory-table", "memory-table", header, rows)


def tensor_table(tensors: Sequence[TensorSize], prefix: str) -> str:
    rows = [
        svg.element(
            "tr",
            {"class": "tensor-row", "data-name": tensor["name"], "data-bytes": tensor["bytes"]},
            _cells(
                tensor["name"],
                tensor["kind"],
                str(tensor["ipu"]),
                format_bytes(tensor["bytes"]),
                format_count(tensor["bytes"]),
                numeric_from=2,
            ),
        )
        for tensor in sorted(tensors, key=lambda tensor: -tensor["bytes"])
    ]
    header = ["tensor", "kind", "IPU", "size", "bytes"]
    return _table(f"{prefix}-tensors", "tensor-table", header, rows)


def op_table(ops: Sequence[OpCost], costliest: Sequence[OpCost], prefix: str) -> str:
    total = sum(op["cycles"] for op in ops)
    rows = [
        svg.element(
            "tr",
            {"class": "op-row", "data-op": op["name"], "data-cycles": op["cycles"]},
            _cells(
                op["name"],
                op["type"],
                str(op["ipu"]),
                str(op["stage"]),
                format_count(op["cycles"]),
                format_share(op["cycles"], total),
                format_count(op["flops"]),
                format_bytes(op["output_bytes"]),
                numeric_from=2,
            ),
        )
        for op in costliest
    ]
    header = ["op", "type", "IPU", "stage", "cycles", "share", "FLOPs", "output"]
    return _table(f"{prefix}-op-table", "op-table", header, rows)


def settings_table(values: Mapping[str, object], table_id: str, css_class: str) -> str:
    """Name and value rows (the program's compile decisions, or the options given)."""
    rows = [
        f"<tr><td>{html.escape(str(name))}</td>"
        f"<td><code>{html.escape(json.dumps(value, default=str))}</code></td></tr>"
        for name, value in values.items()
    ]
    return _table(table_id, css_class, ["name", "value"], rows)
