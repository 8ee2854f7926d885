"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/embedding_lookup_test.py`.

`ipu.ops.embedding_ops.embedding_lookup` compiled for the IPU: gathers of any rank of ids
(against `np.take`), lookups of resource variables trained by gradient descent, a
serialised lookup and its refused factor, and a scatter of a large constant. The raw
operations of the original's generated op module (`gen_popops_ops.ipu_multi_update_add`,
`ipu_multi_slice`): a scaled update-add of gradient rows into zeros, and both operations on
a table that another operation (a matmul) produced (against numpy). One scenario, left out,
reads Poplar's memory report.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.compiler.plugin.poplar.ops import gen_popops_ops
from tensorflow.python import ipu

v1 = tf.compat.v1

_IDS_3D = [
    [[10, 11], [12, 13], [14, 15], [16, 17]],
    [[20, 21], [22, 23], [24, 25], [26, 27]],
    [[30, 31], [32, 33], [34, 35], [36, 37]],
]


@pytest.fixture
def configure(tf1_graph):
    def configure_system(**ipu_model):
        config = ipu.config.IPUConfig()
        for name, value in ipu_model.items():
            setattr(config.ipu_model, name, value)
        config.configure_ipu_system()

    yield configure_system
    ipu.config.reset_ipu_configuration()


def _random_table(name="x", shape=(100, 16)):
    with v1.variable_scope("vs", use_resource=True):
        return v1.get_variable(
            name,
            shape=list(shape),
            dtype=np.float32,
            initializer=v1.random_normal_initializer(stddev=0.1),
        )


@pytest.mark.follows("testGather")
def test_gather(configure):
    def my_net(w, i):
        out = ipu.ops.embedding_ops.embedding_lookup(w, i)
        assert out.shape == (8, 200)
        return [out]

    with tf.device("cpu"):
        i = v1.placeholder(np.int32, [8])
        w = v1.placeholder(np.float32, [12000, 200])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        r = ipu.ipu_compiler.compile(my_net, inputs=[w, i])
    configure(tiles_per_ipu=1472)
    i_h = np.arange(0, 8)
    w_h = np.arange(2400000).reshape([12000, 200])
    with v1.Session() as sess:
        result = sess.run(r, {i: i_h, w: w_h})
    np.testing.assert_array_equal(result[0], np.take(w_h, i_h, axis=0))


def _lookup_and_check(configure, ids_shape, ids_value, train):
    """Looks `ids` up in a variable table (training it with the result as the loss, if
    `train`); the rows come back as the table's rows at those ids."""
    with tf.device("cpu"):
        x1 = v1.placeholder(np.int32, shape=ids_shape)
        lr = v1.placeholder(np.float32, shape=[])

    def network(x1, lr):
        x = _random_table()
        out = ipu.ops.embedding_ops.embedding_lookup(x, x1)
        assert out.shape == (*ids_shape, 16)
        if not train:
            return out, x, x1
        return out, x, x1, v1.train.GradientDescentOptimizer(lr).minimize(out)

    with tf.device("/device:IPU:0"):
        r = ipu.ipu_compiler.compile(network, inputs=[x1, lr])
    configure()
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        (before,) = sess.run(v1.global_variables())
        out, table, ids = sess.run(r, {x1: ids_value, lr: 0.1})[:3]
        (after,) = sess.run(v1.global_variables())
    assert out.shape == (*ids_shape, 16)
    np.testing.assert_array_equal(out, np.take(table, np.asarray(ids_value), axis=0))
    # d sum(rows) / d row is 1 for each time the row is looked up.
    counts = np.bincount(np.ravel(ids_value), minlength=100)[:, None] if train else 0
    np.testing.assert_allclose(after, before - 0.1 * counts, rtol=1e-5, atol=1e-6)


@pytest.mark.follows("testAutoFlatten")
def test_auto_flatten(configure):
    _lookup_and_check(configure, [3, 4, 2], _IDS_3D, train=False)


@pytest.mark.follows("testWithResourceVariable")
def test_with_resource_variable(configure):
    _lookup_and_check(configure, [10], [4, 8, 15, 16, 23, 42, 8, 4, 15, 16], train=True)


