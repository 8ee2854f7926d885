"""ShardedOptimizer: the wrapped optimizer's numbers, gradients colocated with their ops."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.optimizers.sharded_optimizer import ShardedOptimizer


class RecordingGradientDescent(tf.compat.v1.train.GradientDescentOptimizer):
    def compute_gradients(self, loss, var_list=None, **kwargs):
        self.kwargs = kwargs
        return super().compute_gradients(loss, var_list=var_list, **kwargs)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_trains_like_the_wrapped_optimizer(jit_compile):
    inner = RecordingGradientDescent(0.1)
    optimizer = ShardedOptimizer(inner)
    w = tf.Variable([1.0, -3.0])

    @tf.function(jit_compile=jit_compile)
    def step():
        optimizer.minimize(tf.reduce_sum((w - 1.0) ** 2), var_list=[w])

    expected = np.array([1.0, -3.0])
    for _ in range(3):
        step()
        expected = expected - 0.1 * 2 * (expected - 1.0)
    np.testing.assert_allclose(w.numpy(), expected, rtol=1e-6)
    assert inner.kwargs["colocate_gradients_with_ops"] is True


@pytest.mark.parametrize(
    "grads_and_vars, error, message",
    [
        # Eagerly, the stock v1 Optimizer.apply_gradients' errors (more cases, in a
        # tf.function: test_optimizers_original_rules.py).
        (None, TypeError, "^'NoneType' object is not iterable$"),
        ([(1.0, 2.0)], AttributeError, "^'float' object has no attribute 'handle'$"),
    ],
)
def test_malformed_grads_and_vars(grads_and_vars, error, message):
    optimizer = ShardedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1))
    with pytest.raises(error, match=message):
        optimizer.apply_gradients(grads_and_vars)
