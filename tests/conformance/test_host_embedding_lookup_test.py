"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/host_embedding_lookup_test.py`.

Host embeddings (`embedding_ops.create_host_embedding`) in TF1 programs: a lookup
without training gives the table's rows (and does not wait for updates); a program that
looks nothing up runs while the embedding is registered; a training step whose host
embedding has learning rate 0 leaves the table unchanged while the rest of the model
learns (the original also checks in the execution profile that no lookup gradients
reach the host, a Poplar report, left out). Smaller tables than the original's (the
values do not depend on the size). The DIEN- and AGI-shaped scenarios drive the
embedding through the generated op module `gen_pop_datastream_ops` (register, device
lookup and update, deregister).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

v1 = tf.compat.v1
embedding_ops = ipu.embedding_ops


@pytest.fixture
def one_ipu():
    """Configures one IPU when called (after the program is built, as the original)."""

    def configure():
        config = ipu.config.IPUConfig()
        config.auto_select_ipus = 1
        config.configure_ipu_system()

    yield configure
    ipu.config.reset_ipu_configuration()


def _device_lookup_and_update(tf1_graph, shape, lookup_count):
    from tensorflow.compiler.plugin.poplar.ops import gen_pop_datastream_ops as datastream

    def my_net(i):
        out = datastream.ipu_device_embedding_lookup(
            i, embedding_id="host_embedding", embedding_shape=shape, dtype=np.float32
        )
        datastream.ipu_device_embedding_update_add(
            out, out, i, embedding_id="host_embedding", embedding_shape=shape
        )
        return out

    with tf.device("cpu"):
        i = v1.placeholder(np.int32, [lookup_count])
        w = v1.get_variable("foo", dtype=np.float32, shape=shape, use_resource=False)
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        r = ipu.ipu_compiler.compile(my_net, inputs=[i])
    with v1.Session(graph=tf1_graph) as sess:
        indices = np.arange(lookup_count)
        sess.run(v1.global_variables_initializer())
        sess.run(datastream.ipu_host_embedding_register(w, "host_embedding"))
        result = sess.run([r], {i: indices})
        table = sess.run(datastream.ipu_host_embedding_deregister(w, "host_embedding"))
    # Updated with the looked-up rows themselves: the table holds twice them.
    np.testing.assert_allclose(result[0][0] * 2, np.take(table, indices, axis=0))


@pytest.mark.follows("testDIENShape")
def test_dien_shape(tf1_graph, one_ipu):
    _device_lookup_and_update(tf1_graph, [100000, 20], 4096)


@pytest.mark.follows("testAGIShape")
def test_agi_shape(tf1_graph, one_ipu):
    _device_lookup_and_update(tf1_graph, [1000, 200], 512)


SHAPE = [1000, 200]
LOOKUPS = 512


def _host_embedding(learning_rate=0.5, **kwargs):
    return embedding_ops.create_host_embedding(
        "my_host_embedding",
        SHAPE,
        np.float32,
        optimizer_spec=embedding_ops.HostEmbeddingOptimizerSpec(learning_rate),
        **kwargs,
    )


def _indices_placeholder(count=LOOKUPS):
    with tf.device("cpu"):
        return v1.placeholder(np.int32, [count])


@pytest.mark.follows("testTrainNoExec")
def test_train_no_exec(tf1_graph, one_ipu):
    host_embedding = _host_embedding()
    i = _indices_placeholder()
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        r = ipu.ipu_compiler.compile(host_embedding.lookup, inputs=[i])
    one_ipu()
    indices = np.arange(LOOKUPS)
    with v1.Session(graph=tf1_graph) as sess:
        sess.run(v1.global_variables_initializer())
        with host_embedding.register(sess):
            # Not training: the lookup does not wait for updates.
            result = sess.run([r], {i: indices})
        table = sess.run(host_embedding.get_embedding_tensor())
    np.testing.assert_allclose(result[0][0], np.take(table, indices, axis=0))


@pytest.mark.follows("testNoLookup")
def test_no_lookup(tf1_graph, one_ipu):
    host_embedding = _host_embedding()
    i = _indices_placeholder()
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        r = ipu.ipu_compiler.compile(lambda i: i, inputs=[i])
    one_ipu()
    indices = np.arange(LOOKUPS)
    with v1.Session(graph=tf1_graph) as sess:
        sess.run(v1.global_variables_initializer())
        with host_embedding.register(sess):
            result = sess.run([r], {i: indices})
    np.testing.assert_array_equal(result[0][0], indices)


@pytest.mark.follows("testNoTrain")
def test_no_train(tf1_graph, one_ipu):
    shape = [4, 1024]
    host_embedding = embedding_ops.create_host_embedding(
        "my_host_embedding",
        shape,
        np.float32,
        initializer=tf.ones(shape, np.float32),
        optimizer_spec=embedding_ops.HostEmbeddingOptimizerSpec(0.0),
    )

    def my_net(i):
        lookup = host_embedding.lookup(i)
        weight = v1.get_variable(
            "w", shape=(shape[1], 1), dtype=np.float32, initializer=v1.zeros_initializer()
        )
        loss = tf.reduce_mean(tf.square(tf.matmul(lookup, weight) - np.ones(i.shape[0])))
        optimizer = v1.train.GradientDescentOptimizer(learning_rate=0.0001)
        train_op = optimizer.apply_gradients(optimizer.compute_gradients(loss))
        with tf.control_dependencies([train_op]):
            return loss

    i = _indices_placeholder(2)
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        r = ipu.ipu_compiler.compile(my_net, inputs=[i])
    one_ipu()
    indices = np.arange(1, 3)
    with v1.Session(graph=tf1_graph) as sess:
        sess.run(v1.global_variables_initializer())
        with host_embedding.register(sess):
            before = np.take(sess.run(host_embedding.get_embedding_tensor()), indices, axis=0)
            first_loss = sess.run([r], {i: indices})[0][0]
            after_one = np.take(sess.run(host_embedding.get_embedding_tensor()), indices, axis=0)
            second_loss = sess.run([r], {i: indices})[0][0]
            after_two = np.take(sess.run(host_embedding.get_embedding_tensor()), indices, axis=0)
    # The weight starts at zero: the first loss is mean((0 - 1)^2) = 1. The weight learns,
    # so the second loss differs; the host embedding (learning rate 0) does not change.
    assert first_loss == 1.0
    assert second_loss != 1.0
    np.testing.assert_array_equal(after_one, before)
    np.testing.assert_array_equal(after_two, before)
