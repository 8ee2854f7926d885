"""Reductions (ReduceSum, ReduceMean, ... ReduceLogSumExp) and ArgMax/ArgMin."""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from openipu._src.popart.lowering.op import Op
from openipu._src.popart.lowering.registry import register_op
from openipu._src.popart.lowering.tensor_utils import normalize_axes, normalize_axis, widened


def _log_sum_exp(x: tf.Tensor, axis: list[int], keepdims: bool) -> tf.Tensor:
    return tf.math.reduce_logsumexp(x, axis=axis, keepdims=keepdims)


def _log_sum(x: tf.Tensor, axis: list[int], keepdims: bool) -> tf.Tensor:
    return tf.math.log(tf.reduce_sum(x, axis=axis, keepdims=keepdims))


def _l1(x: tf.Tensor, axis: list[int], keepdims: bool) -> tf.Tensor:
    return widened(lambda v: tf.reduce_sum(tf.abs(v), axis=axis, keepdims=keepdims), x)


def _l2(x: tf.Tensor, axis: list[int], keepdims: bool) -> tf.Tensor:
    if x.dtype.is_integer:
        squares = tf.cast(
            tf.reduce_sum(tf.square(tf.cast(x, tf.float64)), axis, keepdims), tf.float64
        )
        return tf.cast(tf.sqrt(squares), x.dtype)
    return tf.sqrt(tf.reduce_sum(tf.square(x), axis=axis, keepdims=keepdims))


def _sum_square(x: tf.Tensor, axis: list[int], keepdims: bool) -> tf.Tensor:
    return widened(lambda v: tf.reduce_sum(tf.square(v), axis=axis, keepdims=keepdims), x)


def _plain(function: Callable, for_bool: Callable | None = None) -> Callable:
    def reduce(x: tf.Tensor, axis: list[int], keepdims: bool) -> tf.Tensor:
        if x.dtype == tf.bool and for_bool is not None:
            return for_bool(x, axis=axis, keepdims=keepdims)
        if x.dtype == tf.bool:
            x = tf.cast(x, tf.int32)
            return tf.cast(function(x, axis=axis, keepdims=keepdims), tf.bool)
        return widened(lambda v: function(v, axis=axis, keepdims=keepdims), x)

    return reduce


def _mean(x: tf.Tensor, axis: list[int], keepdims: bool) -> tf.Tensor:
    if x.dtype.is_integer:
        total = tf.reduce_sum(tf.cast(x, tf.float64), axis=axis, keepdims=keepdims)
        count = tf.cast(tf.size(x), tf.float64) / tf.cast(tf.size(total), tf.float64)
        return tf.cast(tf.math.floordiv(total, count), x.dtype)
    return tf.reduce_mean(x, axis=axis, keepdims=keepdims)


class ReduceOp(Op):
    """A reduction over ``axes`` (an attribute before ``axes_as_input_since``, then an input)."""

    reducer: Callable[[tf.Tensor, list[int], bool], tf.Tensor]
    axes_as_input_since = 18

    def compute(self, x: tf.Tensor, axes: tf.Tensor | None = None) -> tf.Tensor:
        rank = x.shape.rank
        if self.opset_version >= self.axes_as_input_since:
            axes_list = self.static_ints(axes, "axes") if axes is not None else []
        else:
            given = self.attrs.get("axes")
            if given is not None and len(given) == 0:
                # An explicit empty `axes` reduces over no axis in PopART (willow/src/op/
                # reduce.cpp reduces over all only when none were given): ReduceLogSum is log.
                return type(self).reducer(x, [], bool(self.attrs.keepdims))
            axes_list = list(given or [])
        if not axes_list:
            if self.attrs.get("noop_with_empty_axes"):
                return tf.identity(x)
            axes_list = list(range(rank))
        keepdims = bool(self.attrs.keepdims)
        return type(self).reducer(x, normalize_axes(axes_list, rank), keepdims)


def reduction(op_type: str, since: tuple[int, ...], reducer: Callable, axes_input: int = 18):
    op_class = type(
        op_type,
        (ReduceOp,),
        {"reducer": staticmethod(reducer), "axes_as_input_since": axes_input, "__doc__": None},
    )
    op_class.__module__ = __name__
    return register_op(op_type, since=since)(op_class)


