"""PopART's custom ops: domain ``ai.graphcore``, version 1.

Op types and attribute names are those PopART's builder writes into the ONNX model (the
``builder.aiGraphcore`` methods); semantics follow the PopART fact sheet (section 13.5.1).
Attributes a node does not carry take the defaults of the ai.graphcore table (graphcore_ops).
"""

from __future__ import annotations

import math
from collections import ChainMap
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from openipu._src.popart.errors import LoweringError
from openipu._src.popart.graphcore_ops import op_spec
from openipu._src.popart.graphcore_ops.checks import refuse_zero_stride
from openipu._src.popart.graphcore_ops.reshape_shape import resolved_reshape
from openipu._src.popart.graphcore_ops.scatter_reduce_shape import (
    checked_axis,
    expanded_indices_shape,
    is_index_broadcast,
)
from openipu._src.popart.lowering.op import RNG_ALGORITHM, Op, RunContext
from openipu._src.popart.lowering.ops.activation import gelu
from openipu._src.popart.lowering.ops.conv import add_channel_bias, convolve, upsample_with_zeros
from openipu._src.popart.lowering.ops.indexing import scatter_reduce
from openipu._src.popart.lowering.ops.normalization import wants_statistics
from openipu._src.popart.lowering.ops.shape import depth_to_space, slice_tensor
from openipu._src.popart.lowering.registry import OpClass, register_op
from openipu._src.popart.lowering.remainder import truncated_remainder
from openipu._src.popart.lowering.spatial import spatial_pad
from openipu._src.popart.lowering.tensor_utils import normalize_axes, normalize_axis, widened

# PopART's DataType enum (builder.tensor_info.DataType) -> TensorFlow dtype.
_POPART_DTYPES = {
    0: tf.uint8,
    1: tf.int8,
    2: tf.uint16,
    3: tf.int16,
    4: tf.int32,
    5: tf.int64,
    6: tf.uint32,
    7: tf.uint64,
    8: tf.bool,
    9: tf.float32,
    10: tf.float16,
    11: tf.bfloat16,
    14: tf.float64,
    15: tf.complex64,
    16: tf.complex128,
}
# The annotation of a GroupNormalization node the session sets from
# SessionOptions.groupNormStridedChannelGrouping.
STRIDED_GROUPING = "__strided_channel_grouping"
_SCATTER_REDUCTIONS = {0: "add", 1: "max", 2: "min", 3: "mul", 4: "none"}


def graphcore_op(op_type: str) -> Callable[[OpClass], OpClass]:
    """Registers the lowering of an ai.graphcore op; its attribute defaults are the table's."""
    spec = op_spec(op_type)
    register = register_op(op_type, since=spec.version, domain=spec.domain)

    def decorate(op_class: OpClass) -> OpClass:
        op_class.attribute_defaults = spec.defaults
        return register(op_class)

    return decorate


def reduce_loss(loss: tf.Tensor, reduction: str, count: tf.Tensor | None = None) -> tf.Tensor:
    """PopART's loss reductions: "Sum", "Mean" (over ``count`` elements if given) or "None"."""
    if reduction == "Sum":
        return tf.reduce_sum(loss)
    if reduction == "Mean":
        if count is None:
            return tf.reduce_mean(loss)
        return tf.reduce_sum(loss) / tf.cast(count, loss.dtype)
    return loss


class GraphcoreOp(Op):
    """Checks the ``reduction`` attribute of PopART's losses when there is one."""

    def setup(self) -> None:
        reduction = self.attrs.get("reduction")
        if reduction is not None and reduction not in ("Sum", "Mean", "None"):
            self.bad_attribute("reduction", f"must be Sum, Mean or None, not {reduction!r}")


# -- elementwise ---------------------------------------------------------------------------


