"""Shape and layout ops: Reshape, Transpose, Concat, Split, Slice, Squeeze, Pad, Expand, Tile..."""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from openipu._src.popart.lowering.op import Op, static_value
from openipu._src.popart.lowering.registry import register_op
from openipu._src.popart.lowering.tensor_utils import (
    normalize_axes,
    normalize_axis,
    shape_list,
    shape_tensor,
)


@register_op("Identity", since=(1, 13, 14, 16, 19, 21))
class Identity(Op):
    def compute(self, x: object) -> object:
        if isinstance(x, tf.Tensor):
            return tf.identity(x)
        return x


@register_op("Shape", since=(1, 13, 15, 19, 21))
class Shape(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        shape = shape_tensor(x)
        rank = x.shape.rank
        start = self.attrs.get("start") or 0
        end = self.attrs.get("end")
        start = min(max(normalize_axis(start, rank), 0), rank)
        end = rank if end is None else min(max(normalize_axis(end, rank), 0), rank)
        return shape[start:end]


@register_op("Size", since=(1, 13, 19, 21))
class Size(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        if x.shape.is_fully_defined():
            return tf.constant(x.shape.num_elements(), dtype=tf.int64)
        return tf.size(x, out_type=tf.int64)


@register_op("Reshape", since=1)
class ReshapeWithAttribute(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return reshape(x, list(self.attrs.shape), allow_zero=False)


@register_op("Reshape", since=(5, 13, 14, 19, 21))
class Reshape(Op):
    def compute(self, x: tf.Tensor, shape: tf.Tensor) -> tf.Tensor:
        allow_zero = bool(self.attrs.get("allowzero"))
        target = static_value(shape)
        if target is None:
            if allow_zero:
                return tf.reshape(x, shape)
            # A 0 copies the input dim at the same position.
            shape = tf.cast(shape, tf.int64)
            input_dims = tf.pad(tf.shape(x, out_type=tf.int64), [[0, tf.size(shape)]])
            copied = tf.where(shape == 0, input_dims[: tf.size(shape)], shape)
            return tf.reshape(x, copied)
        return reshape(x, [int(dim) for dim in np.asarray(target).reshape(-1)], allow_zero)


def reshape(x: tf.Tensor, target: list[int], allow_zero: bool) -> tf.Tensor:
    if not allow_zero:
        input_dims = shape_list(x)
        target = [input_dims[index] if dim == 0 else dim for index, dim in enumerate(target)]
    if all(isinstance(dim, int) for dim in target):
        return tf.reshape(x, target)
    return tf.reshape(x, tf.stack([tf.cast(dim, tf.int32) for dim in target]))


@register_op("Flatten", since=(1, 9, 11, 13, 21))
class Flatten(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        rank = x.shape.rank
        axis = normalize_axis(self.attrs.axis, rank)
        dims = shape_list(x)
        outer = _product(dims[:axis])
        inner = _product(dims[axis:])
        if isinstance(outer, int) and isinstance(inner, int):
            return tf.reshape(x, [outer, inner])
        return tf.reshape(x, tf.stack([outer, inner]))


def _product(dims: list) -> int | tf.Tensor:
    if all(isinstance(dim, int) for dim in dims):
        return math.prod(dims)
    result = tf.constant(1, tf.int32)
    for dim in dims:
        result = result * tf.cast(dim, tf.int32)
    return result


@register_op("Transpose", since=(1, 13, 21))
class Transpose(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        permutation = self.attrs.perm
        if permutation is None:
            permutation = list(reversed(range(x.shape.rank)))
        return tf.transpose(x, permutation)


@register_op("Concat", since=(1, 4, 11, 13))
class Concat(Op):
    def compute(self, *inputs: tf.Tensor) -> tf.Tensor:
        axis = self.attrs.axis if self.attrs.axis is not None else 1  # opset 1 default
        return tf.concat(list(inputs), normalize_axis(axis, inputs[0].shape.rank))


@register_op("Split", since=(1, 2, 11, 13, 18))
class Split(Op):
    def compute(self, x: tf.Tensor, split: tf.Tensor | None = None) -> tuple[tf.Tensor, ...]:
        axis = normalize_axis(self.attrs.axis, x.shape.rank)
        count = len(self.node.output)
        if split is not None:
            sizes = self.static_ints(split, "split")
        elif self.attrs.get("split"):
            sizes = list(self.attrs.split)
        else:
            length = shape_list(x)[axis]
            if not isinstance(length, int):
                return tuple(tf.split(x, count, axis=axis))
            if self.attrs.get("num_outputs"):
                count = self.attrs.num_outputs
            # Uneven splits give every output ceil(length / count) but the last.
            chunk = -(-length // count)
            sizes = [min(chunk, max(length - chunk * index, 0)) for index in range(count)]
        return tuple(tf.split(x, sizes, axis=axis))


def full_slices(
    rank: int, starts: list[int], ends: list[int], axes: list[int], steps: list[int]
) -> tuple[slice, ...]:
    slices = [slice(None)] * rank
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        slices[axis] = slice(start, end, step)
    return tuple(slices)


def clamp_slice(start: int, end: int, step: int, length: int) -> slice:
    """ONNX slice bounds resolved to non-negative python slice bounds, as numpy would."""
    start, stop, step = slice(start, end, step).indices(length)
    if step < 0 and stop < 0:
        return slice(start, None, step)  # run to the first element
    return slice(start, stop, step)


@register_op("Slice", since=1)
class SliceWithAttributes(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        rank = x.shape.rank
        axes = self.attrs.axes if self.attrs.axes is not None else range(len(self.attrs.starts))
        axes = normalize_axes(axes, rank)
        return slice_tensor(x, self.attrs.starts, self.attrs.ends, axes, [1] * len(axes))


@register_op("Slice", since=(10, 11, 13))
class Slice(Op):
    def compute(
        self,
        x: tf.Tensor,
        starts: tf.Tensor,
        ends: tf.Tensor,
        axes: tf.Tensor | None = None,
        steps: tf.Tensor | None = None,
    ) -> tf.Tensor:
        rank = x.shape.rank
        static_starts, static_ends = static_value(starts), static_value(ends)
        axes_list = (
            normalize_axes(self.static_ints(axes, "axes"), rank)
            if axes is not None
            else list(range(int(starts.shape[0])))
        )
        steps_list = self.static_ints(steps, "steps") if steps is not None else [1] * len(axes_list)
        if static_starts is None or static_ends is None:
            return dynamic_slice(x, starts, ends, axes_list, steps_list)
        return slice_tensor(
            x,
            [int(v) for v in static_starts.reshape(-1)],
            [int(v) for v in static_ends.reshape(-1)],
            axes_list,
            steps_list,
        )


def slice_tensor(
    x: tf.Tensor, starts: list[int], ends: list[int], axes: list[int], steps: list[int]
) -> tf.Tensor:
    dims = shape_list(x)
    slices = [slice(None)] * x.shape.rank
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        length = dims[axis]
        if isinstance(length, int):
            slices[axis] = clamp_slice(start, end, step, length)
        else:
            slices[axis] = slice(start, end, step)
    return x[tuple(slices)]


def dynamic_slice(
    x: tf.Tensor, starts: tf.Tensor, ends: tf.Tensor, axes: list[int], steps: list[int]
) -> tf.Tensor:
    """Slice with start and end known only at run time (positive steps)."""
    rank = x.shape.rank
    dims = tf.shape(x, out_type=tf.int64)
    starts = tf.cast(tf.reshape(starts, [-1]), tf.int64)
    ends = tf.cast(tf.reshape(ends, [-1]), tf.int64)
    begin = [tf.constant(0, tf.int64)] * rank
    end = [dims[axis] for axis in range(rank)]
    stride = [1] * rank
    for index, (axis, step) in enumerate(zip(axes, steps, strict=True)):
        length = dims[axis]
        start_value = tf.where(starts[index] < 0, starts[index] + length, starts[index])
        end_value = tf.where(ends[index] < 0, ends[index] + length, ends[index])
        begin[axis] = tf.clip_by_value(start_value, 0, length)
        end[axis] = tf.clip_by_value(end_value, 0, length)
        stride[axis] = step
    return tf.strided_slice(x, tf.stack(begin), tf.stack(end), tf.constant(stride, tf.int64))


class AxesOp(Op):
    """Squeeze/Unsqueeze: axes from an attribute (opset < 13) or an input."""

    def axes(self, axes: tf.Tensor | None) -> list[int] | None:
        if axes is not None:
            return self.static_ints(axes, "axes")
        return self.attrs.get("axes")


@register_op("Squeeze", since=(1, 11, 13, 21))
class Squeeze(AxesOp):
    def compute(self, x: tf.Tensor, axes: tf.Tensor | None = None) -> tf.Tensor:
        axes_list = self.axes(axes)
        if not axes_list:
            return tf.squeeze(x)
        return tf.squeeze(x, normalize_axes(axes_list, x.shape.rank))


@register_op("Unsqueeze", since=(1, 11, 13, 21))
class Unsqueeze(AxesOp):
    def compute(self, x: tf.Tensor, axes: tf.Tensor | None = None) -> tf.Tensor:
        axes_list = self.axes(axes)
        if axes_list is None:
            raise self.error("Unsqueeze needs axes (an attribute before opset 13, else an input)")
        output_rank = x.shape.rank + len(axes_list)
        for axis in sorted(normalize_axes(axes_list, output_rank)):
            x = tf.expand_dims(x, axis)
        return x


@register_op("Expand", since=(8, 13))
class Expand(Op):
    def compute(self, x: tf.Tensor, shape: tf.Tensor) -> tf.Tensor:
        target = tf.broadcast_dynamic_shape(shape_tensor(x), tf.cast(shape, tf.int64))
        static_target = static_value(target)
        if static_target is not None:
            return tf.broadcast_to(x, static_target.tolist())
        return tf.broadcast_to(x, target)


@register_op("Tile", since=(1, 6, 13))
class Tile(Op):
    def compute(self, x: tf.Tensor, repeats: tf.Tensor) -> tf.Tensor:
        return tf.tile(x, tf.cast(repeats, tf.int64))


def pad_index_map(length: int, before: int, after: int, mode: str) -> np.ndarray:
    """Source index of every output position along one axis, for edge/reflect/wrap padding."""
    positions = np.arange(-before, length + after)
    if mode == "edge":
        return np.clip(positions, 0, length - 1)
    if mode == "wrap":
        return np.mod(positions, length)
    if length == 1:  # reflect of a single element repeats it
        return np.zeros_like(positions)
    period = 2 * (length - 1)
    folded = np.mod(positions, period)
    return np.where(folded < length, folded, period - folded)


def pad_tensor(
    x: tf.Tensor, pads: list[int], mode: str, value: tf.Tensor | float, axes: list[int]
) -> tf.Tensor:
    """ONNX Pad: ``pads`` = [begin of each axis..., end of each axis...]; negatives crop."""
    rank = x.shape.rank
    count = len(axes)
    befores, afters = [0] * rank, [0] * rank
    for index, axis in enumerate(axes):
        befores[axis], afters[axis] = pads[index], pads[index + count]
    crops = tuple(
        slice(max(-before, 0), (after if after < 0 else None))
        for before, after in zip(befores, afters, strict=True)
    )
    x = x[crops]
    befores = [max(before, 0) for before in befores]
    afters = [max(after, 0) for after in afters]
    if mode == "constant":
        return tf.pad(x, list(zip(befores, afters, strict=True)), constant_values=value)
    dims = x.shape.as_list()
    for axis in range(rank):
        if befores[axis] or afters[axis]:
            index_map = pad_index_map(dims[axis], befores[axis], afters[axis], mode)
            x = tf.gather(x, index_map, axis=axis)
    return x


@register_op("Pad", since=(1, 2))
class PadWithAttributes(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        pads = self.attrs.get("pads") or self.attrs.get("paddings")
        if pads is None:
            self.bad_attribute("pads", "is required")
        value = tf.cast(self.attrs.value, x.dtype)
        return pad_tensor(x, list(pads), self.attrs.mode, value, list(range(x.shape.rank)))


@register_op("Pad", since=(11, 13, 18, 19, 21))
class Pad(Op):
    def setup(self) -> None:
        if self.attrs.mode not in ("constant", "reflect", "edge", "wrap"):
            self.bad_attribute(
                "mode", f"must be constant, reflect, edge or wrap, not {self.attrs.mode!r}"
            )

    def compute(
        self,
        x: tf.Tensor,
        pads: tf.Tensor,
        constant_value: tf.Tensor | None = None,
        axes: tf.Tensor | None = None,
    ) -> tf.Tensor:
        rank = x.shape.rank
        axes_list = (
            normalize_axes(self.static_ints(axes, "axes"), rank)
            if axes is not None
            else list(range(rank))
        )
        value = (
            tf.cast(tf.reshape(constant_value, []), x.dtype)
            if constant_value is not None and constant_value.shape.num_elements() != 0
            else tf.zeros([], x.dtype)
        )
        if static_value(pads) is None and self.attrs.mode == "constant":
            # Run-time pads (non-negative): tf.pad takes them as a tensor.
            paddings = tf.transpose(tf.reshape(tf.cast(pads, tf.int64), [2, -1]))
            full = tf.scatter_nd([[axis] for axis in axes_list], paddings, [rank, 2])
            return tf.pad(x, full, constant_values=value)
        return pad_tensor(x, self.static_ints(pads, "pads"), self.attrs.mode, value, axes_list)


# DepthToSpace-28 keeps -13's attributes, types and description.
@register_op("DepthToSpace", since=(1, 11, 13, 28))
class DepthToSpace(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return depth_to_space(x, self.attrs.blocksize, self.attrs.get("mode") or "DCR")


def depth_to_space(x: tf.Tensor, block: int, mode: str) -> tf.Tensor:
    batch, channels, height, width = shape_list(x)
    if mode == "DCR":
        x = tf.reshape(x, [batch, block, block, channels // (block * block), height, width])
        x = tf.transpose(x, [0, 3, 4, 1, 5, 2])
    else:
        x = tf.reshape(x, [batch, channels // (block * block), block, block, height, width])
        x = tf.transpose(x, [0, 1, 4, 2, 5, 3])
    return tf.reshape(x, [batch, channels // (block * block), height * block, width * block])


@register_op("SpaceToDepth", since=(1, 13, 28))  # 28 adds `mode`, read below
class SpaceToDepth(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        block = self.attrs.blocksize
        batch, channels, height, width = shape_list(x)
        x = tf.reshape(x, [batch, channels, height // block, block, width // block, block])
        mode = self.attrs.get("mode") or "DCR"
        x = tf.transpose(x, [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4])
        return tf.reshape(x, [batch, channels * block * block, height // block, width // block])


@register_op("Trilu", since=14)
class Trilu(Op):
    def compute(self, x: tf.Tensor, k: tf.Tensor | None = None) -> tf.Tensor:
        offset = tf.cast(tf.reshape(k, []), tf.int64) if k is not None else tf.constant(0, tf.int64)
        dims = tf.shape(x, out_type=tf.int64)
        rows = tf.range(dims[-2])[:, tf.newaxis]
        columns = tf.range(dims[-1])[tf.newaxis, :]
        keep = columns - rows >= offset if self.attrs.upper else columns - rows <= offset
        return tf.where(keep, x, tf.zeros_like(x))


@register_op("ReverseSequence", since=10)
class ReverseSequence(Op):
    def compute(self, x: tf.Tensor, lengths: tf.Tensor) -> tf.Tensor:
        return tf.reverse_sequence(
            x, lengths, seq_axis=self.attrs.time_axis, batch_axis=self.attrs.batch_axis
        )


@register_op("CenterCropPad", since=18)
class CenterCropPad(Op):
    def compute(self, x: tf.Tensor, shape: tf.Tensor) -> tf.Tensor:
        rank = x.shape.rank
        target = self.static_ints(shape, "shape")
        axes = normalize_axes(self.attrs.axes or list(range(rank)), rank)
        dims = x.shape.as_list()
        for axis, size in zip(axes, target, strict=True):
            length = dims[axis]
            if size < length:  # crop, the extra element (odd difference) on the start side
                start = (length - size) // 2
                x = tf.gather(x, tf.range(start, start + size), axis=axis)
            elif size > length:  # pad, the extra element on the end side
                before = (size - length) // 2
                paddings = [[0, 0]] * rank
                paddings[axis] = [before, size - length - before]
                x = tf.pad(x, paddings)
        return x
