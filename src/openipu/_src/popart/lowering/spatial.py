"""Geometry shared by convolutions and pools: kernel, strides, dilations and padding."""

from __future__ import annotations

import math
from dataclasses import dataclass

import tensorflow as tf

from openipu._src.popart.lowering.op import Op


@dataclass(frozen=True)
class Window:
    """One op's sliding window over the spatial dims (channels-first layout, dims 2...)."""

    kernel: list[int]
    strides: list[int]
    dilations: list[int]
    pads_begin: list[int]
    pads_end: list[int]
    output: list[int]

    @property
    def effective_kernel(self) -> list[int]:
        return [(k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations, strict=True)]


def window_for(
    op: Op, input_spatial: list[int], kernel: list[int], ceil_mode: bool = False
) -> Window:
    """Resolve auto_pad / pads / ceil_mode into explicit begin and end padding."""
    count = len(kernel)
    attrs = op.attrs
    strides = list(attrs.get("strides") or [1] * count)
    dilations = list(attrs.get("dilations") or [1] * count)
    auto_pad = attrs.get("auto_pad") or "NOTSET"
    effective = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        output = [
            math.ceil(size / stride) for size, stride in zip(input_spatial, strides, strict=True)
        ]
        totals = [
            max((out - 1) * stride + eff - size, 0)
            for out, stride, eff, size in zip(
                output, strides, effective, input_spatial, strict=True
            )
        ]
        smaller = [total // 2 for total in totals]
        larger = [total - total // 2 for total in totals]
        begin, end = (smaller, larger) if auto_pad == "SAME_UPPER" else (larger, smaller)
        return Window(kernel, strides, dilations, begin, end, output)
    if auto_pad == "VALID":
        begin = end = [0] * count
    elif auto_pad == "NOTSET":
        pads = list(attrs.get("pads") or [0] * (2 * count))
        begin, end = pads[:count], pads[count:]
    else:
        op.bad_attribute(
            "auto_pad", f"must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, not {auto_pad!r}"
        )
    output = []
    for size, stride, eff, before, after in zip(
        input_spatial, strides, effective, begin, end, strict=True
    ):
        span = size + before + after - eff
        out = (-(-span // stride) if ceil_mode else span // stride) + 1
        if ceil_mode and (out - 1) * stride >= size + before:
            out -= 1  # the last window would start in the end padding only
        output.append(max(out, 0))
    return Window(kernel, strides, dilations, list(begin), list(end), output)


def channels_last(x: tf.Tensor) -> tf.Tensor:
    rank = x.shape.rank
    if x.shape[1] == 1 and x.shape[2:].is_fully_defined():
        # One channel: the same elements in the same order, so a reshape (free) will do.
        return tf.reshape(x, [-1, *x.shape[2:], 1])
    return tf.transpose(x, [0, *range(2, rank), 1])


def channels_first(x: tf.Tensor) -> tf.Tensor:
    rank = x.shape.rank
    if x.shape[-1] == 1 and x.shape[1:-1].is_fully_defined():
        return tf.reshape(x, [-1, 1, *x.shape[1:-1]])
    return tf.transpose(x, [0, rank - 1, *range(1, rank - 1)])


def spatial_pad(
    x: tf.Tensor,
    begin: list[int],
    end: list[int],
    value: float = 0,
    channels_last: bool = False,
) -> tf.Tensor:
    """Pad (or crop, where negative) the spatial dims of a channels-first tensor (or of a
    channels-last one)."""
    if not any(begin) and not any(end):
        return x
    leading = [slice(None)] * (1 if channels_last else 2)
    trailing = [slice(None)] if channels_last else []
    crops = tuple(
        leading
        + [slice(max(-b, 0), (e if e < 0 else None)) for b, e in zip(begin, end, strict=True)]
        + trailing
    )
    x = x[crops]
    spatial = [[max(b, 0), max(e, 0)] for b, e in zip(begin, end, strict=True)]
    paddings = [[0, 0]] + spatial + [[0, 0]] if channels_last else [[0, 0], [0, 0]] + spatial
    return tf.pad(x, paddings, constant_values=tf.cast(value, x.dtype))
