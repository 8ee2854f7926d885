"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/replicated_seed_control_test.py`.

With `experimental.enable_prng_stability` and stochastic rounding switched on, replicas
fed the same values compute the same results: a float16 cast gathered from 2 replicas,
and 10 steps of a small float16 computation on 4 replicas (an input declared equal
across replicas plus noise). The emulated IPUs round to nearest (they have no
stochastic rounding), so their replicas agree; the original's other two scenarios
assert that stochastic rounding differs between replicas and runs, which needs the IPU.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.compiler.plugin.poplar.ops import gen_popops_ops
from tensorflow.python import ipu

v1 = tf.compat.v1


def _configure(replicas):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = [replicas]
    config.experimental.enable_prng_stability = True
    config.floating_point_behaviour.esr = ipu.config.StochasticRoundingBehaviour.ON
    config.configure_ipu_system()


@pytest.mark.follows("test_experimental_identical_seeds")
def test_experimental_identical_seeds(tf1_graph):
    # Built in a plain ipu_scope before the configuration: the original replicates the
    # scope's ops over the configured device's 2 IPUs at the first run.
    inp = v1.placeholder(np.float32, [10])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        cast1 = tf.cast(inp, np.float16)
        (out0,) = gen_popops_ops.ipu_all_gather([cast1], replication_factor=2)
    _configure(2)
    try:
        with v1.Session(graph=tf1_graph) as sess:
            res = sess.run(out0, {inp: np.full([10], 0.1)}).astype(np.float32)
    finally:
        ipu.config.reset_ipu_configuration()
    assert res.shape == (2, 10)
    np.testing.assert_array_equal(res[0], res[1])
    np.testing.assert_array_equal(res[0], np.float32(np.float16(0.1)))


@pytest.mark.follows("test_experimental_identical_compute")
def test_experimental_identical_compute(tf1_graph):
    _configure(4)
    try:
        v1.set_random_seed(1234)
        dataset = tf.data.Dataset.from_tensor_slices([[[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]])
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.repeat())
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        noise = tf.random.uniform([2, 3], dtype=np.float32, seed=1)

        def body(noise, infeed_value):
            infeed_value = ipu.cross_replica_ops.assume_equal_across_replicas(infeed_value)
            result = tf.cast(infeed_value, np.float16) + tf.cast(noise, np.float16)
            result = tf.cast(result * tf.cast(0.01, np.float16), np.float32)
            return result, outfeed.enqueue(result)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            res = ipu.ipu_compiler.compile(
                lambda: ipu.loops.repeat(10, body, [noise], infeed), inputs=[]
            )
        dequeued = outfeed.dequeue()
        with v1.Session(graph=tf1_graph) as sess:
            sess.run(infeed.initializer)
            sess.run(res)
            results = sess.run(dequeued)
    finally:
        ipu.config.reset_ipu_configuration()
    # One value per replica for each of the 10 iterations: the replicas agree.
    assert results.shape == (10, 4, 2, 3)
    for replica_results in results:
        for result in replica_results:
            np.testing.assert_array_equal(result, replica_results[0])
    # Each step adds the same input to what the previous step left, scaled by 0.01.
    np.testing.assert_allclose(
        results[1][0],
        (np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]) + results[0][0]) * 0.01,
        rtol=2e-3,
        atol=1e-6,
    )
