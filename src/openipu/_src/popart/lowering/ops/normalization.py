"""Normalizations: Batch, Instance, Layer, Group, RMS, Lp, LRN, MeanVariance."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import onnx
import tensorflow as tf

from openipu._src.popart.errors import LoweringError
from openipu._src.popart.lowering.op import Op, RunContext
from openipu._src.popart.lowering.registry import register_op
from openipu._src.popart.lowering.tensor_utils import normalize_axes, normalize_axis


def per_channel(value: tf.Tensor, rank: int) -> tf.Tensor:
    """A [C] tensor shaped to broadcast against an [N, C, ...] tensor."""
    return tf.reshape(value, [1, -1] + [1] * (rank - 2))


def _dims(shape: list[int]) -> str:
    """A shape as PopART prints one: [2 2 2]."""
    return "[" + " ".join(str(d) for d in shape) + "]"


def check_batch_norm_shapes(x_shape: list[int], shapes: Sequence[list[int]], spatial: bool) -> None:
    """PopART's checks of a batch normalization's input shapes, X's channels-first
    (willow/src/op/batchnorm.cpp, setup and validateInput; operators_test/batchnorm_test.py,
    test_batchnorm_train_0_errorcases)."""
    if len(x_shape) < 3:
        raise LoweringError(
            f"batch norm requires X to have a rank >= 3.  x has rank {len(x_shape)}"
        )
    expected = x_shape[1:2] if spatial else x_shape[1:]
    described = "dimension 1" if spatial else "all but the first dimension"
    for shape, name in zip(shapes, ["scale", "B", "mean", "var"], strict=True):
        if list(shape) != expected:
            raise LoweringError(
                f"expected shape of batch norm input tensor {name} ({_dims(list(shape))}) to be "
                f"{_dims(expected)} to match {described} of X ({_dims(x_shape)})"
            )


def wants_statistics(node: onnx.NodeProto) -> bool:
    """A batch normalization asked for more than its Y output computes batch statistics."""
    return len([name for name in node.output if name]) > 1


@register_op("BatchNormalization", since=(1, 6, 7, 9, 14, 15))
class BatchNormalization(Op):
    """Inference uses the running statistics; training mode uses (and updates) batch statistics.

    Training mode is the ``training_mode`` attribute (opset >= 14) or, as in PopART, a node
    that asks for the statistics outputs, in any session (willow/src/op/batchnorm.cpp: "If we
    have the optional outputs we can assume we are training"; operators_test/batchnorm_test.py,
    test_batchnorm_train_2 runs such nodes in an InferenceSession).
    """

    def training(self, context: RunContext) -> bool:
        return bool(self.attrs.get("training_mode")) or (
            self.opset_version < 14 and wants_statistics(self.node)
        )

    @property
    def spatial(self) -> bool:
        """spatial=0 (opsets 7-8) normalises each feature [C, D1, ...] on its own, over the
        batch only (willow/src/op/batchnorm.cpp, willow/src/popx/op/batchnormx.cpp)."""
        return bool(self.attrs.get("spatial", 1))

    def per_feature(self, value: tf.Tensor, rank: int) -> tf.Tensor:
        if self.spatial:
            return per_channel(value, rank)
        return tf.expand_dims(value, 0)

    def run_channels_last(self, context: RunContext, inputs: Sequence[Any]) -> Any:
        shape = list(inputs[0].shape)
        self.check_shapes([shape[0], shape[-1], *shape[1:-1]] if len(shape) > 2 else shape, inputs)
        if self.training(context) or not self.spatial:
            return None  # batch statistics, or per-feature values: computed channels-first
        # Per-channel values broadcast against the last axis as they are.
        return self.with_running_statistics(inputs, lambda value: value)

    def check_shapes(self, x_shape: list[int], inputs: Sequence[Any]) -> None:
        check_batch_norm_shapes(x_shape, [list(v.shape) for v in inputs[1:5]], self.spatial)

    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[tf.Tensor, ...]:
        self.check_shapes(list(inputs[0].shape), inputs)
        x, scale, bias, mean, variance = inputs[:5]
        rank = x.shape.rank
        epsilon = self.attrs.epsilon
        axes = [0, *range(2, rank)] if self.spatial else [0]
        if not self.training(context):
            return self.with_running_statistics(inputs, lambda v: self.per_feature(v, rank))
        batch_mean, batch_variance = tf.nn.moments(x, axes=axes)
        inverse = tf.math.rsqrt(batch_variance + epsilon)
        y = (x - self.per_feature(batch_mean, rank)) * self.per_feature(scale * inverse, rank)
        y = y + self.per_feature(bias, rank)
        momentum = self.attrs.momentum
        running_mean = mean * momentum + tf.cast(batch_mean, mean.dtype) * (1 - momentum)
        running_variance = variance * momentum + tf.cast(batch_variance, variance.dtype) * (
            1 - momentum
        )
        if self.opset_version >= 14:
            return y, running_mean, running_variance
        return y, running_mean, running_variance, batch_mean, inverse

    def with_running_statistics(
        self, inputs: Sequence[Any], per_channel_shape: Callable[[tf.Tensor], tf.Tensor]
    ) -> tuple[tf.Tensor, ...]:
        """Inference: normalized with the running statistics, which come back unchanged."""
        x, scale, bias, mean, variance = inputs[:5]
        epsilon = tf.cast(self.attrs.epsilon, variance.dtype)
        inverse = tf.math.rsqrt(per_channel_shape(variance) + epsilon)
        y = (x - per_channel_shape(mean)) * per_channel_shape(scale) * tf.cast(inverse, x.dtype)
        y = y + per_channel_shape(bias)
        if self.opset_version >= 14:
            return y, mean, variance
        return y, mean, variance, mean, variance


@register_op("InstanceNormalization", since=(1, 6, 22))
class InstanceNormalization(Op):
    def compute(self, x: tf.Tensor, scale: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
        rank = x.shape.rank
        mean, variance = tf.nn.moments(x, axes=list(range(2, rank)), keepdims=True)
        y = (x - mean) * tf.math.rsqrt(variance + self.attrs.epsilon)
        return y * per_channel(scale, rank) + per_channel(bias, rank)


def stashed(x: tf.Tensor, stash_type: int | None) -> tf.Tensor:
    """Compute statistics in float32 unless stash_type asks for the input's own type (0)."""
    if stash_type == 1 and x.dtype in (tf.float16, tf.bfloat16):
        return tf.cast(x, tf.float32)
    return x


