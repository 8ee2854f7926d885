"""Random ops (Dropout, RandomNormal/Uniform[Like], Bernoulli, Multinomial).

All use TensorFlow's stateless random ops, seeded from the node's ``seed`` attribute (where
PopART allows one) or else the run's seed, so a seeded run gives the same numbers eagerly and
compiled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf
from onnx import TensorProto

from openipu._src.popart.lowering.dtypes import ONNX_TO_TF, TF_TO_ONNX
from openipu._src.popart.lowering.op import RNG_ALGORITHM, Op, RunContext
from openipu._src.popart.lowering.registry import register_op


class RandomOp(Op):
    stateful = True

    def seed(self, context: RunContext) -> tf.Tensor:
        seed = self.attrs.get("seed")
        if seed is not None:
            # A fixed seed attribute makes the op deterministic, as in onnxruntime.
            return tf.constant([int(seed * 1000) & 0x7FFFFFFF, 0], dtype=tf.int64)
        return context.op_seed(self)

    def dtype(self, default: tf.DType) -> tf.DType:
        dtype = self.attrs.get("dtype")
        return ONNX_TO_TF[dtype] if dtype is not None else default


@register_op("Dropout", since=(1, 6, 7, 10, 12, 13, 22))
class Dropout(RandomOp):
    def setup(self) -> None:
        # PopART refuses a ratio outside [0, 1) in its words (willow/src/op/dropoutbase.cpp,
        # validateRatioAttribute; operators_test/dropout_test.py, test_dropout_training8).
        ratio = self.attrs.get("ratio") if self.opset_version < 12 else None
        if ratio is not None and not 0 <= ratio < 1:
            self.bad_attribute(
                "ratio", f"value {ratio} is not valid. Please use a value in the interval [0,1)"
            )

    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[tf.Tensor, ...]:
        x = inputs[0]
        ratio_input = inputs[1] if len(inputs) > 1 else None
        training_input = inputs[2] if len(inputs) > 2 else None
        if self.opset_version >= 12:
            ratio = tf.cast(ratio_input, tf.float32) if ratio_input is not None else 0.5
            if training_input is not None:
                training = tf.get_static_value(tf.reshape(training_input, []))
                if training is None:
                    raise self.error("input 'training_mode' must be a constant")
                training = bool(training)
            else:
                training = context.training
        else:
            ratio = self.attrs.ratio
            training = context.training and not self.attrs.get("is_test")
        wants_mask = len(self.node.output) > 1 and self.node.output[1]
        if not training or (isinstance(ratio, float) and ratio == 0):
            mask = tf.ones_like(x, dtype=tf.bool)
            return (tf.identity(x), mask) if wants_mask else tf.identity(x)
        keep = 1 - ratio
        uniform = tf.random.stateless_uniform(
            tf.shape(x), seed=self.seed(context), alg=RNG_ALGORITHM
        )
        mask = uniform < keep
        scale = (
            tf.cast(1 / keep, x.dtype) if isinstance(keep, float) else tf.cast(1 / keep, x.dtype)
        )
        y = tf.where(mask, x * scale, tf.zeros_like(x))
        return (y, mask) if wants_mask else y


def random_values(
    kind: str, shape: Any, dtype: tf.DType, seed: tf.Tensor, first: float, second: float
) -> tf.Tensor:
    """Normal (mean=first, scale=second) or uniform (low=first, high=second) samples."""
    if kind == "normal":
        values = tf.random.stateless_normal(
            shape, seed, mean=first, stddev=second, alg=RNG_ALGORITHM
        )
    else:
        values = tf.random.stateless_uniform(
            shape, seed, minval=first, maxval=second, alg=RNG_ALGORITHM
        )
    return tf.cast(values, dtype)


# The element types Poplar has no type for (willow/src/popx/irlowering.cpp, popType).
_NOT_IN_POPLAR = frozenset(
    {
        TensorProto.UNDEFINED,
        TensorProto.INT64,
        TensorProto.STRING,
        TensorProto.BFLOAT16,
        TensorProto.DOUBLE,
        TensorProto.UINT64,
        TensorProto.COMPLEX64,
        TensorProto.COMPLEX128,
    }
)


class RandomDraw(RandomOp):
    """RandomNormal/Uniform[Like]: PopART draws them from the session's seed only and
    refuses a seed attribute (willow/src/op/randombase.cpp, errorIfSeedIsSet), and a type
    Poplar does not have."""

    def setup(self) -> None:
        if any(attribute.name == "seed" for attribute in self.node.attribute):
            raise self.error(
                "Optional seed attribute is not supported. Use session::setRandomSeed instead."
            )
        dtype = self.attrs.get("dtype")
        if dtype in _NOT_IN_POPLAR:
            raise self.error(
                f"The data type {TensorProto.DataType.Name(dtype)} is not supported in Poplar"
            )

    def like_dtype(self, x: tf.Tensor) -> tf.DType:
        """The type of a -like op's draws: its dtype attribute, else its input's, which
        must be float16 or float32 (willow/src/op/shapeorlike.cpp, setupLike)."""
        if self.attrs.get("dtype") is None and x.dtype not in (tf.float16, tf.float32):
            name = TensorProto.DataType.Name(TF_TO_ONNX[x.dtype])
            raise self.error(f"Unsupported data type requested: {name}")
        return self.dtype(x.dtype)


@register_op("RandomNormal", since=(1, 22))
class RandomNormal(RandomDraw):
    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[tf.Tensor]:
        attrs = self.attrs
        values = random_values(
            "normal",
            list(attrs.shape),
            self.dtype(tf.float32),
            self.seed(context),
            attrs.mean,
            attrs.scale,
        )
        return (values,)


@register_op("RandomUniform", since=(1, 22))
class RandomUniform(RandomDraw):
    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[tf.Tensor]:
        attrs = self.attrs
        values = random_values(
            "uniform",
            list(attrs.shape),
            self.dtype(tf.float32),
            self.seed(context),
            attrs.low,
            attrs.high,
        )
        return (values,)


@register_op("RandomNormalLike", since=(1, 22))
class RandomNormalLike(RandomDraw):
    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[tf.Tensor]:
        x, attrs = inputs[0], self.attrs
        values = random_values(
            "normal", tf.shape(x), self.like_dtype(x), self.seed(context), attrs.mean, attrs.scale
        )
        return (values,)


@register_op("RandomUniformLike", since=(1, 22))
class RandomUniformLike(RandomDraw):
    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[tf.Tensor]:
        x, attrs = inputs[0], self.attrs
        values = random_values(
            "uniform", tf.shape(x), self.like_dtype(x), self.seed(context), attrs.low, attrs.high
        )
        return (values,)


@register_op("Bernoulli", since=(15, 22))
class Bernoulli(RandomOp):
    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[tf.Tensor]:
        probabilities = inputs[0]
        uniform = tf.random.stateless_uniform(
            tf.shape(probabilities), self.seed(context), dtype=tf.float64, alg=RNG_ALGORITHM
        )
        drawn = uniform < tf.cast(probabilities, tf.float64)
        return (tf.cast(drawn, self.dtype(probabilities.dtype)),)


@register_op("Multinomial", since=(7, 22))
class Multinomial(RandomOp):
    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[tf.Tensor]:
        logits = inputs[0]
        samples = tf.random.stateless_categorical(
            logits, self.attrs.sample_size, self.seed(context), dtype=tf.int64
        )
        return (tf.cast(samples, self.dtype(tf.int32)),)