@pytest.mark.follows("testWithResourceVariableAutoFlatten")
def test_with_resource_variable_auto_flatten(configure):
    _lookup_and_check(configure, [3, 4, 2], _IDS_3D, train=True)


@pytest.mark.follows("test4D")
def test_4d(configure):
    def my_net(w, i):
        out = ipu.ops.embedding_ops.embedding_lookup(w, i)
        assert out.shape == (8, 2, 200, 4)
        return [out]

    with tf.device("cpu"):
        i = v1.placeholder(np.int32, [8, 2])
        w = v1.placeholder(np.float32, [32, 200, 4])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        r = ipu.ipu_compiler.compile(my_net, inputs=[w, i])
    configure()
    i_h = np.arange(0, 16).reshape([8, 2])
    w_h = np.arange(25600).reshape([32, 200, 4])
    with v1.Session() as sess:
        result = sess.run(r, {i: i_h, w: w_h})
    np.testing.assert_array_equal(result[0], np.take(w_h, i_h, axis=0))


@pytest.mark.follows("testEmbeddingUpdateWithMatMul")
def test_embedding_update_with_matmul(configure):
    def my_net(i):
        w = v1.get_variable(
            "w",
            shape=[1000, 200],
            dtype=np.float32,
            initializer=v1.random_normal_initializer(stddev=0.1),
        )
        out = tf.matmul(w, ipu.ops.embedding_ops.embedding_lookup(w, i), transpose_b=True)
        return v1.train.GradientDescentOptimizer(1e-3).minimize(out)

    with tf.device("cpu"):
        i = v1.placeholder(np.int32, [8])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        r = ipu.ipu_compiler.compile(my_net, inputs=[i])
    configure()
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        before = sess.run(v1.global_variables()[0])
        sess.run(r, {i: np.arange(0, 8)})
        after = sess.run(v1.global_variables()[0])
    # The original only checks that the program builds and runs; the weights also moved.
    assert not np.allclose(before, after)


def _serialized_body(factor):
    def body(table, indices):
        return ipu.ops.embedding_ops.embedding_lookup(table, indices, serialization_factor=factor)

    return body


@pytest.mark.follows("testSerializedEmbeddingLookup")
def test_serialized_embedding_lookup(configure):
    with tf.device("cpu"):
        table = v1.placeholder(np.float16, [2000, 4, 4, 8])
        indices = v1.placeholder(np.int32, [4, 4, 8])
    configure()
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        res = ipu.ipu_compiler.compile(_serialized_body(4), inputs=[table, indices])
    table_h = np.arange(128, dtype=np.float16).reshape([4, 4, 8]) * np.ones(
        [2000, 4, 4, 8], dtype=np.float16
    )
    indices_h = np.random.default_rng(0).integers(0, 2000, [4, 4, 8])
    with v1.Session() as sess:
        result = sess.run(res, {table: table_h, indices: indices_h})
    np.testing.assert_array_equal(result[0], np.take(table_h, indices_h, axis=0))


@pytest.mark.follows("testSerializedEmbeddingLookupDoesntDivide")
def test_serialized_embedding_lookup_doesnt_divide(tf1_graph):
    with tf.device("cpu"):
        table = v1.placeholder(np.float16, [2000, 4, 4, 8])
        indices = v1.placeholder(np.int32, [4, 4, 8])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        with pytest.raises(
            ValueError,
            match=r"The serialization_factor \(7\) must divide the size of the 0th "
            r"dimension of params \(2000\).",
        ):
            ipu.ipu_compiler.compile(_serialized_body(7), inputs=[table, indices])