@register_op("LayerNormalization", since=17)
class LayerNormalization(Op):
    def compute(
        self, x: tf.Tensor, scale: tf.Tensor, bias: tf.Tensor | None = None
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        rank = x.shape.rank
        axis = normalize_axis(self.attrs.axis, rank)
        values = stashed(x, self.attrs.stash_type)
        mean, variance = tf.nn.moments(values, axes=list(range(axis, rank)), keepdims=True)
        inverse = tf.math.rsqrt(variance + tf.cast(self.attrs.epsilon, values.dtype))
        y = tf.cast((values - mean) * inverse, x.dtype) * scale
        if bias is not None:
            y = y + bias
        return y, mean, inverse


@register_op("GroupNormalization", since=(18, 21))
class GroupNormalization(Op):
    def compute(self, x: tf.Tensor, scale: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
        groups = self.attrs.num_groups
        rank = x.shape.rank
        dims = tf.shape(x)
        values = stashed(x, self.attrs.get("stash_type"))
        grouped = tf.reshape(values, tf.concat([dims[:1], [groups, -1]], axis=0))
        mean, variance = tf.nn.moments(grouped, axes=[2], keepdims=True)
        normalized = (grouped - mean) * tf.math.rsqrt(variance + self.attrs.epsilon)
        normalized = tf.cast(tf.reshape(normalized, dims), x.dtype)
        if self.opset_version < 21:
            # Opset 18 gives one scale and bias per group.
            channels_per_group = x.shape[1] // groups
            scale = tf.repeat(scale, channels_per_group)
            bias = tf.repeat(bias, channels_per_group)
        return normalized * per_channel(scale, rank) + per_channel(bias, rank)


@register_op("RMSNormalization", since=23)
class RMSNormalization(Op):
    def compute(self, x: tf.Tensor, scale: tf.Tensor) -> tf.Tensor:
        rank = x.shape.rank
        axis = normalize_axis(self.attrs.axis, rank)
        values = stashed(x, self.attrs.stash_type)
        mean_square = tf.reduce_mean(tf.square(values), axis=list(range(axis, rank)), keepdims=True)
        inverse = tf.math.rsqrt(mean_square + tf.cast(self.attrs.epsilon, values.dtype))
        return tf.cast(values * inverse, x.dtype) * scale


@register_op("LpNormalization", since=(1, 22))
class LpNormalization(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        axis = normalize_axis(self.attrs.axis, x.shape.rank)
        if self.attrs.p == 1:
            norm = tf.reduce_sum(tf.abs(x), axis=axis, keepdims=True)
        else:
            norm = tf.sqrt(tf.reduce_sum(tf.square(x), axis=axis, keepdims=True))
        # A zero norm gives zeros rather than NaNs.
        return tf.math.divide_no_nan(x, norm)


@register_op("LRN", since=(1, 13))
class LRN(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        size = self.attrs.size
        before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
        squares = tf.square(x)
        padded = tf.pad(squares, [[0, 0], [before, after]] + [[0, 0]] * (x.shape.rank - 2))
        channels = x.shape[1]
        square_sum = tf.add_n([padded[:, offset : offset + channels] for offset in range(size)])
        denominator = tf.pow(
            self.attrs.bias + self.attrs.alpha / size * square_sum, self.attrs.beta
        )
        return x / denominator


@register_op("MeanVarianceNormalization", since=(9, 13))
class MeanVarianceNormalization(Op):
    def compute(self, x: tf.Tensor) -> tf.Tensor:
        axes = normalize_axes(self.attrs.axes, x.shape.rank)
        mean, variance = tf.nn.moments(x, axes=axes, keepdims=True)
        return (x - mean) / (tf.sqrt(variance) + 1e-9)
