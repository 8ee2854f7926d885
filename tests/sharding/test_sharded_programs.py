"""Sharded programs (`ipu.scopes.ipu_shard`, `ipu.sharding`), whole, as the original's tests.

graphcore/tensorflow tensorflow/python/ipu/tests/sharded_and_replicated_test.py and the
sharding helpers of tensorflow/python/ipu/sharding.py: ops (and their gradients) carry
their shard, run on the shard's emulated IPU, and a device of N IPUs runs N / shards
replicas. Results are checked against numpy or the same model in plain TensorFlow.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

v1 = tf.compat.v1


def _increasing(count: int, shape: list[int]) -> tf.data.Dataset:
    """0, 1, ..., count - 1 (each filled to `shape`), repeated (the original's test_utils)."""
    return (
        tf.data.Dataset.range(count).map(lambda i: tf.fill(shape, tf.cast(i, tf.float32))).repeat()
    )


def _configure(ipus: int) -> None:
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = ipus
    config.configure_ipu_system()


@pytest.fixture
def reset_system():
    yield
    ipu.config.reset_ipu_configuration()


def test_sharded_and_replicated_runs_two_replicas_of_two_shards(tf1_graph, reset_system):
    # As the original's testShardedAndReplicated: 4 IPUs, 2 shards -> 2 replicas, whose
    # infeed elements interleave (replica r of iteration i reads element i * 2 + r).
    shape = [2]
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(3, shape))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(v, x):
        with ipu.scopes.ipu_shard(0):
            z = v + x
            y = x * x
        with ipu.scopes.ipu_shard(1):
            z = ipu.cross_replica_ops.cross_replica_sum(
                z
            ) + ipu.cross_replica_ops.cross_replica_sum(y)
            enqueue = outfeed.enqueue(z)
        return z, enqueue

    def my_net():
        return ipu.loops.repeat(2, body, [tf.zeros(shape)], infeed)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = ipu.ipu_compiler.compile(my_net, inputs=[])
    outfed = outfeed.dequeue()
    _configure(4)
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        np.testing.assert_allclose(sess.run(result)[0], np.full(shape, 10.0))
        values = sess.run(outfed)
    assert values.shape == (2, 2, 2)  # [iterations, replicas, *shape]
    np.testing.assert_allclose(values[0], np.full((2, 2), 2.0))
    np.testing.assert_allclose(values[1], np.full((2, 2), 10.0))


def _two_layer_graph(x, labels, sharded: bool):
    """Dense -> dense -> softmax cross-entropy, optionally over two shards."""

    def layer(name, inputs, units, shard):
        scope = ipu.scopes.ipu_shard(shard) if sharded else _nothing()
        with scope, v1.variable_scope(name, use_resource=True):
            w = v1.get_variable(
                "w",
                [inputs.shape[-1], units],
                initializer=v1.constant_initializer(
                    np.linspace(-0.5, 0.5, inputs.shape[-1] * units)
                ),
            )
            return tf.matmul(inputs, w)

    hidden = tf.nn.relu(layer("a", x, 6, 0))
    logits = layer("b", hidden, 3, 1)
    scope = ipu.scopes.ipu_shard(1) if sharded else _nothing()
    with scope:
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    return loss


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=[8, 4]).astype(np.float32)
    labels = np.eye(3, dtype=np.float32)[rng.integers(0, 3, size=8)]
    return x, labels


