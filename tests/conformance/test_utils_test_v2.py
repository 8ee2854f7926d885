"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/utils_test_v2.py`.

A repeat loop whose body holds a condition on a captured variable, differentiated with a
GradientTape inside an XLA-compiled function run by IPUStrategy (TensorFlow 2
behaviour): each step's gradient update lowers the loss. The original calls
`control_flow_ops.cond`, which TensorFlow 2.21 keeps as `tf.cond`.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

LEARNING_RATE = 0.01


@pytest.fixture
def strategy():
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 1
    cfg.configure_ipu_system()
    yield ipu.ipu_strategy.IPUStrategyV1()
    ipu.config.reset_ipu_configuration()


@pytest.mark.follows("testRepeatLoopWithConditional")
def test_repeat_loop_with_conditional(strategy):
    with strategy.scope():
        opt = tf.keras.optimizers.SGD(LEARNING_RATE)
        a_data = np.ones((1, 10), dtype=np.float32)
        v = tf.Variable(1, shape=(), dtype=np.float32)

        @tf.function(jit_compile=True)
        def fn_with_loop(in_a, n):
            def loop_body(a, c):
                a, c = tf.cond(tf.less_equal(c, n), lambda: (a + v, c), lambda: (a, c))
                return a, c + 1

            with tf.GradientTape() as tape:
                tape.watch(v)
                res = ipu.loops.repeat(10, loop_body, inputs=[in_a, 0])
                cost = tf.reduce_sum(res[0])
                g = tape.gradient(cost, v)
                opt.apply_gradients([(g, v)])
            return cost

        losses = [
            float(np.sum(strategy.run(fn_with_loop, args=[a_data, np.array([0], np.int32)])))
            for _ in range(5)
        ]
    # n = 0: the body adds v once (c = 0), so cost = sum(1 + v) over 10 elements, and
    # d cost / d v = 10: SGD lowers v by 0.1 a step.
    np.testing.assert_allclose(losses, [20.0 - i for i in range(5)], rtol=1e-5)
