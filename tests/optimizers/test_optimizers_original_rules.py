"""Optimizer wrappers' errors as the original's (audit F21, F23, F25): user programs.

Errors raised while a tf.function is traced carry TensorFlow's "in user code" preamble,
so their words are matched where they appear, not from the message's start.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

SGD = tf.compat.v1.train.GradientDescentOptimizer


def _sgd():
    return SGD(0.5)


def _apply_in_function(optimizer, make_pairs):
    """Applies `make_pairs(w)`'s gradients in a tf.function; returns w afterwards."""
    w = tf.Variable([1.0, 2.0])

    @tf.function
    def step():
        optimizer.apply_gradients(make_pairs(w))

    step()
    return w


# F21: num_mini_batches


@pytest.mark.parametrize(
    "wrapper",
    [
        ipu.optimizers.GradientAccumulationOptimizer,
        ipu.optimizers.CrossReplicaGradientAccumulationOptimizer,
    ],
)
def test_v1_accumulation_truncates_a_fractional_count(wrapper):
    # The op's int attribute takes int(2.5) == 2: the update comes every 2 mini-batches.
    optimizer = wrapper(_sgd(), 2.5)
    w = tf.Variable([1.0, 2.0])

    @tf.function
    def step():
        optimizer.apply_gradients([(tf.ones([2]), w)])

    step()
    np.testing.assert_allclose(w.numpy(), [1.0, 2.0])
    step()
    np.testing.assert_allclose(w.numpy(), [0.0, 1.0])


@pytest.mark.parametrize(
    "wrapper",
    [
        ipu.optimizers.GradientAccumulationOptimizerV2,
        ipu.optimizers.CrossReplicaGradientAccumulationOptimizerV2,
    ],
)
@pytest.mark.parametrize(
    "count, dtype", [(2.5, "float32"), (2.0, "float32"), (np.int64(2), "int64"), (True, "bool")]
)
def test_v2_accumulation_takes_a_count_an_int32_tensor_holds(wrapper, count, dtype):
    # Built; refused when gradients are applied by the int32 count op.
    optimizer = wrapper(_sgd(), count)
    with pytest.raises(
        TypeError,
        match=f"Input 'value' of 'GradientAccumulationCount' Op has type {dtype} that does "
        "not match expected type of int32.",
    ):
        _apply_in_function(optimizer, lambda w: [(tf.ones([2]), w)])


def test_v2_running_mean_with_a_float_count_fails_at_the_modulo():
    optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(
        _sgd(), 2.5, reduction_method="running_mean"
    )
    with pytest.raises(TypeError, match="op 'FloorMod'"):
        _apply_in_function(optimizer, lambda w: [(tf.ones([2]), w)])


def test_v2_accumulation_with_a_numpy_int32_count_works():
    optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(_sgd(), np.int32(1))
    w = _apply_in_function(optimizer, lambda w: [(tf.ones([2]), w)])
    np.testing.assert_allclose(w.numpy(), [0.5, 1.5])


@pytest.mark.parametrize(
    "wrapper",
    [
        ipu.optimizers.GradientAccumulationOptimizer,
        ipu.optimizers.GradientAccumulationOptimizerV2,
        ipu.optimizers.CrossReplicaGradientAccumulationOptimizer,
        ipu.optimizers.CrossReplicaGradientAccumulationOptimizerV2,
    ],
)
def test_a_count_below_one_is_refused_when_built(wrapper):
    with pytest.raises(ValueError, match=r"^num_mini_batches must be a positive number\.$"):
        wrapper(_sgd(), 0.5)
    with pytest.raises(TypeError, match="'<' not supported"):
        wrapper(_sgd(), "4")


# F23: when verify_usage and gradient_mapping_function are checked


def test_verify_usage_not_a_bool_is_refused_when_gradients_are_applied():
    optimizer = ipu.optimizers.GradientAccumulationOptimizer(_sgd(), 2, verify_usage=1)
    with pytest.raises(TypeError, match=r"Expected bool for argument 'verify_usage' not 1\."):
        _apply_in_function(optimizer, lambda w: [(tf.ones([2]), w)])


def test_verify_usage_none_is_the_default():
    adam = tf.compat.v1.train.AdamOptimizer(0.1)
    optimizer = ipu.optimizers.GradientAccumulationOptimizer(adam, 2, verify_usage=None)
    with pytest.raises(tf.errors.FailedPreconditionError, match="only supported with"):
        _apply_in_function(optimizer, lambda w: [(tf.ones([2]), w)])


def test_a_mapping_function_that_cannot_be_called_fails_computing_gradients():
    optimizer = ipu.optimizers.MapGradientOptimizer(_sgd(), 3)
    w = tf.Variable([1.0, 2.0])
    with pytest.raises(TypeError, match=r"^'int' object is not callable$"):
        optimizer.compute_gradients(lambda: tf.reduce_sum(w * w), var_list=[w])


# F25: apply_gradients as the stock v1 Optimizer's


