"""Pooling: MaxPool, AveragePool, LpPool, their global forms, MaxUnpool."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from openipu._src.popart.lowering.op import Op, RunContext
from openipu._src.popart.lowering.registry import register_op
from openipu._src.popart.lowering.spatial import Window, spatial_pad, window_for
from openipu._src.popart.lowering.spatial import channels_first as to_channels_first
from openipu._src.popart.lowering.spatial import channels_last as to_channels_last


def lowest(dtype: tf.DType) -> tf.Tensor:
    return tf.constant(-np.inf if dtype.is_floating else dtype.min, dtype)


def spatial_dims(x: tf.Tensor, channels_last: bool = False) -> list[int]:
    dims = x.shape.as_list()
    return dims[1:-1] if channels_last else dims[2:]


def padded_for_window(
    x: tf.Tensor, window: Window, value: float | tf.Tensor, channels_last: bool = False
) -> tf.Tensor:
    """Pad with the explicit pads plus whatever the last window (ceil mode) reaches past them."""
    spatial = spatial_dims(x, channels_last)
    ends = []
    for size, out, stride, eff, before, after in zip(
        spatial,
        window.output,
        window.strides,
        window.effective_kernel,
        window.pads_begin,
        window.pads_end,
        strict=True,
    ):
        needed = (out - 1) * stride + eff
        ends.append(max(needed - size - before, after))
    return spatial_pad(x, window.pads_begin, ends, value, channels_last)


def window_slices(x: tf.Tensor, window: Window):
    """(offset, strided slice) for every kernel offset: slice i holds element i of each window."""
    for offset in itertools.product(*[range(k) for k in window.kernel]):
        index = [slice(None), slice(None)]
        for o, d, s, out in zip(
            offset, window.dilations, window.strides, window.output, strict=True
        ):
            start = o * d
            index.append(slice(start, start + (out - 1) * s + 1, s))
        yield offset, x[tuple(index)]


def uses_fast_path(window: Window, rank: int) -> bool:
    return all(d == 1 for d in window.dilations) and rank in (3, 4, 5)


class PoolOp(Op):
    def window(self, spatial: list[int]) -> Window:
        return window_for(
            self,
            spatial,
            list(self.attrs.kernel_shape),
            ceil_mode=bool(self.attrs.get("ceil_mode")),
        )


class KernelPoolOp(PoolOp):
    """A pool that TensorFlow's pooling kernels compute where they can: channels-last, as
    they are (see `channels_last`); the other cases channels-first."""

    channels_last_always = True

    def compute(self, x: tf.Tensor) -> Any:
        window = self.window(spatial_dims(x))
        if self.pools_fast(window, x):
            return to_channels_first(self.pool_channels_last(to_channels_last(x), window))
        return self.pool_channels_first(x, window)

    def run_channels_last(self, context: RunContext, inputs: Sequence[Any]) -> tf.Tensor | None:
        x = inputs[0]
        window = self.window(spatial_dims(x, channels_last=True))
        return self.pool_channels_last(x, window) if self.pools_fast(window, x) else None

    def pools_fast(self, window: Window, x: tf.Tensor) -> bool:
        """Whether TensorFlow's pooling kernel computes this node."""
        return uses_fast_path(window, x.shape.rank)

    def pool_channels_last(self, x: tf.Tensor, window: Window) -> tf.Tensor:
        raise NotImplementedError

    def pool_channels_first(self, x: tf.Tensor, window: Window) -> Any:
        raise NotImplementedError


@register_op("MaxPool", since=(1, 8, 10, 11, 12, 22))
class MaxPool(KernelPoolOp):
    def pools_fast(self, window: Window, x: tf.Tensor) -> bool:
        wants_indices = len(self.node.output) > 1 and self.node.output[1]
        return not wants_indices and uses_fast_path(window, x.shape.rank)

    def pool_channels_last(self, x: tf.Tensor, window: Window) -> tf.Tensor:
        dtype = x.dtype
        if dtype in (tf.int8, tf.uint8):
            x = tf.cast(x, tf.float32)
        padded = padded_for_window(x, window, lowest(x.dtype), channels_last=True)
        pooled = tf.nn.max_pool(padded, window.kernel, window.strides, padding="VALID")
        return tf.cast(pooled, dtype)

    def pool_channels_first(
        self, x: tf.Tensor, window: Window
    ) -> tf.Tensor | tuple[tf.Tensor, tf.Tensor]:
        dtype = x.dtype
        padded = padded_for_window(x, window, lowest(x.dtype))
        values, indices = self._max_with_indices(x, padded, window)
        if len(self.node.output) > 1 and self.node.output[1]:
            return tf.cast(values, dtype), indices
        return tf.cast(values, dtype)

    def _max_with_indices(
        self, x: tf.Tensor, padded: tf.Tensor, window: Window
    ) -> tuple[tf.Tensor, tf.Tensor]:
        dims = x.shape.as_list()
        spatial = dims[2:]
        # Flat index of each position of the padded input in the unpadded input (NCHW order,
        # or with the spatial dims reversed when storage_order is 1).
        position = np.zeros(padded.shape.as_list()[2:], dtype=np.int64)
        grids = np.meshgrid(*[np.arange(n) for n in position.shape], indexing="ij")
        coordinates = [g - b for g, b in zip(grids, window.pads_begin, strict=True)]
        order = list(range(len(spatial)))
        if self.attrs.get("storage_order") == 1:
            order = list(reversed(order))
        stride = 1
        for axis in reversed(order):
            position = position + coordinates[axis] * stride
            stride *= spatial[axis]
        plane = math.prod(spatial)
        base = (np.arange(dims[0] * dims[1]) * plane).reshape(dims[0], dims[1], *[1] * len(spatial))
        flat_index = tf.constant(position[np.newaxis, np.newaxis] + base)
        best = best_index = None
        for (_, values), (_, index) in zip(
            window_slices(padded, window), window_slices(flat_index, window), strict=True
        ):
            if best is None:
                best, best_index = values, index
                continue
            better = values > best
            best = tf.where(better, values, best)
            best_index = tf.where(better, index, best_index)
        return best, best_index


