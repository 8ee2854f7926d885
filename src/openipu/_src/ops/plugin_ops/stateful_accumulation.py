"""The original's stateful gradient accumulation ops (`IpuStatefulGradientAccumulate` and
its momentum form): each call adds one mini-batch; every `num_mini_batches`-th call
gives the accumulated value and restarts, the other calls give zeros.

As the original's kernels (compiler/plugin/poplar/driver/ops/custom_ops/poputil/
stateful_gradient_accumulate.cc), each op has its own mini-batch counter; the plain form
accumulates in its own buffer, which it zeroes after giving it out; the momentum form
accumulates in the user's variable `accum`, scaled by `momentum` at the first mini-batch
of each group, and leaves the result there. Counter and buffer are engine state of the
replica (`engine.gradient_accumulation.AccumulatorStore`). They are kept across runs of the
program, where the original zeroes them when a run starts (its preamble): the two differ
only for a run that ends in the middle of a group.
"""

from __future__ import annotations

import tensorflow as tf

from openipu._src.engine.gradient_accumulation import AccumulatorStore
from openipu._src.int_like import as_attr_int

_DTYPES = (tf.float16, tf.float32, tf.int32)


def _checked(grad, num_mini_batches, what: str, plain: bool = False) -> tuple[tf.Tensor, int]:
    grad = tf.convert_to_tensor(grad)
    if grad.dtype not in _DTYPES:
        raise TypeError(
            f"{what}: the input must be float16, float32 or int32, got dtype {grad.dtype.name}"
        )
    if not grad.shape.is_fully_defined():
        raise ValueError(f"{what}: the input must have a fully defined shape, got {grad.shape}")
    count = as_attr_int(num_mini_batches, f"{what}: num_mini_batches")
    if count < 1 and plain:
        # The plain form's kernel (kernels/poputil/stateful_gradient_accumulate.cc).
        raise tf.errors.FailedPreconditionError(
            None, None, "num_mini_batches needs to be at least 1."
        )
    if count < 1:
        raise ValueError(f"{what}: num_mini_batches must be at least 1, got {count}")
    return grad, count


def accumulate(grad, num_mini_batches, name=None) -> tf.Tensor:
    """The sum of the last `num_mini_batches` inputs at every `num_mini_batches`-th call."""
    what = "ipu_stateful_gradient_accumulate"
    grad, count = _checked(grad, num_mini_batches, what, plain=True)
    with tf.name_scope(name or "IpuStatefulGradientAccumulate"):
        store = AccumulatorStore("stateful_gradient_accumulate")
        buffer = store.buffer("accumulator", grad.shape, grad.dtype, "stateful_accumulator")
        counter = store.counter(None)
        seen = counter.read_value()
        is_last = tf.equal(seen, count - 1)
        total = buffer.read_value() + grad
        zeros = tf.zeros_like(total)
        output = tf.where(is_last, total, zeros)
        with tf.control_dependencies([output]):
            updates = [
                buffer.assign(tf.where(is_last, zeros, total)),
                counter.assign(tf.where(is_last, 0, seen + 1)),
            ]
        with tf.control_dependencies(updates):
            return tf.identity(output)


def accumulate_with_momentum(accum, grad, momentum, num_mini_batches, name=None) -> tf.Tensor:
    """Like `accumulate`, the sum kept in the variable `accum` (a resource) and carried
    into the next group scaled by `momentum`."""
    what = "ipu_stateful_gradient_accumulate_with_momentum"
    grad, count = _checked(grad, num_mini_batches, what)
    accum = tf.convert_to_tensor(accum)
    if accum.dtype != tf.resource:
        raise TypeError(f"{what}: accum must be a resource variable handle, got {accum.dtype.name}")
    momentum = tf.convert_to_tensor(momentum, grad.dtype)
    with tf.name_scope(name or "IpuStatefulGradientAccumulateWithMomentum"):
        store = AccumulatorStore("stateful_gradient_accumulate_with_momentum")
        counter = store.counter(None)
        seen = counter.read_value()
        held = tf.raw_ops.ReadVariableOp(resource=accum, dtype=grad.dtype)
        total = tf.where(tf.equal(seen, 0), held * momentum, held) + grad
        is_last = tf.equal(seen, count - 1)
        output = tf.where(is_last, total, tf.zeros_like(total))
        with tf.control_dependencies([output]):
            updates = [
                tf.raw_ops.AssignVariableOp(resource=accum, value=total),
                counter.assign(tf.where(is_last, 0, seen + 1)),
            ]
        with tf.control_dependencies(updates):
            return tf.identity(output)