@pytest.mark.parametrize(
    "make_pairs, error, message",
    [
        (lambda w: 5, TypeError, "'int' object is not iterable"),
        (lambda w: [], ValueError, r"No variables provided\."),
        (lambda w: [5], TypeError, "cannot unpack non-iterable int object"),
        (lambda w: [(tf.ones([2]),)], ValueError, "not enough values to unpack"),
        (
            lambda w: [(object(), w)],
            TypeError,
            "Gradient must be convertible to a Tensor or IndexedSlices, or None: <object",
        ),
        (
            lambda w: [(None, w)],
            ValueError,
            r"No gradients provided for any variable: \[\"<tf.Variable",
        ),
        (
            lambda w: [(tf.ones([2]), 5)],
            AttributeError,
            "'int' object has no attribute 'op'",
        ),
    ],
)
@pytest.mark.parametrize(
    "wrapper", [ipu.optimizers.CrossReplicaOptimizer, ipu.optimizers.ShardedOptimizer]
)
def test_apply_gradients_errors_are_the_stock_optimizers(wrapper, make_pairs, error, message):
    with pytest.raises(error, match=message):
        _apply_in_function(wrapper(_sgd()), make_pairs)


def test_integer_gradients_reach_the_wrapped_optimizer(tf1_graph):
    # No dtype rule of the wrapper's own: the graph builds (its update fails when it runs).
    w = tf.Variable([1, 2])
    optimizer = ipu.optimizers.CrossReplicaOptimizer(_sgd())
    assert optimizer.apply_gradients([(tf.constant([1, 2]), w)]) is not None


def test_in_a_strategy_s_cross_replica_context_apply_gradients_is_refused():
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        w = tf.Variable([1.0, 2.0])
        optimizer = ipu.optimizers.CrossReplicaOptimizer(_sgd())
        with pytest.raises(RuntimeError, match="^Use `_distributed_apply\\(\\)` instead of"):
            optimizer.apply_gradients([(tf.ones([2]), w)])


def test_in_a_strategy_s_replica_gradients_without_values_are_dropped():
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        w = tf.Variable([1.0, 2.0])
        v = tf.Variable([1.0])
        optimizer = ipu.optimizers.CrossReplicaOptimizer(_sgd())

    @tf.function
    def step():
        strategy.run(lambda: optimizer.apply_gradients([(tf.ones([2]), w), (None, v)]))

    step()
    np.testing.assert_allclose(w.numpy(), [0.5, 1.5])


# MapGradientOptimizer.compute_gradients (original map_gradient_optimizer.py:98-101): the
# map is called for every (gradient, variable) pair, None gradients included, with the
# variable's value (`var.value()`), and what it returns becomes the pair's gradient.


def _decay_or_gradient(grad, value):
    # A variable the loss does not use still decays towards zero.
    return 0.1 * value if grad is None else grad + 0.1 * value


def test_map_gradient_optimizer_decays_a_variable_without_gradient_on_an_ipu(strategy_on):
    strategy = strategy_on(1)
    with strategy.scope():
        used = tf.Variable([1.0, -2.0])
        unused = tf.Variable([3.0])
        optimizer = ipu.optimizers.MapGradientOptimizer(SGD(0.1), _decay_or_gradient)

        @tf.function(jit_compile=True)
        def step():
            def body():
                loss = lambda: tf.reduce_sum(used * used)  # noqa: E731
                optimizer.minimize(loss, var_list=[used, unused])

            strategy.run(body)

        for _ in range(3):
            step()

    expected_used, expected_unused = np.array([1.0, -2.0]), np.array([3.0])
    for _ in range(3):
        expected_used = expected_used - 0.1 * (2 * expected_used + 0.1 * expected_used)
        expected_unused = expected_unused - 0.1 * (0.1 * expected_unused)
    np.testing.assert_allclose(used.numpy(), expected_used, rtol=1e-6)
    np.testing.assert_allclose(unused.numpy(), expected_unused, rtol=1e-6)


def test_map_gradient_optimizer_gives_the_map_values_and_none_gradients():
    seen = []

    def record(grad, value):
        seen.append((grad, value))
        return grad

    used, unused = tf.Variable([1.0, 2.0]), tf.Variable([5.0])
    optimizer = ipu.optimizers.MapGradientOptimizer(_sgd(), record)
    pairs = optimizer.compute_gradients(lambda: tf.reduce_sum(used * used), [used, unused])

    assert len(seen) == 2
    assert all(isinstance(v, tf.Tensor) and not isinstance(v, tf.Variable) for _, v in seen)
    np.testing.assert_allclose(seen[0][0], [2.0, 4.0])
    np.testing.assert_allclose(seen[0][1], [1.0, 2.0])
    assert seen[1][0] is None
    np.testing.assert_allclose(seen[1][1], [5.0])
    assert pairs[1] == (None, unused)
    assert pairs[0][1] is used


def test_map_gradient_optimizer_value_is_read_before_the_update():
    # The map receives a snapshot (a read of the variable), not the variable itself.
    values = []
    w = tf.Variable([1.0, 2.0])
    optimizer = ipu.optimizers.MapGradientOptimizer(_sgd(), lambda g, v: values.append(v) or g)
    optimizer.apply_gradients(optimizer.compute_gradients(lambda: tf.reduce_sum(w * w), [w]))
    np.testing.assert_allclose(w.numpy(), [0.0, 0.0])
    np.testing.assert_allclose(values[0], [1.0, 2.0])


def test_map_gradient_optimizer_map_failing_on_none_fails_computing_gradients():
    used, unused = tf.Variable([1.0]), tf.Variable([2.0])
    optimizer = ipu.optimizers.MapGradientOptimizer(_sgd(), lambda g, v: g * 2.0)
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \*: 'NoneType'"):
        optimizer.compute_gradients(lambda: tf.reduce_sum(used), [used, unused])