ReduceSum = reduction("ReduceSum", (1, 11, 13), _plain(tf.reduce_sum), axes_input=13)
ReduceMean = reduction("ReduceMean", (1, 11, 13, 18), _mean)


def _nan_propagating(reduce: Callable) -> Callable:
    """A max or min reduction that is NaN where the reduced values hold a NaN, as onnx's
    reference (numpy's maximum.reduce) is; TensorFlow's kernels skip NaNs."""

    def reduce_with_nans(x: tf.Tensor, axis: list[int], keepdims: bool) -> tf.Tensor:
        result = reduce(x, axis, keepdims)
        if not x.dtype.is_floating:
            return result
        has_nan = tf.reduce_any(tf.math.is_nan(x), axis=axis, keepdims=keepdims)
        return tf.where(has_nan, tf.constant(float("nan"), result.dtype), result)

    return reduce_with_nans


ReduceMax = reduction(
    "ReduceMax", (1, 11, 12, 13, 18, 20), _nan_propagating(_plain(tf.reduce_max, tf.reduce_any))
)
ReduceMin = reduction(
    "ReduceMin", (1, 11, 12, 13, 18, 20), _nan_propagating(_plain(tf.reduce_min, tf.reduce_all))
)
ReduceProd = reduction("ReduceProd", (1, 11, 13, 18), _plain(tf.reduce_prod))
ReduceL1 = reduction("ReduceL1", (1, 11, 13, 18), _l1)
ReduceL2 = reduction("ReduceL2", (1, 11, 13, 18), _l2)
ReduceLogSum = reduction("ReduceLogSum", (1, 11, 13, 18), _log_sum)
ReduceLogSumExp = reduction("ReduceLogSumExp", (1, 11, 13, 18), _log_sum_exp)
ReduceSumSquare = reduction("ReduceSumSquare", (1, 11, 13, 18), _sum_square)


class ArgOp(Op):
    """PopART's ArgMax/ArgMin give INT32 indices, not ONNX's int64
    (willow/src/op/argextrema.cpp, `ArgExtremaOp::setup`)."""

    largest: bool

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        rank = x.shape.rank
        axis = normalize_axis(self.attrs.axis, rank)
        keys = x if type(self).largest else -_signed(x)
        if self.attrs.get("select_last_index"):
            reversed_keys = tf.reverse(keys, [axis])
            index = tf.argmax(reversed_keys, axis=axis, output_type=tf.int32)
            index = tf.shape(x, out_type=tf.int32)[axis] - 1 - index
        else:
            index = tf.argmax(keys, axis=axis, output_type=tf.int32)
        if x.dtype.is_floating:
            index = self._first_nan_wins(x, axis, index)
        if self.attrs.keepdims:
            index = tf.expand_dims(index, axis)
        return index

    def _first_nan_wins(self, x: tf.Tensor, axis: int, index: tf.Tensor) -> tf.Tensor:
        """A NaN is the extreme, as in onnx's reference (numpy's argmax and argmin): the
        first NaN's index (the last's with select_last_index); TensorFlow skips NaNs."""
        nans = tf.cast(tf.math.is_nan(x), tf.int32)
        if self.attrs.get("select_last_index"):
            last = tf.argmax(tf.reverse(nans, [axis]), axis=axis, output_type=tf.int32)
            nan_index = tf.shape(x, out_type=tf.int32)[axis] - 1 - last
        else:
            nan_index = tf.argmax(nans, axis=axis, output_type=tf.int32)
        return tf.where(tf.reduce_any(nans > 0, axis=axis), nan_index, index)


def _signed(x: tf.Tensor) -> tf.Tensor:
    return tf.cast(x, tf.int64) if x.dtype.is_unsigned else x


@register_op("ArgMax", since=(1, 11, 12, 13))
class ArgMax(ArgOp):
    largest = True


@register_op("ArgMin", since=(1, 11, 12, 13))
class ArgMin(ArgOp):
    largest = False