@register_op("AveragePool", since=(1, 7, 10, 11, 19, 22))
class AveragePool(KernelPoolOp):
    def pools_fast(self, window: Window, x: tf.Tensor) -> bool:
        return uses_fast_path(window, x.shape.rank) and x.dtype.is_floating

    def pool_channels_last(self, x: tf.Tensor, window: Window) -> tf.Tensor:
        return self.average(x, window, channels_last=True)

    def pool_channels_first(self, x: tf.Tensor, window: Window) -> tf.Tensor:
        return self.average(x, window, channels_last=False)

    def average(self, x: tf.Tensor, window: Window, channels_last: bool) -> tf.Tensor:
        padded = padded_for_window(x, window, 0, channels_last)
        # The divisor counts the cells of each window inside the input, or inside the input
        # and the explicit pads with count_include_pad (never the ceil-mode overhang).
        mask = tf.ones_like(x[:1, ..., :1] if channels_last else x[:1, :1])
        if self.attrs.get("count_include_pad"):
            explicit = spatial_pad(mask, window.pads_begin, window.pads_end, 1, channels_last)
            mask = pad_to_windows(explicit, window, channels_last)
        else:
            mask = padded_for_window(mask, window, 0, channels_last)
        total = sum_windows(padded, window, channels_last)
        count = sum_windows(mask, window, channels_last)
        return total / count


def pad_to_windows(x: tf.Tensor, window: Window, channels_last: bool = False) -> tf.Tensor:
    """Pad an already explicitly padded tensor with zeros at the end, up to what windows reach."""
    ends = [
        max((out - 1) * stride + eff - size, 0)
        for size, out, stride, eff in zip(
            spatial_dims(x, channels_last),
            window.output,
            window.strides,
            window.effective_kernel,
            strict=True,
        )
    ]
    return spatial_pad(x, [0] * len(ends), ends, 0, channels_last)


def sum_windows(x: tf.Tensor, window: Window, channels_last: bool = False) -> tf.Tensor:
    """Window sums; channels-last only where TensorFlow's pooling kernel applies."""
    if channels_last or (uses_fast_path(window, x.shape.rank) and x.dtype.is_floating):
        inputs = x if channels_last else to_channels_last(x)
        pooled = tf.nn.avg_pool(inputs, window.kernel, window.strides, padding="VALID")
        pooled = pooled if channels_last else to_channels_first(pooled)
        return pooled * tf.cast(math.prod(window.kernel), x.dtype)
    return tf.add_n([values for _, values in window_slices(x, window)])


@register_op("LpPool", since=(1, 2, 11, 18, 22))
class LpPool(PoolOp):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        window = self.window(spatial_dims(x))
        p = tf.cast(self.attrs.p, x.dtype)
        padded = padded_for_window(tf.pow(tf.abs(x), p), window, 0)
        return tf.pow(sum_windows(padded, window), 1 / p)


@register_op("GlobalAveragePool", since=(1, 22))
class GlobalAveragePool(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return tf.reduce_mean(x, axis=list(range(2, x.shape.rank)), keepdims=True)

    def run_channels_last(self, context: RunContext, inputs: Sequence[Any]) -> tf.Tensor:
        x = inputs[0]
        return tf.reduce_mean(x, axis=list(range(1, x.shape.rank - 1)), keepdims=True)


@register_op("GlobalMaxPool", since=(1, 22))
class GlobalMaxPool(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return tf.reduce_max(x, axis=list(range(2, x.shape.rank)), keepdims=True)

    def run_channels_last(self, context: RunContext, inputs: Sequence[Any]) -> tf.Tensor:
        x = inputs[0]
        return tf.reduce_max(x, axis=list(range(1, x.shape.rank - 1)), keepdims=True)


@register_op("GlobalLpPool", since=(1, 2, 22))
class GlobalLpPool(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        p = tf.cast(self.attrs.p, x.dtype)
        axes = list(range(2, x.shape.rank))
        return tf.pow(tf.reduce_sum(tf.pow(tf.abs(x), p), axis=axes, keepdims=True), 1 / p)


@register_op("MaxUnpool", since=(9, 11, 22))
class MaxUnpool(Op):
    def compute(
        self, x: tf.Tensor, indices: tf.Tensor, output_shape: tf.Tensor | None = None
    ) -> tf.Tensor:
        dims = x.shape.as_list()
        count = len(dims) - 2
        strides = list(self.attrs.get("strides") or [1] * count)
        pads = list(self.attrs.get("pads") or [0] * (2 * count))
        shape = dims[:2] + [
            (size - 1) * stride + k - pads[i] - pads[i + count]
            for i, (size, stride, k) in enumerate(
                zip(dims[2:], strides, self.attrs.kernel_shape, strict=True)
            )
        ]
        flat = tf.scatter_nd(
            tf.reshape(tf.cast(indices, tf.int64), [-1, 1]),
            tf.reshape(x, [-1]),
            [math.prod(shape)],
        )
        y = tf.reshape(flat, shape)
        if output_shape is not None:
            # The indices address the inferred shape; a larger requested shape pads at the end.
            target = self.static_ints(output_shape, "output_shape")
            y = tf.pad(y, [[0, t - s] for t, s in zip(target, shape, strict=True)])
        return y
