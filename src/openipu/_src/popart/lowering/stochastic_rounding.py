"""Stochastic rounding of float16 results (SessionOptions.enableStochasticRounding).

The IPU's float16 arithmetic with stochastic rounding computes each result wider and rounds it
to one of its two float16 neighbours, the upper one with probability equal to the distance
from the lower one in units of the gap. The emulation does the same: an op with float16
results is run on float32 copies of its float16 inputs, and each float32 result is rounded to
float16 so, with uniform numbers drawn from the run's rounding seed (which the device's RNG
state gives, see `session/random_state.py`). Values float16 holds exactly (data movement) are
unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from openipu._src.engine.cost_model.tf_workload import IN_HARDWARE_SCOPE
from openipu._src.popart.lowering.op import RNG_ALGORITHM, Op, RunContext

_MANTISSA_BITS_F32 = 23
_MANTISSA_BITS_F16 = 10
_EXPONENT_BIAS_F32 = 127
_MIN_NORMAL_EXPONENT_F16 = -14  # below it float16's gap stays that of its subnormals


def round_to_half(value: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """`value` (float32) rounded stochastically to float16; the gradient passes through."""

    @tf.custom_gradient
    def rounded(x: tf.Tensor) -> Any:
        def grad(upstream: tf.Tensor) -> tf.Tensor:
            return tf.cast(upstream, tf.float32)

        return _round(x, seed), grad

    return rounded(value)


def _round(x: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    # The chip rounds as it computes: the emulation's ops are no operations of the program
    # for the cost model; the result's conversion stands for the rounding op.
    with tf.name_scope(IN_HARDWARE_SCOPE):
        rounded = _rounded_wide(x, seed)
    return tf.cast(rounded, tf.float16)


def _rounded_wide(x: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """`x` moved to one of its float16 neighbours (still float32, so exact)."""
    bits = tf.bitcast(x, tf.int32)
    exponent = tf.bitwise.bitwise_and(tf.bitwise.right_shift(bits, _MANTISSA_BITS_F32), 0xFF)
    exponent = tf.maximum(exponent - _EXPONENT_BIAS_F32, _MIN_NORMAL_EXPONENT_F16)
    # float16's gap at x, a power of two built from its bits (exact, unlike pow).
    gap_exponent = exponent - _MANTISSA_BITS_F16 + _EXPONENT_BIAS_F32
    gap = tf.bitcast(tf.bitwise.left_shift(gap_exponent, _MANTISSA_BITS_F32), tf.float32)
    scaled = x / gap  # exact: a power-of-two scaling
    lower = tf.floor(scaled)
    uniform = tf.random.stateless_uniform(tf.shape(x), seed, dtype=tf.float32, alg=RNG_ALGORITHM)
    up = tf.cast(uniform < scaled - lower, tf.float32)
    return tf.where(tf.math.is_finite(x), (lower + up) * gap, x)


def applies(op: Op, context: RunContext, arguments: list[Any]) -> bool:
    """Whether `op`'s results are rounded stochastically in this run: the run asks for it
    (`context.rounding_seed`), the op has float16 arguments and results, and the type of
    every result is known (`context.half_tensors` tells which are float16). Ops with
    subgraphs (whose own ops are rounded) and stateful ops run as they are, and so does a
    Cast to float16 (no float16 argument)."""
    if context.rounding_seed is None or context.tensor_is_half is None:
        return False
    if op.stateful or op.subgraphs:
        return False
    outputs = [name for name in op.node.output if name]
    known = context.tensor_is_half
    if not outputs or any(name not in known for name in outputs):
        return False
    return any(known[name] for name in outputs) and any(_is_half(a) for a in arguments)


def run_wide(
    run: Callable[[list[Any]], tuple[Any, ...]],
    op: Op,
    context: RunContext,
    arguments: list[Any],
) -> tuple[Any, ...]:
    """`op`'s results (`applies` holds), computed by `run` on float32 copies of its float16
    arguments, the float16 ones rounded stochastically."""
    assert context.rounding_seed is not None and context.tensor_is_half is not None
    wide = run([tf.cast(a, tf.float32) if _is_half(a) else a for a in arguments])
    op_seed = tf.random.experimental.stateless_fold_in(
        context.rounding_seed, op.salt, alg=RNG_ALGORITHM
    )
    results = []
    for index, (name, result) in enumerate(zip(op.node.output, wide, strict=False)):
        if name and context.tensor_is_half[name] and _is_wide(result):
            seed = tf.random.experimental.stateless_fold_in(op_seed, index, alg=RNG_ALGORITHM)
            result = round_to_half(result, seed)
        results.append(result)
    return tuple(results)


def _is_wide(value: Any) -> bool:
    return isinstance(value, tf.Tensor) and value.dtype == tf.float32


def _is_half(value: Any) -> bool:
    return isinstance(value, tf.Tensor) and value.dtype == tf.float16
