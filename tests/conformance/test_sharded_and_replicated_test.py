"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/sharded_and_replicated_test.py`.

Programs of 2 shards replicated twice on 4 IPUs (TF1, built before the configuration as
the original's): a loop summing across replicas on the second shard (its outfeed has
one element per replica), and the training of two convolutions (one per shard) with a
cross-replica sharded SGD, plain and with cross-replica gradient accumulation, whose
summed losses are the original's numbers (the original also counts the compilations
through the event trace, a Poplar report, left out). Two programs of different replica
counts on one device: each outfeed keeps its program's replica count, and an infeed
set up by one cannot feed the other (FailedPreconditionError). And gradients take the
sharding of their forward operations (`tf.gradients` and a GradientTape): same,
different, none, precedence over the scope of the gradient call, nesting, second
derivatives, and custom gradient functions (set on the op, or by an override map).
"""

from __future__ import annotations

import unittest.mock

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.framework import ops
from tensorflow.python.ipu import test_utils as tu

v1 = tf.compat.v1
cross_replica_sum = ipu.ops.cross_replica_ops.cross_replica_sum
SHAPE = [2]


def _config():
    config = ipu.config.IPUConfig()
    config.optimizations.maximum_cross_replica_sum_buffer_size = 10000
    config.optimizations.maximum_inter_ipu_copies_buffer_size = 10000
    config.auto_select_ipus = 4
    return config


@pytest.fixture
def four_ipus():
    """Configures 4 IPUs when called (after the test built its program, as the original)."""
    yield lambda: _config().configure_ipu_system()
    ipu.config.reset_ipu_configuration()


def _body_2_shards(outfeed=None):
    def body(v, x):
        with ipu.scopes.ipu_shard(0):
            z = v + x
            y = x * x
        with ipu.scopes.ipu_shard(1):
            z = cross_replica_sum(z) + cross_replica_sum(y)
            if outfeed is not None:
                return z, outfeed.enqueue(z)
        return z

    return body


def _body_not_sharded(outfeed=None):
    def body(v, x):
        v = cross_replica_sum(v + x)
        if outfeed is not None:
            return v, outfeed.enqueue(v)
        return v

    return body


def _compile_loop(body, infeed, iterations=2):
    def my_net():
        v = tf.constant(0.0, shape=SHAPE, dtype=np.float32)
        return ipu.loops.repeat(iterations, body, [v], infeed)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        return ipu.ipu_compiler.compile(my_net, inputs=[])


@pytest.mark.follows("testShardedAndReplicated")
def test_sharded_and_replicated(tf1_graph, four_ipus):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tu.create_single_increasing_dataset(3, SHAPE))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    res = _compile_loop(_body_2_shards(outfeed), infeed)
    outfed = outfeed.dequeue()
    four_ipus()
    with v1.Session(graph=tf1_graph) as sess:
        sess.run(infeed.initializer)
        result = sess.run(res)
        outfed_result = sess.run(outfed)
    # Replicas read 0 and 1, then 2 and 0: z = (0 + 1) + (0 + 1) = 2, then
    # (2 + 2 + 2 + 0) + (4 + 0) = 10.
    np.testing.assert_allclose(result[0], np.broadcast_to(10, SHAPE))
    assert outfed_result.shape == (2, 2, 2)
    for step, value in enumerate([2, 10]):
        np.testing.assert_allclose(outfed_result[step][0], outfed_result[step][1])
        np.testing.assert_allclose(outfed_result[step][0], np.broadcast_to(value, SHAPE))


def _two_conv_training(optimizer, iterations):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tu.create_dual_increasing_dataset(3))

    def my_graph(in_loss, inp, lab):
        with tf.device("/device:IPU:0"):
            with ipu.scopes.ipu_shard(0):
                x = tf.keras.layers.Conv2D(
                    8, 3, padding="same", use_bias=False, kernel_initializer="ones", name="convA"
                )(inp)
            with ipu.scopes.ipu_shard(1):
                x = tf.keras.layers.Conv2D(
                    8, 1, padding="same", use_bias=False, kernel_initializer="ones", name="convA"
                )(x)
                x = tf.reduce_mean(x, axis=[1, 2])
                loss = tf.nn.softmax_cross_entropy_with_logits(
                    logits=x, labels=tf.stop_gradient(lab)
                )
                loss = tf.reduce_mean(loss)
            train = optimizer().minimize(loss)
            return [in_loss + cross_replica_sum(loss), train]

    out = ipu.ipu_compiler.compile(
        lambda: ipu.loops.repeat(iterations, my_graph, [0.0], infeed), []
    )
    return infeed, out


def _train(tf1_graph, four_ipus, infeed, out):
    four_ipus()
    with v1.Session(graph=tf1_graph) as sess:
        sess.run(infeed.initializer)
        sess.run(v1.global_variables_initializer())
        return sess.run(out)


def _sharded_sgd():
    return ipu.optimizers.ShardedOptimizer(v1.train.GradientDescentOptimizer(0.000001))


@pytest.mark.follows("testShardedAndReplicatedTraining")
def test_sharded_and_replicated_training(tf1_graph, four_ipus):
    infeed, out = _two_conv_training(
        lambda: ipu.optimizers.CrossReplicaOptimizer(_sharded_sgd()), iterations=2
    )
    loss = _train(tf1_graph, four_ipus, infeed, out)
    np.testing.assert_allclose(loss, [49.906597], rtol=1e-5)


@pytest.mark.follows("testShardedAndReplicatedAndGradientAccumulateTraining")
def test_sharded_and_replicated_and_gradient_accumulate_training(tf1_graph, four_ipus):
    infeed, out = _two_conv_training(
        lambda: ipu.optimizers.CrossReplicaGradientAccumulationOptimizer(_sharded_sgd(), 10),
        iterations=20,
    )
    loss = _train(tf1_graph, four_ipus, infeed, out)
    np.testing.assert_allclose(loss, [648.78577], rtol=1e-5)


@pytest.mark.follows("testOutfeedShapeWhenMixingReplicationFactors")
def test_outfeed_shape_when_mixing_replication_factors(tf1_graph, four_ipus):
    four_ipus()
    dataset = tu.create_single_increasing_dataset(3, SHAPE)
    with v1.Session(graph=tf1_graph) as sess:
        # 2 shards: 2 replicas on the 4 IPUs.
        infeed_sharded = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        outfeed_sharded = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        result_sharded = _compile_loop(_body_2_shards(outfeed_sharded), infeed_sharded)
        sess.run(infeed_sharded.initializer)
        sess.run(result_sharded)
        # 1 shard: 4 replicas.
        infeed_not_sharded = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        outfeed_not_sharded = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        result_not_sharded = _compile_loop(
            _body_not_sharded(outfeed_not_sharded), infeed_not_sharded
        )
        sess.run(infeed_not_sharded.initializer)
        sess.run(result_not_sharded)
        # Dequeued after both ran: each keeps its program's replica count (axis 1).
        assert sess.run(outfeed_sharded.dequeue()).shape[1] == 2
        assert sess.run(outfeed_not_sharded.dequeue()).shape[1] == 4


@pytest.mark.follows("testCantReuseInfeedWhenMixingReplicationFactors")
def test_cant_reuse_infeed_when_mixing_replication_factors(tf1_graph, four_ipus):
    four_ipus()
    with v1.Session(graph=tf1_graph) as sess:
        shared_infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
            tu.create_single_increasing_dataset(3, SHAPE)
        )
        sess.run(shared_infeed.initializer)
        # Sets the infeed up for 2 replicas.
        sess.run(_compile_loop(_body_2_shards(), shared_infeed))
        result_not_sharded = _compile_loop(_body_not_sharded(), shared_infeed)
        with pytest.raises(tf.errors.FailedPreconditionError):
            sess.run(result_not_sharded)


# Gradients take their forward operation's sharding, with tf.gradients or a GradientTape.


def _weights(shape):
    return v1.get_variable(
        "weights", shape=shape, trainable=True, initializer=v1.constant_initializer(2.5)
    )


def _with_gradients(body):
    def run(input_value):
        return body(input_value, lambda target, sources: tf.gradients(target, sources))

    return run


def _with_tape(body):
    def run(input_value):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(input_value)
            # Called inside the tape's scope, as the original's.
            return body(input_value, tape.gradient)

    return run


GRADIENTS = pytest.mark.parametrize("how", [_with_gradients, _with_tape], ids=["gradients", "tape"])


def _compile_with(how, body, input_shape):
    """Builds `body(input_value, gradients)` in a compiled program; the sharding it found."""
    found = {}

    def checked(input_value, gradients):
        found.update(body(input_value, gradients))

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        placeholder = v1.placeholder(np.float32, input_shape)
        ipu.ipu_compiler.compile(how(checked), [placeholder])
    return found


def _sharding(tensor):
    return ipu.sharding.get_sharding(tensor.op)


@GRADIENTS
@pytest.mark.follows("testSameSharding")
def test_same_sharding(tf1_graph, how):
    def body(input_value, gradients):
        with ipu.scopes.ipu_shard(1):
            weights = _weights([512, 100])
            matmul = tf.matmul(input_value, weights)
            loss = tf.reduce_sum(matmul)
        grads = gradients(loss, [weights, input_value])
        return {"matmul": _sharding(matmul), "grads": [_sharding(g) for g in grads]}

    found = _compile_with(how, body, [16, 512])
    assert found["matmul"] == [1]
    assert found["grads"] == [[1], [1]]


@GRADIENTS
@pytest.mark.follows("testDifferentSharding")
def test_different_sharding(tf1_graph, how):
    def body(input_value, gradients):
        weights = _weights([4])
        with ipu.scopes.ipu_shard(0):
            mul0 = weights * 5
        with ipu.scopes.ipu_shard(1):
            mul1 = input_value * 5
        with ipu.scopes.ipu_shard(3):
            loss = tf.reduce_sum((mul0 + mul1) ** 2)
        grads = gradients(loss, [weights, input_value])
        return {
            "forward": [_sharding(mul0), _sharding(mul1)],
            "grads": [_sharding(g) for g in grads],
        }

    found = _compile_with(how, body, [4])
    assert found["forward"] == [[0], [1]]
    assert found["grads"] == found["forward"]


@GRADIENTS
@pytest.mark.follows("testNoSharding")
def test_no_sharding(tf1_graph, how):
    def body(input_value, gradients):
        matmul = tf.matmul(input_value, _weights([512, 100]))
        with ipu.scopes.ipu_shard(0):
            loss = tf.reduce_sum(matmul)
        (grad,) = gradients(loss, [input_value])
        return {"grad": _sharding(grad)}

    assert _compile_with(how, body, [16, 512])["grad"] is None


@GRADIENTS
@pytest.mark.follows("testPrecedence")
def test_precedence(tf1_graph, how):
    def body(input_value, gradients):
        with ipu.scopes.ipu_shard(0):
            weights = _weights([512, 100])
        with ipu.scopes.ipu_shard(1):
            matmul = tf.matmul(input_value, weights)
            loss = tf.reduce_sum(matmul)
        with ipu.scopes.ipu_shard(2):
            (grad,) = gradients(loss, [input_value])
        return {"matmul": _sharding(matmul), "grad": _sharding(grad)}

    found = _compile_with(how, body, [16, 512])
    assert found["matmul"] == [1]
    assert found["grad"] == [1]


@GRADIENTS
@pytest.mark.follows("testNestedSharding")
def test_nested_sharding(tf1_graph, how):
    def body(input_value, gradients):
        with ipu.scopes.ipu_shard(0):
            weights = _weights([512, 100])
            with ipu.scopes.ipu_shard(1):
                matmul = tf.matmul(input_value, weights)
                loss = tf.reduce_sum(matmul)
        (grad,) = gradients(loss, [input_value])
        return {"matmul": _sharding(matmul), "grad": _sharding(grad)}

    found = _compile_with(how, body, [16, 512])
    assert found["matmul"] == [1]
    assert found["grad"] == [1]


@GRADIENTS
@pytest.mark.follows("testSecondDerivativeSharding")
def test_second_derivative_sharding(tf1_graph, how):
    def body(input_value, gradients):
        with ipu.scopes.ipu_shard(1):
            weights = _weights([512, 100])
            matmul = tf.matmul(input_value, weights)
            loss = tf.reduce_sum(matmul**2)
        (first,) = gradients(loss, [weights])
        (second,) = gradients(first, [matmul])
        return {"matmul": _sharding(matmul), "grads": [_sharding(first), _sharding(second)]}

    found = _compile_with(how, body, [16, 512])
    assert found["matmul"] == [1]
    assert found["grads"] == [[1], [1]]


@pytest.mark.follows("testCustomGradFnUsed")
def test_custom_grad_fn_used(tf1_graph):
    def body(input_value, gradients):
        with ipu.scopes.ipu_shard(1):
            weights = _weights([512, 100])
            matmul = tf.matmul(input_value, weights)
            loss = tf.reduce_sum(matmul)
            mock_grad = unittest.mock.Mock(wraps=ops.get_gradient_function(matmul.op))
            matmul.op._gradient_function = mock_grad  # noqa: SLF001 - as the original (TF2 API)
        gradients(loss, [weights])
        return {"called": mock_grad.called, "matmul": _sharding(matmul)}

    found = _compile_with(_with_gradients, body, [16, 512])
    assert found["called"]
    assert found["matmul"] == [1]


@pytest.mark.follows("testCustomGradOverrideUsed")
def test_custom_grad_override_used(tf1_graph):
    registry = ops._gradient_registry  # noqa: SLF001 - as the original
    mock_grad = unittest.mock.Mock(wraps=registry.lookup("MatMul"))
    if "MockGrad" not in registry.list():
        registry.register(mock_grad, "MockGrad")
    else:  # registered by an earlier run in this process: point it at this test's mock
        registry._registry["MockGrad"]["type"] = mock_grad  # noqa: SLF001

    def body(input_value, gradients):
        with ops.get_default_graph().gradient_override_map({"MatMul": "MockGrad"}):
            with ipu.scopes.ipu_shard(1):
                weights = _weights([512, 100])
                matmul = tf.matmul(input_value, weights)
                loss = tf.reduce_sum(matmul)
        gradients(loss, [weights])
        return {"matmul": _sharding(matmul)}

    found = _compile_with(_with_gradients, body, [16, 512])
    assert mock_grad.called
    assert found["matmul"] == [1]