@graphcore_op("Atan2")
class Atan2(Op):
    def compute(self, y: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
        return tf.atan2(y, x)


@graphcore_op("Fmod")
class Fmod(Op):
    def compute(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return truncated_remainder(a, b)  # the dividend's sign, like C


@graphcore_op("Remainder")
class Remainder(Op):
    def compute(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return widened(tf.math.floormod, a, b)  # the divisor's sign, like Python


@graphcore_op("BitwiseAnd")
class BitwiseAnd(Op):
    def compute(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.bitwise.bitwise_and(a, b)


@graphcore_op("BitwiseOr")
class BitwiseOr(Op):
    def compute(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.bitwise.bitwise_or(a, b)


@graphcore_op("BitwiseXor")
class BitwiseXor(Op):
    def compute(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.bitwise.bitwise_xor(a, b)


@graphcore_op("BitwiseXnor")
class BitwiseXnor(Op):
    def compute(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.bitwise.invert(tf.bitwise.bitwise_xor(a, b))


@graphcore_op("BitwiseNot")
class BitwiseNot(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return tf.bitwise.invert(x)


@graphcore_op("Detach")
class Detach(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return tf.stop_gradient(x)


@graphcore_op("Nop")
class Nop(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return tf.identity(x)


@graphcore_op("TensorRemap")
class TensorRemap(Nop):
    """A layout copy on the IPU; the identity on values."""


@graphcore_op("Expm1")
class Expm1(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return tf.math.expm1(x)


@graphcore_op("Log1p")
class Log1p(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return tf.math.log1p(x)


@graphcore_op("Gelu")
class Gelu(Op):
    """The tanh approximation, as popnn computes GELU."""

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return gelu(x, approximate=True)


@graphcore_op("GeluErf")
class GeluErf(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return gelu(x, approximate=False)


@graphcore_op("Swish")
class Swish(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return x * tf.sigmoid(x)


@graphcore_op("NearbyInt")
class NearbyInt(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return tf.round(x)  # half to even


@graphcore_op("Round")
class Round(NearbyInt):
    """Round-11 semantics (half to even)."""


@graphcore_op("Scale")
class Scale(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return x * tf.cast(self.attrs.scale, x.dtype)


@graphcore_op("ScaledAdd")
class ScaledAdd(Op):
    def compute(
        self,
        a: tf.Tensor,
        b: tf.Tensor,
        scale0: tf.Tensor | None = None,
        scale1: tf.Tensor | None = None,
    ) -> tf.Tensor:
        # Tensor scales override the attributes.
        first = (
            tf.cast(scale0, a.dtype) if scale0 is not None else tf.cast(self.attrs.scale0, a.dtype)
        )
        second = (
            tf.cast(scale1, b.dtype) if scale1 is not None else tf.cast(self.attrs.scale1, b.dtype)
        )
        return first * a + second * b


@graphcore_op("IncrementMod")
class IncrementMod(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        increment = tf.cast(self.attrs.increment, x.dtype)
        modulus = tf.cast(self.attrs.modulus, x.dtype)
        # poplar's remainder keeps the dividend's sign, as C's fmod (the original's
        # operators_test/incrementmod_test.py compares with np.fmod).
        return widened(tf.truncatemod, x + increment, modulus)


@graphcore_op("Bucketize")
class Bucketize(Op):
    def compute(self, x: tf.Tensor, boundaries: tf.Tensor) -> tf.Tensor:
        # right=0: b[i-1] < x <= b[i] (first boundary >= x); right=1: b[i-1] <= x < b[i].
        count = boundaries.shape.num_elements()
        if count is None:
            side = "right" if self.attrs.right else "left"
            flat = tf.reshape(x, [1, -1])
            index = tf.searchsorted(
                tf.reshape(boundaries, [1, -1]), flat, side=side, out_type=tf.int64
            )
            return tf.reshape(index, tf.shape(x))
        return bisect(x, tf.reshape(boundaries, [-1]), count, bool(self.attrs.right))


def bisect(x: tf.Tensor, boundaries: tf.Tensor, count: int, right: bool) -> tf.Tensor:
    """The bucket of each value by binary search over `count` boundaries, halving as
    torch.bucketize does, which the original's results match also where the boundaries are
    not sorted (operators_test/bucketize_test.py); NaN goes past the last boundary."""
    start = tf.zeros(tf.shape(x), tf.int64)
    end = tf.fill(tf.shape(x), tf.constant(count, tf.int64))
    for _ in range(max(count, 1).bit_length()):
        searching = start < end
        middle = start + (end - start) // 2
        value = tf.gather(boundaries, tf.minimum(middle, count - 1))
        past = value > x if right else value >= x
        end = tf.where(searching & past, middle, end)
        start = tf.where(searching & ~past, middle + 1, start)
    return start


# -- shapes and slicing ----------------------------------------------------------------------


@graphcore_op("Reshape")
class Reshape(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        try:
            shape = resolved_reshape(x.shape.as_list(), list(self.attrs.shape))
        except ValueError as error:
            raise self.error(str(error)) from None
        known = [dim for dim in shape if dim is not None]
        if len(known) < len(shape) or math.prod(known) != x.shape.num_elements():
            raise self.error(
                f"cannot reshape {x.shape.as_list()} to {shape}: element counts differ"
            )
        return tf.reshape(x, shape)


@graphcore_op("Reverse")
class Reverse(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        # PopART takes only dimensions in [0, rank), each once (willow/src/op/reverse.cpp,
        # setup; operators_test/operators_test.py, test_reverse).
        rank = x.shape.rank
        dimensions: list[int] = []
        for dim in self.attrs.dimensions:
            if dim < 0:
                raise self.error(
                    f"ReverseOp '{self.name}' invalid dimension '{dim}'. Only positive "
                    "dimensions are supported"
                )
            if dim >= rank:
                raise self.error(
                    f"ReverseOp '{self.name}' invalid dimension '{dim}' for input tensor of "
                    f"rank {rank}"
                )
            if dim in dimensions:
                raise self.error(
                    f"Dimension {dim} appears multiple times in the list of dimensions of "
                    f"ReverseOp '{self.name}'"
                )
            dimensions.append(dim)
        return tf.reverse(x, dimensions) if dimensions else tf.identity(x)


@graphcore_op("Slice")
class Slice(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        starts, ends = list(self.attrs.starts), list(self.attrs.ends)
        axes = self.attrs.axes or list(range(len(starts)))
        axes = normalize_axes(axes, x.shape.rank)
        return slice_tensor(x, starts, ends, axes, [1] * len(axes))


@graphcore_op("Subsample")
class Subsample(Op):
    def setup(self) -> None:
        refuse_zero_stride(list(self.attrs.strides))

    def compute(self, *inputs: tf.Tensor) -> tuple[tf.Tensor, ...]:
        strides = list(self.attrs.strides)
        return tuple(x[tuple(slice(None, None, s) for s in strides)] for x in inputs)


@graphcore_op("DepthToSpace")
class DepthToSpace(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return depth_to_space(x, self.attrs.blocksize, self.attrs.mode)


@graphcore_op("Sort")
class Sort(Op):
    def compute(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        axis = normalize_axis(self.attrs.axis, x.shape.rank)
        direction = "DESCENDING" if self.attrs.descending else "ASCENDING"
        indices = tf.argsort(x, axis=axis, direction=direction, stable=True)
        return tf.sort(x, axis=axis, direction=direction), tf.cast(indices, tf.int32)


@graphcore_op("ReduceMedian")
class ReduceMedian(Op):
    """The lower median; indices count within the reduced axes flattened together."""

    def compute(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        rank = x.shape.rank
        axes = normalize_axes(self.attrs.axes if self.attrs.axes is not None else range(rank), rank)
        kept = [axis for axis in range(rank) if axis not in axes]
        moved = tf.transpose(x, kept + axes)
        dims = moved.shape.as_list()
        flat = tf.reshape(moved, [-1, math.prod(dims[len(kept) :])])
        count = flat.shape[-1]
        order = tf.argsort(flat, axis=-1, stable=True)
        index = tf.gather(order, (count - 1) // 2, axis=-1)
        values = tf.gather(flat, index, batch_dims=1)
        output_shape = dims[: len(kept)]
        if self.attrs.keepdims:
            output_shape = [1 if axis in axes else x.shape[axis] for axis in range(rank)]
        return tf.reshape(values, output_shape), tf.reshape(tf.cast(index, tf.int32), output_shape)


class DynamicOp(Op):
    """Shared by the Dynamic* ops: ``offset`` (a runtime tensor) indexes ``axes``."""

    def begin(self, tensor: tf.Tensor, offset: tf.Tensor) -> tf.Tensor:
        begin = tf.zeros([tensor.shape.rank], tf.int32)
        axes = normalize_axes(self.attrs.axes, tensor.shape.rank)
        return tf.tensor_scatter_nd_update(
            begin, [[axis] for axis in axes], tf.cast(tf.reshape(offset, [-1]), tf.int32)
        )

    def slice_size(self, tensor: tf.Tensor) -> list[int]:
        size = tensor.shape.as_list()
        for axis, length in zip(
            normalize_axes(self.attrs.axes, tensor.shape.rank), self.attrs.sizes, strict=True
        ):
            size[axis] = length
        return size

    def replace(self, tensor: tf.Tensor, offset: tf.Tensor, region: tf.Tensor) -> tf.Tensor:
        begin = self.begin(tensor, offset)
        size = self.slice_size(tensor)
        grids = tf.meshgrid(*[tf.range(n) for n in size], indexing="ij")
        coordinates = tf.stack(grids, axis=-1) + begin
        # The region may leave out the sliced dims of size 1 (operators_test/
        # dynamicupdate_test.py, test_dynamicupdate_no_leading_slice_dim).
        region = tf.reshape(region, size)
        return tf.tensor_scatter_nd_update(tensor, coordinates, region)


@graphcore_op("DynamicSlice")
class DynamicSlice(DynamicOp):
    """With noOverlap, the gradients of the slices of one tensor are not summed: each is
    written over the gradient in turn, later slices over earlier ones, where they overlap
    (willow/src/transforms/dynamicoptransform.cpp makes each DynamicSlicePadGrad a chained
    DynamicUpdateInplace; operators_test/dynamicslice_test.py, test_dynamicslice_overlap_wrong).
    Gradients from the tensor's other consumers are still added (the original writes the
    slices' over their sum too).
    """

    later_no_overlap: tuple[DynamicSlice, ...] = ()

    def link(self, graph_ops: Sequence[Op]) -> None:
        if not self.attrs.get("noOverlap"):
            return
        source = self.node.input[0]
        later = graph_ops[list(graph_ops).index(self) + 1 :]
        self.later_no_overlap = tuple(
            op
            for op in later
            if isinstance(op, DynamicSlice)
            and op.attrs.get("noOverlap")
            and op.node.input[0] == source
            and len(op.node.input) == 2
        )

    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[Any, ...]:
        tensor, offset, *slice_in = inputs
        if (
            not self.later_no_overlap
            or any(value is not None for value in slice_in)
            or not tensor.dtype.is_floating
        ):
            return super().run(context, inputs)
        scope = context.scope

        @tf.custom_gradient
        def sliced(tensor: tf.Tensor) -> tf.Tensor:
            def gradient(upstream: tf.Tensor) -> tf.Tensor:
                # Where a later slice's gradient is written, this one's is overwritten.
                kept = tf.ones_like(tensor)
                for later in self.later_no_overlap:
                    later_offset = scope[later.node.input[1]]
                    cleared = tf.zeros(later.slice_size(tensor), tensor.dtype)
                    kept = later.replace(kept, later_offset, cleared)
                return self.replace(tf.zeros_like(tensor), offset, upstream) * kept

            return self.compute(tensor, offset), gradient

        return (sliced(tensor),)

    def compute(
        self, tensor: tf.Tensor, offset: tf.Tensor, slice_in: tf.Tensor | None = None
    ) -> tf.Tensor:
        piece = tf.slice(tensor, self.begin(tensor, offset), self.slice_size(tensor))
        # An optional third input is the tensor to slice into: the output takes its shape
        # (operators_test/dynamicslice_test.py).
        return piece if slice_in is None else tf.reshape(piece, tf.shape(slice_in))


@graphcore_op("DynamicUpdate")
class DynamicUpdate(DynamicOp):
    def compute(self, tensor: tf.Tensor, offset: tf.Tensor, update: tf.Tensor) -> tf.Tensor:
        update = tf.cast(update, tensor.dtype)
        if not self.attrs.get("noOverlap") or not tensor.dtype.is_floating:
            return self.replace(tensor, offset, update)

        # With noOverlap the original promises no later update overwrites this one, so the
        # gradient of the updated tensor is the output's, the updated region not zeroed
        # (willow/src/transforms/dynamicoptransform.cpp drops DynamicUpdateToUpdateGrad;
        # operators_test/dynamicupdate_test.py, test_dynamicupdate_overlap_wrong).
        @tf.custom_gradient
        def replaced(tensor: tf.Tensor, update: tf.Tensor) -> tf.Tensor:
            def gradient(upstream: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
                begin = self.begin(tensor, offset)
                return upstream, tf.slice(upstream, begin, self.slice_size(tensor))

            return self.replace(tensor, offset, update), gradient

        return replaced(tensor, update)


@graphcore_op("DynamicAdd")
class DynamicAdd(DynamicOp):
    def compute(self, tensor: tf.Tensor, offset: tf.Tensor, update: tf.Tensor) -> tf.Tensor:
        current = tf.slice(tensor, self.begin(tensor, offset), self.slice_size(tensor))
        return self.replace(tensor, offset, current + tf.cast(update, tensor.dtype))


@graphcore_op("DynamicZero")
class DynamicZero(DynamicOp):
    def compute(self, tensor: tf.Tensor, offset: tf.Tensor) -> tf.Tensor:
        return self.replace(tensor, offset, tf.zeros(self.slice_size(tensor), tensor.dtype))


@graphcore_op("SequenceSlice")
class SequenceSlice(Op):
    """dest[dO:dO+N] = src[sO:sO+N] on the outer dim for each entry, stopping at the first N == 0."""

    def compute(self, source, destination, counts, source_offsets, destination_offsets):
        rows = tf.shape(destination)[0]
        counts = tf.cast(tf.reshape(counts, [-1]), tf.int32)
        # Entries after the first zero count are ignored.
        active = tf.cast(tf.math.cumprod(tf.cast(counts > 0, tf.int32)), tf.bool)
        counts = tf.where(active, counts, 0)
        source_offsets = tf.cast(tf.reshape(source_offsets, [-1]), tf.int32)
        destination_offsets = tf.cast(tf.reshape(destination_offsets, [-1]), tf.int32)
        row = tf.range(rows)[:, tf.newaxis]  # [rows, 1] against entries [1, E]
        covered = tf.logical_and(
            row >= destination_offsets[tf.newaxis], row < (destination_offsets + counts)[tf.newaxis]
        )
        source_row = row - destination_offsets[tf.newaxis] + source_offsets[tf.newaxis]
        has_source = tf.reduce_any(covered, axis=1)
        chosen = tf.reduce_sum(tf.where(covered, source_row, 0), axis=1)
        gathered = tf.gather(source, tf.clip_by_value(chosen, 0, tf.shape(source)[0] - 1))
        mask = tf.reshape(has_source, [-1] + [1] * (destination.shape.rank - 1))
        fallback = tf.zeros_like(destination) if self.attrs.zeroUnused else destination
        return tf.where(mask, tf.cast(gathered, destination.dtype), fallback)


# -- gathers and scatters ---------------------------------------------------------------------


class ScatterReduceOp(Op):
    grouped = False

    def setup(self) -> None:
        if self.attrs.reduction not in _SCATTER_REDUCTIONS:
            self.bad_attribute(
                "reduction", f"must be a ScatterReduction (0-4), not {self.attrs.reduction}"
            )

    def aligned(self, source: tf.Tensor, index: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, int]:
        """Source and index of one shape, and the non-negative axis. A vector index (with index
        broadcasting enabled) applies along the axis at every other position; smaller indices
        (broadcasting disabled) scatter only the leading part of the source they cover, as
        torch's scatter_reduce (operators_test/scatterreduce_bcast_disabled_test.py)."""
        data_shape = source.shape.as_list()
        axis = checked_axis(self.attrs.axis, len(data_shape), self.attrs.axis_size)
        index_shape = index.shape.as_list()
        index = tf.cast(index, tf.int64)
        enabled = bool(self.attrs.enable_index_broadcast)
        if is_index_broadcast(index_shape, data_shape, axis, self.grouped, enabled):
            expanded = expanded_indices_shape(index_shape, data_shape, axis, self.grouped)
            return source, tf.broadcast_to(tf.reshape(index, expanded), data_shape), axis
        if index_shape != data_shape:
            expanded = expanded_indices_shape(index_shape, data_shape, axis, self.grouped)
            source = tf.slice(source, [0] * len(expanded), expanded)
            return source, tf.reshape(index, expanded), axis
        return source, index, axis

    def scatter(
        self, source: tf.Tensor, index: tf.Tensor, initial: tf.Tensor | None, axis: int
    ) -> tf.Tensor:
        """out[.., i, ..] = reduce(source[.., j, ..] where index[.., j, ..] == i) along
        ``axis``, for source and index of one shape."""
        rank = source.shape.rank
        reduction = _SCATTER_REDUCTIONS[self.attrs.reduction]
        unset_is_zero = initial is None and reduction in ("max", "min")
        if initial is None:
            output_shape = source.shape.as_list()
            output_shape[axis] = self.attrs.axis_size
            identity = {"add": 0, "mul": 1, "none": 0}.get(reduction)
            if identity is None:
                limits = source.dtype.max if reduction == "min" else source.dtype.min
                initial = tf.fill(output_shape, tf.constant(limits, source.dtype))
            else:
                initial = tf.fill(output_shape, tf.constant(identity, source.dtype))
        dims = tf.shape(index, out_type=tf.int64)
        grids = tf.meshgrid(*[tf.range(dims[i]) for i in range(rank)], indexing="ij")
        grids[axis] = index
        coordinates = tf.reshape(tf.stack(grids, axis=-1), [-1, rank])
        # poplibs' multiUpdate, which the original scatters with, ignores out-of-range indices;
        # the output (from initial values) may be larger than the source off the axis.
        in_range = (index >= 0) & (index < self.attrs.axis_size)
        for d in range(rank):
            if d != axis:
                in_range &= grids[d] < tf.shape(initial, out_type=tf.int64)[d]
        keep = tf.reshape(in_range, [-1])
        values = tf.reshape(source, [-1])
        result = scatter_reduce(initial, coordinates, values, reduction, keep)
        if unset_is_zero:
            # Positions no index reaches are 0 for max and min too, as torch_scatter's
            # (operators_test/scatterreduce_test_0.py, test_scatterreduce_basic).
            hits = scatter_reduce(
                tf.zeros_like(initial), coordinates, tf.ones_like(values), "add", keep
            )
            result = tf.where(hits > 0, result, tf.zeros_like(result))
        return result


@graphcore_op("ScatterReduce")
class ScatterReduce(ScatterReduceOp):
    def compute(self, source, index, initial=None):
        source, index, axis = self.aligned(source, index)
        return self.scatter(source, index, initial, axis)


@graphcore_op("GroupedScatterReduce")
class GroupedScatterReduce(ScatterReduceOp):
    grouped = True

    def compute(self, source, index, initial=None):
        # The leading dim is the group; scatter each group independently.
        source, index, axis = self.aligned(source, index)
        results = []
        for group in range(source.shape[0]):
            initial_group = initial[group] if initial is not None else None
            results.append(self.scatter(source[group], index[group], initial_group, axis - 1))
        return tf.stack(results)


@graphcore_op("GroupedGather")
class GroupedGather(Op):
    def compute(self, data: tf.Tensor, indices: tf.Tensor) -> tf.Tensor:
        # Gather done separately per group: the leading dim of data and indices is the group.
        axis = normalize_axis(self.attrs.axis, data.shape.rank)
        return tf.gather(data, tf.cast(indices, tf.int64), axis=max(axis, 1), batch_dims=1)


# -- normalization and dropout ------------------------------------------------------------------


@graphcore_op("GroupNormalization")
class GroupNormalization(Op):
    """Outputs [y, mean, inverse standard deviation] per (sample, group) (willow/src/popx/op/
    groupnormx.cpp; operators_test/groupnorm_test.py); channels grouped contiguously, or
    channel c in group c % num_groups with SessionOptions.groupNormStridedChannelGrouping
    (which the session passes as the node's STRIDED_GROUPING annotation)."""

    def compute(self, x: tf.Tensor, scale: tf.Tensor, bias: tf.Tensor):
        groups = self.attrs.num_groups
        rank = x.shape.rank
        shape = tf.shape(x)
        # Statistics of float16 data are taken in float32: the original asks poplibs for
        # statistics in float (willow/src/popx/op/groupnormx.cpp passes poplar::FLOAT).
        values = tf.cast(x, tf.float32) if x.dtype == tf.float16 else x
        if self.attrs.get(STRIDED_GROUPING):
            # [N, C / G, G, rest]: channel k * G + g lands in group g.
            dims = [shape[1] // groups, groups, -1]
            axes = [1, 3]
        else:
            dims, axes = [groups, -1], [2]
        grouped = tf.reshape(values, tf.concat([shape[:1], dims], axis=0))
        mean, variance = tf.nn.moments(grouped, axes=axes, keepdims=True)
        inv_std = tf.math.rsqrt(variance + self.attrs.epsilon)
        y = tf.cast(tf.reshape((grouped - mean) * inv_std, shape), x.dtype)
        broadcast = [1, -1] + [1] * (rank - 2)
        y = y * tf.reshape(scale, broadcast) + tf.reshape(bias, broadcast)
        return y, *(tf.cast(tf.reshape(t, [-1]), x.dtype) for t in (mean, inv_std))


@graphcore_op("BatchNormalization")
class BatchNormalization(Op):
    """Like ONNX's, but the running variance is updated with the unbiased (N-1) batch variance."""

    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[tf.Tensor, ...]:
        x, scale, bias, mean, variance = inputs
        rank = x.shape.rank
        broadcast = [1, -1] + [1] * (rank - 2)
        epsilon, momentum = self.attrs.epsilon, self.attrs.momentum
        if not wants_statistics(self.node):
            inverse = tf.math.rsqrt(variance + epsilon)
            y = (x - tf.reshape(mean, broadcast)) * tf.reshape(scale * inverse, broadcast)
            return (y + tf.reshape(bias, broadcast), mean, variance, mean, variance)
        axes = [0, *range(2, rank)]
        batch_mean, batch_variance = tf.nn.moments(x, axes=axes)
        count = tf.cast(tf.size(x) // tf.shape(x)[1], x.dtype)
        unbiased = batch_variance * count / tf.maximum(count - 1, 1)
        inverse = tf.math.rsqrt(batch_variance + epsilon)
        y = (x - tf.reshape(batch_mean, broadcast)) * tf.reshape(scale * inverse, broadcast)
        y = y + tf.reshape(bias, broadcast)
        running_mean = momentum * mean + (1 - momentum) * batch_mean
        running_variance = momentum * variance + (1 - momentum) * unbiased
        return y, running_mean, running_variance, batch_mean, batch_variance


def _broadcasts_to(shape: list[int], target: list[int]) -> bool:
    try:
        return list(np.broadcast_shapes(tuple(shape), tuple(target))) == target
    except ValueError:
        return False


@graphcore_op("ShapedDropout")
class ShapedDropout(Op):
    """Dropout with one mask of ``shape`` broadcast over the input; identity in inference."""

    stateful = True

    def setup(self) -> None:
        # As Dropout's (willow/src/op/dropoutbase.cpp, validateRatioAttribute).
        ratio = self.attrs.ratio
        if not 0 <= ratio < 1:
            raise self.error(
                f"ratio value {ratio} is not valid. Please use a value in the interval [0,1)"
            )

    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[tf.Tensor]:
        x = inputs[0]
        shape = list(self.attrs.shape)
        if x.shape.is_fully_defined() and not _broadcasts_to(shape, x.shape.as_list()):
            # The original's words first (willow/src/op/shapeddropout.cpp, setup).
            raise LoweringError(
                "ShapedDropout: incompatible input tensor and dropout shape. "
                f"Node '{self.name}' is configured with shape {shape} which is not "
                f"broadcastable to the input tensor with shape {x.shape.as_list()}."
            )
        ratio = self.attrs.ratio
        if not context.training or ratio == 0:
            return (tf.identity(x),)
        keep = 1 - ratio
        mask = tf.random.stateless_uniform(
            list(self.attrs.shape), context.op_seed(self), alg=RNG_ALGORITHM
        )
        mask = mask < keep
        return (tf.where(mask, x / keep, tf.zeros_like(x)),)


@graphcore_op("LSTM")
class PopartLSTM(Op):
    """Poplar's LSTM: weights [4, I+H, H] in gate order forget, input, candidate, output."""

    def compute(self, x, weights, biases=None, initial_state=None, sequence_lens=None):
        hidden = weights.shape[-1]
        batch = tf.shape(x)[1]
        if initial_state is not None:
            h, c = initial_state[0], initial_state[1]
        else:
            h = c = tf.zeros(tf.stack([batch, hidden]), x.dtype)
        if biases is None:
            biases = tf.zeros([4, hidden], x.dtype)
        kernel = tf.concat(tf.unstack(weights), axis=-1)  # [I+H, 4H]
        bias = tf.reshape(biases, [-1])
        steps = tf.range(tf.shape(x)[0])
        lengths = (
            tf.cast(sequence_lens, tf.int32)
            if sequence_lens is not None
            else tf.fill([batch], tf.shape(x)[0])
        )

        def step(carry, inputs):
            (h, c), _ = carry
            x_t, t = inputs
            gates = tf.matmul(tf.concat([x_t, h], axis=-1), kernel) + bias
            forget, input_gate, candidate, output = tf.split(gates, 4, axis=-1)
            new_c = tf.sigmoid(forget) * c + tf.sigmoid(input_gate) * tf.tanh(candidate)
            new_h = tf.sigmoid(output) * tf.tanh(new_c)
            active = (t < lengths)[:, tf.newaxis]
            return (tf.where(active, new_h, h), tf.where(active, new_c, c)), new_h

        (hs, cs), ys = tf.scan(step, (x, steps), initializer=((h, c), h))
        y = ys if self.attrs.output_full_sequence else hs[-1]
        return y, cs[-1]


# -- losses ----------------------------------------------------------------------------------


def _safe_negative_log(probability: tf.Tensor) -> tf.Tensor:
    """-log p as PopART's Nll takes it (willow/src/popx/op/nllx.cpp): log(max(p, 1e-7)) and
    the gradient -1/max(p, 1e-10) (both 6.104e-5 in float16), so a probability that
    underflowed to 0 gives a large finite loss and gradient, not inf and NaN."""
    half = probability.dtype == tf.float16
    forward_eps = tf.constant(6.104e-05 if half else 1.0e-7, probability.dtype)
    gradient_eps = tf.constant(6.104e-05 if half else 1.0e-10, probability.dtype)

    @tf.custom_gradient
    def negative_log(p: tf.Tensor) -> tuple[tf.Tensor, Callable[[tf.Tensor], tf.Tensor]]:
        def gradient(upstream: tf.Tensor) -> tf.Tensor:
            return -upstream / tf.maximum(p, gradient_eps)

        return -tf.math.log(tf.maximum(p, forward_eps)), gradient

    result: tf.Tensor = negative_log(probability)
    return result


@graphcore_op("Nll")
class NllLoss(GraphcoreOp):
    """-log p[label] over the last (class) axis; ``ignoreIndex`` labels contribute 0.

    As the original (willow/src/popx/op/nllx.cpp), p[label] is the sum of the probabilities
    times the label's one-hot row, and a label outside the classes has a row of zeros
    (poplibs' EncodeOneHot codelet sets no element): p is 0 there, the loss -log(1e-7), the
    gradient 0. A gather would raise in a graph and clamp under XLA.
    """

    def compute(self, probabilities: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        labels = tf.cast(labels, tf.int64)
        ignore = self.attrs.ignoreIndex
        valid = tf.ones_like(labels, tf.bool) if ignore is None else tf.not_equal(labels, ignore)
        safe_labels = tf.where(valid, labels, tf.zeros_like(labels))
        classes = tf.shape(probabilities)[-1]
        hot = tf.one_hot(safe_labels, classes, dtype=probabilities.dtype)
        picked = tf.reduce_sum(hot * probabilities, axis=-1)
        loss = -picked if self.attrs.inputIsLogProbability else _safe_negative_log(picked)
        loss = tf.where(valid, loss, tf.zeros_like(loss))
        count = None
        if ignore is not None:
            count = tf.maximum(tf.reduce_sum(tf.cast(valid, tf.int32)), 1)
        return reduce_loss(loss, self.attrs.reduction, count)


@graphcore_op("L1")
class L1Loss(GraphcoreOp):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        scale = tf.cast(self.attrs["lambda"], x.dtype)
        return reduce_loss(scale * tf.abs(x), self.attrs.reduction)


@graphcore_op("IdentityLoss")
class IdentityLoss(GraphcoreOp):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        return reduce_loss(x, self.attrs.reduction)


@graphcore_op("Ctc")
class CtcLoss(GraphcoreOp):
    """CTC loss of log-probabilities [T, N, C]; Mean divides each loss by its target length."""

    def compute(self, log_probs, targets, input_lengths, target_lengths):
        loss = tf.nn.ctc_loss(
            labels=tf.cast(targets, tf.int32),
            logits=tf.cast(log_probs, tf.float32),
            label_length=tf.cast(target_lengths, tf.int32),
            logit_length=tf.cast(input_lengths, tf.int32),
            logits_time_major=True,
            blank_index=self.attrs.blank,
        )
        # TensorFlow gives a large finite loss where no alignment exists (the input is too
        # short for the target and its repeated labels); the original's is infinite.
        impossible = _ctc_impossible(targets, input_lengths, target_lengths)
        if self.attrs.zeroInfinity:
            loss = tf.where(impossible | tf.math.is_inf(loss), tf.zeros_like(loss), loss)
        else:
            loss = tf.where(impossible, tf.fill(tf.shape(loss), np.inf), loss)
        if self.attrs.reduction == "Mean":
            loss = tf.reduce_mean(loss / tf.maximum(tf.cast(target_lengths, loss.dtype), 1))
        else:
            loss = reduce_loss(loss, self.attrs.reduction)
        out_type = self.attrs.outDataType
        dtype = (
            log_probs.dtype if out_type in ("UNDEFINED", None) else tf.as_dtype(out_type.lower())
        )
        return tf.cast(loss, dtype)


def _ctc_impossible(targets, input_lengths, target_lengths) -> tf.Tensor:
    """[N] whether no alignment of the target fits the input: a CTC path needs one step per
    label and a blank between repeated labels."""
    targets = tf.cast(targets, tf.int64)
    target_lengths = tf.cast(target_lengths, tf.int64)
    positions = tf.range(1, tf.shape(targets, out_type=tf.int64)[1])
    repeated = tf.logical_and(
        tf.equal(targets[:, 1:], targets[:, :-1]), positions[None, :] < target_lengths[:, None]
    )
    needed = target_lengths + tf.reduce_sum(tf.cast(repeated, tf.int64), axis=1)
    return tf.cast(input_lengths, tf.int64) < needed


# -- tensors, side effects, subgraphs, collectives -------------------------------------------------


@graphcore_op("Init")
class Init(Op):
    """A new tensor; NoInit leaves it undefined, which here means zeros like Zero."""

    def compute(self) -> tf.Tensor:
        dtype = _POPART_DTYPES.get(self.attrs.data_type)
        if dtype is None:
            raise self.error(f"unsupported data_type {self.attrs.data_type}")
        return tf.zeros(list(self.attrs.shape), dtype)


@graphcore_op("CopyVarUpdate")
class CopyVarUpdate(Op):
    """Returns the updater: the lowered function is pure, so persisting is the session's job."""

    def compute(self, variable: tf.Tensor, updater: tf.Tensor) -> tf.Tensor:
        return tf.identity(updater)


@graphcore_op("PrintTensor")
class PrintTensor(Op):
    stateful = True
    compilable = False  # XLA drops host prints

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        title = self.attrs.title or (self.node.input[0] if self.node.input else "")
        # 0 disables summarisation (willow/include/popart/builder.hpp, printtensor): every
        # element, which tf.print spells -1.
        threshold = self.attrs.summariseThreshold
        tf.print(title, x, summarize=threshold if threshold > 0 else -1)
        return tf.identity(x)


# The start of the message of a run that an Abort op ended (Poplar's abort program).
ABORT_MESSAGE = "Abort Program"


@graphcore_op("Abort")
class Abort(Op):
    """Ends the run (Poplar's abort program) unconditionally, or when its condition input
    holds a non-zero value; it has no outputs and runs for its effect alone."""

    stateful = True
    compilable = False  # XLA cannot raise

    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[()]:
        condition = inputs[0] if inputs else None
        if condition is None:
            fine = tf.constant(False)
            why = "unconditional abort"
        else:
            fine = tf.logical_not(tf.reduce_any(tf.cast(condition, tf.bool)))
            why = "the condition tensor is non-zero"
        context.side_effects.append(
            tf.debugging.Assert(fine, [f"{ABORT_MESSAGE}: node '{self.name}': {why}"])
        )
        return ()


@graphcore_op("Call")
class Call(Op):
    """Runs the ``callee`` subgraph on the inputs. Tensors of the scopes around the call that
    it names are visible to it, as to a Loop's or If's body
    (operators_test/subgraph_op_test.py: a called graph loops over the caller's tensors)."""

    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[Any, ...]:
        # Each call draws its own random numbers: RandomSetup gives every CallOp its own seed
        # for the callee (willow/src/transforms/randomsetup.cpp, connectSubgraphOp).
        outer = context.scope if context.scope is not None else ChainMap()
        return tuple(self.subgraphs["callee"].call(context.salted(self.salt), outer, inputs))


@graphcore_op("NormalizeImage")
class NormalizeImage(Op):
    """(B, H, W, 3) images: (x * scale - offsets) / scales, padded with a zero 4th channel."""

    def compute(self, image, offsets=None, scales=None):
        x = tf.cast(image, tf.float32) * self.attrs.scale
        if offsets is not None:
            x = x - tf.cast(offsets, tf.float32)
        if scales is not None:
            x = x / tf.cast(scales, tf.float32)
        x = tf.pad(x, [[0, 0]] * (x.shape.rank - 1) + [[0, 1]])
        return tf.cast(x, offsets.dtype if offsets is not None else tf.float32)


# -- splines (torch_spline_conv's spline_basis and spline_weighting, which the original's tests
# -- take as the reference: tests/integration/operators_test/splinebasis_test.py) -------------


def _spline_piece(v: tf.Tensor, piece: int, degree: int) -> tf.Tensor:
    """The B-spline basis function of `degree` for the knot `piece` at fraction v in [0, 1)."""
    if degree == 0:
        return tf.ones_like(v)
    if degree == 1:
        return 1 - v if piece == 0 else v
    if degree == 2:
        return (0.5 * v * v - v + 0.5, -v * v + v + 0.5, 0.5 * v * v)[piece]
    cube, square = v * v * v, v * v
    return (
        (1 - v) * (1 - v) * (1 - v) / 6,
        (3 * cube - 6 * square + 4) / 6,
        (-3 * cube + 3 * square + 3 * v + 1) / 6,
        cube / 6,
    )[piece]


@graphcore_op("SplineBasis")
class SplineBasis(Op):
    """pseudo [E, D] in [0, 1], kernel_size [D], is_open_spline [D] -> basis [E, S] and
    weight_index [E, S] (int32), S = (degree + 1) ** D.

    Spline s picks knot k_d = (s // (degree + 1) ** d) % (degree + 1) in each dimension d:
    with v = pseudo * (kernel_size - degree * is_open), its basis is the product over d of
    piece k_d at frac(v), its weight index sum_d ((trunc(v) + k_d) % kernel_size_d) * prod of
    the earlier kernel sizes.
    """

    def setup(self) -> None:
        if not 0 <= self.attrs.degree <= 3:
            self.bad_attribute("degree", f"must be between 0 and 3, not {self.attrs.degree}")

    def compute(self, pseudo, kernel_size, is_open_spline):
        degree = self.attrs.degree
        dims = pseudo.shape[1]
        if dims is None:
            raise self.error("pseudo needs a static number of dimensions")
        sizes = tf.cast(tf.reshape(kernel_size, [-1]), tf.int32)
        is_open = tf.cast(tf.reshape(is_open_spline, [-1]), tf.int32)
        compute_type = tf.float32 if pseudo.dtype == tf.float16 else pseudo.dtype
        scaled = tf.cast(pseudo, compute_type) * tf.cast(sizes - degree * is_open, compute_type)
        fraction = scaled - tf.floor(scaled)
        # The whole part truncates towards zero and the index wraps as C++'s %, as
        # torch_spline_conv's spline_basis, the original's reference: open splines of a
        # kernel smaller than the degree scale to negative values (splinebasis_test.py).
        whole = tf.cast(scaled, tf.int32)
        # All splines at once (a loop per spline makes a graph too large to compile quickly):
        # knots [S, D], the pieces of each dimension [E, D, degree + 1].
        knots = np.array(
            [
                [(s // (degree + 1) ** d) % (degree + 1) for d in range(dims)]
                for s in range((degree + 1) ** dims)
            ],
            np.int32,
        ).reshape(-1, dims)
        pieces = tf.stack([_spline_piece(fraction, k, degree) for k in range(degree + 1)], -1)
        basis = tf.ones([tf.shape(pseudo)[0], knots.shape[0]], compute_type)
        for d in range(dims):
            basis = basis * tf.gather(pieces[:, d], knots[:, d], axis=1)
        wrapped = tf.truncatemod(whole[:, None, :] + knots[None], sizes)  # [E, S, D]
        offsets = tf.math.cumprod(sizes, exclusive=True)
        index = tf.reduce_sum(wrapped * offsets, axis=-1)
        return tf.cast(basis, pseudo.dtype), index


@graphcore_op("SplineWeighting")
class SplineWeighting(Op):
    """input [E, Cin], weight [K, Cin, Cout], basis and weight_index [E, S] -> [E, Cout]:
    out[e] = sum_s basis[e, s] * input[e] @ weight[weight_index[e, s]]."""

    def compute(self, x, weight, basis, weight_index):
        kernels = tf.gather(weight, tf.cast(weight_index, tf.int32))  # [E, S, Cin, Cout]
        combined = tf.reduce_sum(basis[:, :, None, None] * kernels, axis=1)  # [E, Cin, Cout]
        return tf.einsum("ec,eco->eo", x, combined)


# -- several convolutions in one op -----------------------------------------------------------


@graphcore_op("MultiConv")
class MultiConv(Op):
    """Convolutions side by side: inputs (data, weights, bias or "") per convolution, one output
    each. The per-convolution attribute lists are concatenated (builder.cpp flattens them; empty:
    the defaults). Each convolution dilates its input by inDilations (zeros between elements),
    pads it by pads, convolves (strides, dilations; groups from the channel counts), adds the
    bias and pads its output with zeros by outPads. The planning options change nothing here."""

    def compute(self, *inputs):
        if len(inputs) % 3 == 1:
            raise self.error(
                f"needs (data, weights, bias) per convolution, not {len(inputs)} inputs"
            )
        inputs = (*inputs, None) if len(inputs) % 3 else inputs  # the last bias left out
        outputs = []
        offsets = dict.fromkeys(("strides", "pads", "outPads", "dilations", "inDilations"), 0)
        for start in range(0, len(inputs), 3):
            x, weight, bias = inputs[start : start + 3]
            spatial = x.shape.rank - 2

            def take(name: str, count: int, default: int) -> list[int]:
                values = list(self.attrs.get(name) or [])
                if not values:
                    return [default] * count
                taken = values[offsets[name] : offsets[name] + count]
                if len(taken) != count:
                    raise self.error(f"attribute '{name}' is too short for every convolution")
                offsets[name] += count
                return taken

            strides = take("strides", spatial, 1)
            pads = take("pads", 2 * spatial, 0)
            out_pads = take("outPads", 2 * spatial, 0)
            dilations = take("dilations", spatial, 1)
            in_dilations = take("inDilations", spatial, 1)
            groups = x.shape[1] // weight.shape[1]
            x = upsample_with_zeros(x, in_dilations)
            padded = spatial_pad(x, pads[:spatial], pads[spatial:])
            y = add_channel_bias(convolve(padded, weight, strides, dilations, groups), bias)
            outputs.append(spatial_pad(y, out_pads[:spatial], out_pads[spatial:]))
        return tuple(outputs)


@graphcore_op("CtcBeamSearchDecoder")
class CtcBeamSearchDecoder(Op):
    """CTC prefix beam search of log-probabilities [T, N, C] with lengths [N]: the top_paths
    best labellings per sample as (log-probabilities [N, P], lengths [N, P] and labels
    [N, P, T], uint32, zero past each length). TensorFlow's beam search decoder does the
    search (it cannot run under XLA); it wants the blank last, so the classes are reordered."""

    compilable = False

    def setup(self) -> None:
        if not 1 <= self.attrs.top_paths <= self.attrs.beam_width:
            self.bad_attribute("top_paths", "must be between 1 and beam_width")

    def compute(self, log_probs: tf.Tensor, lengths: tf.Tensor):
        blank, paths = self.attrs.blank, self.attrs.top_paths
        steps, batch, classes = log_probs.shape.as_list()
        if not 0 <= blank < classes:
            raise self.error(f"blank {blank} is not one of the {classes} classes")
        order = [c for c in range(classes) if c != blank] + [blank]
        decoded, scores = tf.nn.ctc_beam_search_decoder(
            tf.gather(tf.cast(log_probs, tf.float32), order, axis=2),
            tf.cast(lengths, tf.int32),
            beam_width=self.attrs.beam_width,
            top_paths=paths,
        )
        labels, label_lengths = [], []
        for path in decoded:
            values = tf.cast(path.values, tf.int64)
            values = tf.where(values >= blank, values + 1, values)  # back to the model's classes
            sparse = tf.SparseTensor(path.indices, values, [batch, steps])
            labels.append(tf.sparse.to_dense(sparse))
            counts = tf.math.bincount(tf.cast(path.indices[:, 0], tf.int32), minlength=batch)
            label_lengths.append(counts[:batch])
        return (
            tf.cast(scores, log_probs.dtype),
            tf.cast(tf.stack(label_lengths, axis=1), tf.uint32),
            tf.cast(tf.stack(labels, axis=1), tf.uint32),
        )


@graphcore_op("PackedDataBlock")
class PackedDataBlock(Op):
    """Runs ``callback`` over packed sequences, callbackBatchSize sequences at a time.

    Inputs are (data [total, ...], offsets [S], lengths [S]) per packed input, then the result's
    offsets and lengths [S]. Each input is unpacked to [S, maxSequenceLengths[i], ...] (zeros
    past a sequence's length), the callback runs on each batch of sequences, and the first
    `length` rows of each sequence it returns are packed into a zero result [resultSize, ...]
    (willow/src/op/packeddatablock.cpp; tests/integration/operators_test/packed_data_test.py).
    """

    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[Any, ...]:
        if len(inputs) < 5 or (len(inputs) - 2) % 3:
            raise self.error(
                "needs (data, offsets, lengths) per input, then result offsets/lengths"
            )
        count = (len(inputs) - 2) // 3
        lengths_wanted = list(self.attrs.maxSequenceLengths)
        if len(lengths_wanted) < count:
            # The original reads maxSequenceLengths.at(i) for each input (willow/src/op/
            # packeddatablock.cpp, the op's creator): std::out_of_range, which pybind11 makes
            # IndexError. Further values are never read.
            raise _OutOfRangeError(
                f"vector::_M_range_check: __n (which is {len(lengths_wanted)}) >= this->size() "
                f"(which is {len(lengths_wanted)})"
            )
        batch = self.attrs.callbackBatchSize
        sequences = inputs[1].shape[0]
        if sequences is None or batch < 1:
            raise self.error(f"{sequences} sequences do not split into batches of {batch}")
        # The callback runs floor(sequences / batch) times, on consecutive batches; sequences
        # left over are not computed and their rows of the zero result stay zero
        # (willow/src/op/packeddatablock.cpp, getCallbackIterations; willow/src/patterns/
        # packeddatablockpattern.cpp, the loop's trip count and its zero-initialised result).
        done = sequences // batch * batch
        size = self.attrs.resultSize
        unpacked = [
            _unpack(inputs[3 * i], inputs[3 * i + 1], inputs[3 * i + 2], lengths_wanted[i])
            for i in range(count)
        ]
        callback = self.subgraphs["callback"]
        if done == 0:
            # Fewer sequences than one batch: the result is all zeros, of the shape a batch's
            # result has (worked out on zeros).
            zeros = [tf.zeros([batch, *values.shape[1:]], values.dtype) for values in unpacked]
            (result, *_) = callback.call(context.salted(self.salt), ChainMap(), zeros)
            return (tf.zeros([size, *result.shape[2:]], result.dtype),)
        results = []
        for start in range(0, done, batch):
            arguments = [values[start : start + batch] for values in unpacked]
            (result, *_) = callback.call(context.salted(self.salt + start), ChainMap(), arguments)
            results.append(result)
        return (_pack(tf.concat(results, 0), inputs[-2][:done], inputs[-1][:done], size),)


class _OutOfRangeError(LoweringError, IndexError):
    """std::out_of_range from the original's C++, which pybind11 raises as IndexError; a
    LoweringError as well so that sessions pass it on as it is."""


def _unpack(data: tf.Tensor, offsets: tf.Tensor, lengths: tf.Tensor, width: int) -> tf.Tensor:
    """[S, width, ...]: sequence s is data[offsets[s] : offsets[s] + lengths[s]], zero padded."""
    position = tf.range(width)[None, :]
    rows = tf.cast(offsets, tf.int32)[:, None] + position
    valid = position < tf.cast(lengths, tf.int32)[:, None]
    rows = tf.clip_by_value(rows, 0, tf.shape(data)[0] - 1)
    gathered = tf.gather(data, rows)
    mask = tf.reshape(valid, [*valid.shape, *[1] * (data.shape.rank - 1)])
    return tf.where(mask, gathered, tf.zeros_like(gathered))


def _pack(values: tf.Tensor, offsets: tf.Tensor, lengths: tf.Tensor, size: int) -> tf.Tensor:
    """[size, ...] zeros with row offsets[s] + j = values[s, j] for j < lengths[s]."""
    position = tf.range(values.shape[1])[None, :]
    rows = tf.cast(offsets, tf.int32)[:, None] + position
    valid = (position < tf.cast(lengths, tf.int32)[:, None]) & (rows >= 0) & (rows < size)
    rows = tf.where(valid, rows, size)  # dropped writes go to a row past the end
    result = tf.zeros([size + 1, *values.shape[2:]], values.dtype)
    flat = tf.reshape(values, [-1, *values.shape[2:]])
    result = tf.tensor_scatter_nd_update(result, tf.reshape(rows, [-1, 1]), flat)
    return result[:size]