def test_sharded_training_matches_plain_tensorflow_and_gradients_follow_their_shard(
    tf1_graph, reset_system
):
    _configure(2)
    x_value, label_value = _data()
    x = v1.placeholder(tf.float32, [8, 4])
    labels = v1.placeholder(tf.float32, [8, 3])

    def step(x, labels):
        loss = _two_layer_graph(x, labels, sharded=True)
        train = v1.train.GradientDescentOptimizer(0.5).minimize(loss)
        return loss, train

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        (loss,) = ipu.ipu_compiler.compile(step, inputs=[x, labels])

    # Every op built in a shard scope carries it, and so does its gradient.
    graph = tf1_graph
    matmuls = [op for op in graph.get_operations() if op.type == "MatMul"]
    shards = {op.name: ipu.sharding.get_sharding(op) for op in matmuls}
    forward = {name: s for name, s in shards.items() if "gradients" not in name}
    backward = {name: s for name, s in shards.items() if "gradients" in name}
    assert {tuple(s) for s in forward.values()} == {(0,), (1,)}
    assert backward and all(s is not None for s in backward.values())
    assert {tuple(s) for s in backward.values()} == {(0,), (1,)}, backward
    # On the IPU of their shard.
    a_matmul = next(op for op in matmuls if ipu.sharding.get_sharding(op) == [0])
    b_matmul = next(op for op in matmuls if ipu.sharding.get_sharding(op) == [1])
    assert a_matmul.device != b_matmul.device

    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        losses = [sess.run(loss, {x: x_value, labels: label_value}) for _ in range(3)]

    reference_graph = tf.Graph()
    with reference_graph.as_default():
        rx = v1.placeholder(tf.float32, [8, 4])
        rl = v1.placeholder(tf.float32, [8, 3])
        ref_loss = _two_layer_graph(rx, rl, sharded=False)
        ref_train = v1.train.GradientDescentOptimizer(0.5).minimize(ref_loss)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            expected = []
            for _ in range(3):
                value, _ = sess.run([ref_loss, ref_train], {rx: x_value, rl: label_value})
                expected.append(value)
    np.testing.assert_allclose(losses, expected, rtol=1e-5)


def test_sharding_helpers(tf1_graph):
    a = tf.constant(1.0, name="a")
    with ipu.scopes.ipu_shard(1):
        b = tf.add(a, 2.0, name="b")
    c = tf.multiply(b, 3.0, name="c")
    assert ipu.sharding.get_sharding(a.op) is None
    assert ipu.sharding.get_sharding(b.op) == [1]
    assert ipu.sharding.has_attr(b.op, "_XlaSharding")
    assert not ipu.sharding.has_attr(c.op, "_XlaSharding")
    assert ipu.sharding.dependencies([c]) >= {a.op, b.op, c.op}
    assert b.op in ipu.sharding.dependencies([c.op])
    # An op co-located with a sharded op (as a backward op is) takes its sharding.
    with tf.compat.v1.colocate_with(b.op):
        d = tf.identity(b, name="d")
    assert ipu.sharding.get_sharding(d.op) is None
    assert ipu.sharding.get_shard_from_colocation(d.op) == b.op.get_attr("_XlaSharding")
    ipu.sharding.propagate_sharding(tf1_graph)
    assert ipu.sharding.get_sharding(d.op) == [1]
    assert ipu.sharding.get_sharding(c.op) is None  # not co-located: unchanged


def test_sharded_gradient_tape_puts_backward_ops_on_the_forward_shard():
    ipu.sharding.enable_sharded_gradient_tape()

    @tf.function
    def grads(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            with ipu.scopes.ipu_shard(1):
                y = tf.sin(x)
        return tape.gradient(y, x)

    graph = grads.get_concrete_function(tf.TensorSpec([3], tf.float32)).graph
    cos_ops = [op for op in graph.get_operations() if op.type == "Cos"]
    assert cos_ops and all(ipu.sharding.get_sharding(op) == [1] for op in cos_ops)
    np.testing.assert_allclose(grads(tf.constant([0.0, 1.0, 2.0])), np.cos([0.0, 1.0, 2.0]))


def test_shard_index_is_checked(tf1_graph):
    with pytest.raises(ValueError, match="int >= 0"):
        with ipu.scopes.ipu_shard(-1):
            pass


def test_shards_that_do_not_divide_the_ipus_fail_as_the_original_compiler(reset_system):
    # poplar_compiler.cc: a replica takes the shards' IPUs rounded up to a power of two
    # (NumIPUsInShards: 3 shards take 4), and a device whose IPU count that does not
    # divide fails the compilation with an InternalError.
    _configure(2)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with pytest.raises(tf.errors.InternalError, match="with 2 IPUs and 4 shards"):
        strategy.run(tf.function(_three_shards, jit_compile=True), args=(tf.ones([2]),))


def test_three_shards_run_on_four_ipus_as_one_replica_of_four(reset_system):
    _configure(4)
    strategy = ipu.ipu_strategy.IPUStrategy()
    result = strategy.run(tf.function(_three_shards, jit_compile=True), args=(tf.ones([2]),))
    np.testing.assert_allclose(result.numpy(), [3.0, 3.0])


def _three_shards(x):
    with ipu.scopes.ipu_shard(0):
        a = x * 2.0
    with ipu.scopes.ipu_shard(2):
        return a + 1.0