@pytest.mark.follows("testGradient")
def test_gradient(configure):
    with tf.device("cpu"):
        x1 = v1.placeholder(np.int32, shape=[24])
        grads = v1.placeholder(np.float32, shape=[24, 16])
        lr = v1.placeholder(np.float32, shape=[])

    def network(x1, grads, lr):
        x = _random_table()
        out = gen_popops_ops.ipu_multi_update_add(
            tf.zeros_like(x), updates=grads, indices=x1, scale=lr
        )
        assert out.shape == x.shape
        return out, x1, grads

    with tf.device("/device:IPU:0"):
        r = ipu.ipu_compiler.compile(network, inputs=[x1, grads, lr])
    configure()
    ids = [10, 11, 12, 13, 14, 15, 16, 17, 20, 21, 22, 23, 24, 25, 26, 27]
    ids += [30, 31, 32, 33, 34, 35, 36, 37]
    grads_value = np.random.default_rng(0).random((24, 16), dtype=np.float32)
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        out, indices, gradient = sess.run(r, {x1: ids, grads: grads_value, lr: 0.1})
    np.testing.assert_array_equal(indices, ids)
    np.testing.assert_array_equal(gradient, grads_value)
    # Each looked-up row holds its gradient times the scale; every other row stays zero.
    expected = np.zeros((100, 16), np.float32)
    np.add.at(expected, ids, 0.1 * grads_value)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert not out[np.setdiff1d(np.arange(100), ids)].any()


def _matmul_of_ones(x):
    """A table (8 x 4) produced by another operation: ones (8 x 4) @ x (4 x 4)."""
    with v1.variable_scope("vs", use_resource=True):
        lhs = v1.get_variable(
            "lhs", shape=[8, 4], dtype=np.float32, initializer=v1.ones_initializer()
        )
    return tf.matmul(lhs, x)


@pytest.mark.follows("testOutputWhenInputAllocatedForAnotherOp")
def test_output_when_input_allocated_for_another_op(configure):
    with tf.device("cpu"):
        x = v1.placeholder(np.float32, shape=[4, 4])
        indices = v1.placeholder(np.int32, shape=[8])

    def model(x, indices):
        x = _matmul_of_ones(x)
        # The slice's result is unused: the table must keep the matmul's values.
        gen_popops_ops.ipu_multi_slice(x, indices)
        return x

    with tf.device("/device:IPU:0"):
        (result,) = ipu.ipu_compiler.compile(model, inputs=[x, indices])
    configure()
    x_value = np.array([[0, 1, 2, 3], [2, 3, 4, 5], [4, 5, 6, 7], [6, 7, 8, 9]], np.float32)
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        out = sess.run(result, {x: x_value, indices: list(range(8))})
    np.testing.assert_allclose(out, [[12, 16, 20, 24]] * 8)
    np.testing.assert_allclose(out, np.ones((8, 4)) @ x_value)


@pytest.mark.follows("testGradientOutputWhenInputAllocatedForAnotherOp")
def test_gradient_output_when_input_allocated_for_another_op(configure):
    with tf.device("cpu"):
        x = v1.placeholder(np.float32, shape=[4, 4])
        updates = v1.placeholder(np.float32, shape=[8, 4])
        indices = v1.placeholder(np.int32, shape=[8])

    def model(x, updates, indices):
        return gen_popops_ops.ipu_multi_update_add(
            _matmul_of_ones(x), updates=updates, indices=indices, scale=5
        )

    with tf.device("/device:IPU:0"):
        (result,) = ipu.ipu_compiler.compile(model, inputs=[x, updates, indices])
    configure()
    updates_value = np.random.default_rng(1).random((8, 4), dtype=np.float32)
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        out = sess.run(
            result,
            {x: np.zeros((4, 4)), indices: list(reversed(range(8))), updates: updates_value},
        )
    np.testing.assert_allclose(out, np.flip(updates_value, axis=0) * 5, rtol=1e-6)


@pytest.mark.follows("testSimplifyScatter")
def test_simplify_scatter(configure):
    with tf.device("cpu"):
        indices = v1.placeholder(np.int32, [4, 1], name="indices")
        updates = v1.placeholder(np.int32, [4], name="updates")

    def model(indices, updates):
        return tf.tensor_scatter_nd_update(tf.ones([21128], np.int32), indices, updates)

    with tf.device("/device:IPU:0"):
        (result,) = ipu.ipu_compiler.compile(model, inputs=[indices, updates])
    configure()
    indices_vals = [[1], [2], [3], [4]]
    updates_vals = [9, 10, 11, 12]
    with v1.Session() as sess:
        out = sess.run(result, {indices: indices_vals, updates: updates_vals})
    expected = np.ones([21128])
    for idx, val in zip(indices_vals, updates_vals, strict=True):
        expected[idx[0]] = val
    np.testing.assert_array_equal(out, expected)
