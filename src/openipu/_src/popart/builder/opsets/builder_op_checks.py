"""Checks the original's Builder makes when it adds a Conv, a pool or a Pad, with its messages.

willow/src/builder_helper.cpp (verifyConvBase, verifyPoolBase, verifyWindowParameters,
verifyPadBase)
refuses window parameters that do not fit the input; the original's builder_test matches
these messages. They run only where the input shapes are known.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from openipu._src.popart.errors import popart_exception

ShapeOf = Callable[[str], "list[int] | None"]


def _dims(values: Sequence[int]) -> str:
    return "[" + " ".join(str(v) for v in values) + "]"


def _window_lengths(attrs: Mapping[str, Any], spatial: int) -> None:
    strides, pads, dilations = (list(attrs.get(n) or []) for n in ("strides", "pads", "dilations"))
    if strides and len(strides) != spatial:
        raise popart_exception(
            f"Length of strides vector {len(strides)} != number of spatial dimensions {spatial}"
        )
    if pads and len(pads) != 2 * spatial:
        raise popart_exception(
            f"Padding vector (length {len(pads)}) does not have 2 values for each spatial "
            f"dimension {spatial}"
        )
    if dilations and len(dilations) != spatial:
        raise popart_exception(
            f"Length of dilations vector {len(dilations)} != number of spatial dimensions {spatial}"
        )


def _truncating_division(a: int, b: int) -> int:
    """C++'s integer division, toward zero."""
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


def check_conv(shape_of: ShapeOf, inputs: Sequence[str], attrs: Mapping[str, Any]) -> None:
    x = shape_of(inputs[0]) if inputs else None
    w = shape_of(inputs[1]) if len(inputs) > 1 else None
    kernel = list(attrs.get("kernel_shape") or [])
    if w is not None and kernel and kernel != w[2:]:
        raise popart_exception(
            f"kernel_shape, {_dims(kernel)}, does not match inferred shape from weight input "
            f"'{inputs[1]}', {_dims(w[2:])}"
        )
    if x is None or len(x) < 3:
        return
    spatial = len(x) - 2
    _window_lengths(attrs, spatial)
    kernel = kernel or (w[2:] if w is not None else [])
    if not kernel or attrs.get("auto_pad") not in (None, "", "NOTSET"):
        return
    pads = list(attrs.get("pads") or [0] * 2 * spatial)
    strides = list(attrs.get("strides") or [1] * spatial)
    dilations = list(attrs.get("dilations") or [1] * spatial)
    out = [
        _truncating_division(
            x[2 + i] + pads[i] + pads[spatial + i] - dilations[i] * (kernel[i] - 1) - 1, strides[i]
        )
        + 1
        for i in range(spatial)
    ]
    if any(size < 0 for size in out):
        raise popart_exception(
            f"Window parameter values combine to give invalid spatial output shape: {_dims(out)}"
        )


def check_pool(shape_of: ShapeOf, inputs: Sequence[str], attrs: Mapping[str, Any]) -> None:
    """The window vectors of MaxPool and AveragePool have one entry (two for pads) per
    spatial dimension (operators_test/pooling_test.py, test_average_pool_invalid_params)."""
    x = shape_of(inputs[0]) if inputs else None
    if x is None:
        return
    if len(x) < 3:
        raise popart_exception("Input tensor has no spatial dimensions")
    _window_lengths(attrs, len(x) - 2)


def check_pad(shape_of: ShapeOf, inputs: Sequence[str], attrs: Mapping[str, Any]) -> None:
    x = shape_of(inputs[0]) if inputs else None
    pads = attrs.get("pads")
    if x is None or pads is None:
        return
    if len(pads) != 2 * len(x):
        raise popart_exception(
            f"Padding vector (length {len(pads)}) doesn't contain 2 entries per input "
            f"dimension {len(x)}"
        )


BUILDER_CHECKS: dict[str, Callable[[ShapeOf, Sequence[str], Mapping[str, Any]], None]] = {
    "Conv": check_conv,
    "Pad": check_pad,
    "MaxPool": check_pool,
    "AveragePool": check_pool,
}
