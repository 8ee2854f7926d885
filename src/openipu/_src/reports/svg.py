"""Inline SVG written as text: the report's plots need no library and load nothing.

`element` also writes the page's other tagged HTML (sections, figures, table rows): one
escaping rule for every attribute.

Every plot element carries a class and `data-*` attributes holding its exact figure, so a
reader's tools (and the browser test) can check a plot against its CostReport; `<title>`
children give hover tooltips without script.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: The width of every plot's coordinate system (the page scales it to the column's width).
WIDTH = 760
_LABEL_WIDTH = 230
_VALUE_WIDTH = 120
_ROW_HEIGHT = 22


def attributes(values: Mapping[str, object]) -> str:
    """` name="value" ...`, escaped; floats rounded to what a screen can show."""
    parts = []
    for name, value in values.items():
        text = f"{value:.2f}" if isinstance(value, float) else str(value)
        parts.append(f' {name}="{html.escape(text, quote=True)}"')
    return "".join(parts)


def element(name: str, values: Mapping[str, object], content: str = "") -> str:
    return f"<{name}{attributes(values)}>{content}</{name}>"


def title(text: str) -> str:
    """A tooltip for the element it is put in."""
    return f"<title>{html.escape(text)}</title>"


def plot(plot_id: str, css_class: str, height: float, content: str, **data: object) -> str:
    """An `<svg>` of the common width; `data` becomes `data-*` attributes of the plot."""
    values: dict[str, object] = {
        "id": plot_id,
        "class": f"plot {css_class}",
        "viewBox": f"0 0 {WIDTH} {height:.0f}",
        "role": "img",
    }
    values.update({f"data-{key.replace('_', '-')}": value for key, value in data.items()})
    return element("svg", values, content)


def shorten(text: str, limit: int = 34) -> str:
    """`text`, or its start and end around an ellipsis (op names run long)."""
    if len(text) <= limit:
        return text
    keep = (limit - 1) // 2
    return text[:keep] + "…" + text[-(limit - 1 - keep) :]


@dataclass(frozen=True)
class Bar:
    """One row of a horizontal bar chart."""

    label: str
    value: float
    value_text: str
    css_class: str
    data: Mapping[str, object] = field(default_factory=dict)  # the bar's data-* attributes
    tooltip: str = ""


def horizontal_bars(plot_id: str, css_class: str, bars: Sequence[Bar]) -> str:
    """One bar per row: label on the left, bar scaled to the largest value, figure on the right."""
    largest = max((bar.value for bar in bars), default=0) or 1
    span = WIDTH - _LABEL_WIDTH - _VALUE_WIDTH
    rows = []
    for row, bar in enumerate(bars):
        y = row * _ROW_HEIGHT
        length = span * bar.value / largest
        data = {f"data-{key}": value for key, value in bar.data.items()}
        rows.append(
            element(
                "text",
                {"class": "bar-label", "x": _LABEL_WIDTH - 6, "y": y + 15},
                html.escape(shorten(bar.label)),
            )
            + element(
                "rect",
                {
                    "class": f"bar {bar.css_class}",
                    "x": _LABEL_WIDTH,
                    "y": y + 3,
                    "width": round(length, 2),
                    "height": _ROW_HEIGHT - 6,
                    **data,
                },
                title(bar.tooltip or f"{bar.label}: {bar.value_text}"),
            )
            + element(
                "text",
                {"class": "bar-value", "x": _LABEL_WIDTH + length + 4, "y": y + 15},
                html.escape(bar.value_text),
            )
        )
    return plot(plot_id, css_class, max(len(bars), 1) * _ROW_HEIGHT, "".join(rows), bars=len(bars))
