"""Host embeddings (ipu.embedding_ops.HostEmbedding) against numpy tables updated by hand.

Programs are written as for the original (tensorflow/python/ipu/tests/
host_embedding_lookup_test.py and host_embedding_lookup_ga_test.py): a TF1
graph, the lookups inside `ipu_compiler.compile` (in a device loop over an
infeed), the session running inside `with embedding.register(session):`.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu import embedding_ops

TOKENS, ENCODING = 7, 3
TABLE = np.random.RandomState(0).uniform(-1, 1, [TOKENS, ENCODING]).astype(np.float32)
# Two lookups of 2 x 2 indices per step, with repeats within and across steps.
INDICES = np.array(
    [[[1, 3], [3, 6]], [[0, 1], [1, 1]], [[6, 2], [5, 3]], [[4, 4], [0, 2]]], np.int32
)


def configure(remote_buffers: bool = False) -> None:
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.experimental.enable_remote_buffer_embedding = remote_buffers
    config.configure_ipu_system()


def training_program(embedding, optimizer, steps: int):
    """`steps` steps of loss = sum(rows^2 * weights) in a device loop; returns the summed loss."""
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(INDICES))
    weights = np.arange(1, ENCODING + 1, dtype=np.float32)

    def step(total, indices):
        rows = embedding.lookup(indices)
        loss = tf.reduce_sum(tf.square(rows) * weights)
        train = optimizer.minimize(loss)
        with tf.control_dependencies([train]):
            return total + loss

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = ipu.ipu_compiler.compile(lambda: ipu.loops.repeat(steps, step, [0.0], infeed), [])
    return infeed, result, weights


def numpy_training(learning_rate: float, steps: int, accumulation: int = 1):
    """The table and summed loss after `steps` SGD steps whose updates land every `accumulation`."""
    table, pending, total = TABLE.astype(np.float64), 0.0, 0.0
    weights = np.arange(1, ENCODING + 1)
    for step in range(steps):
        rows = table[INDICES[step]]
        total += np.sum(rows**2 * weights)
        update = np.zeros_like(table)
        np.add.at(update, INDICES[step], -learning_rate * 2 * rows * weights)
        pending = pending + update
        if (step + 1) % accumulation == 0:
            table, pending = table + pending, 0.0
    return table, total


def run_training(tf1_graph, embedding, optimizer, steps):
    infeed, result, _ = training_program(embedding, optimizer, steps)
    with tf.compat.v1.Session(graph=tf1_graph) as session:
        session.run(infeed.initializer)
        session.run(tf.compat.v1.global_variables_initializer())
        with embedding.register(session):
            (total,) = session.run(result)
        return session.run(embedding.get_embedding_tensor()), total


@pytest.mark.parametrize("partition_strategy", ["TOKEN", "ENCODING"])
@pytest.mark.parametrize("remote_buffers", [False, True])
def test_sgd_updates_equal_numpy(tf1_graph, partition_strategy, remote_buffers):
    configure(remote_buffers)
    embedding = embedding_ops.create_host_embedding(
        "embedding",
        [TOKENS, ENCODING],
        np.float32,
        partition_strategy=partition_strategy,
        optimizer_spec=embedding_ops.HostEmbeddingOptimizerSpec(0.1),
        initializer=TABLE,
    )
    # The device optimizer has nothing of the table to train: the host updates it.
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(123.0)
    table, total = run_training(tf1_graph, embedding, optimizer, steps=4)
    expected_table, expected_total = numpy_training(0.1, steps=4)
    np.testing.assert_allclose(table, expected_table, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(total, expected_total, rtol=1e-5)
    assert embedding.partition_strategy == partition_strategy


def test_sgd_with_gradient_accumulation_equals_numpy(tf1_graph):
    """Updates of two mini-batches land together, as with GradientAccumulationOptimizerV2."""
    configure()
    embedding = embedding_ops.create_host_embedding(
        "embedding",
        [TOKENS, ENCODING],
        np.float32,
        optimizer_spec=embedding_ops.HostEmbeddingSGDGAOptimizerSpec(0.1, 2),
        initializer=TABLE,
    )
    optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(
        tf.compat.v1.train.GradientDescentOptimizer(0.1), 2
    )
    table, total = run_training(tf1_graph, embedding, optimizer, steps=4)
    expected_table, expected_total = numpy_training(0.1, steps=4, accumulation=2)
    np.testing.assert_allclose(table, expected_table, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(total, expected_total, rtol=1e-5)
    # Accumulating differs from plain SGD on these indices.
    assert not np.allclose(expected_table, numpy_training(0.1, steps=4)[0])


def test_lookups_of_a_constant_embedding_leave_the_table_and_train_the_rest(tf1_graph):
    """As the original's testNoTrain: no optimizer spec (or rate 0) keeps the table as it is."""
    configure()
    embedding = embedding_ops.create_host_embedding(
        "embedding", [TOKENS, ENCODING], np.float32, initializer=tf.compat.v1.ones_initializer()
    )
    indices = tf.compat.v1.placeholder(tf.int32, [2])

    def program(indices):
        rows = embedding.lookup(indices)
        weight = tf.compat.v1.get_variable(
            "w", [ENCODING, 1], initializer=tf.compat.v1.zeros_initializer()
        )
        loss = tf.reduce_mean(tf.square(tf.matmul(rows, weight) - 1.0))
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        with tf.control_dependencies([train]):
            return tf.identity(loss), rows

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = ipu.ipu_compiler.compile(program, [indices])
    with tf.compat.v1.Session(graph=tf1_graph) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        with embedding.register(session):
            first_loss, rows = session.run(result, {indices: [1, 2]})
            second_loss, _ = session.run(result, {indices: [1, 2]})
        table = session.run(embedding.get_embedding_tensor())
    assert first_loss == 1.0 and second_loss < 1.0
    np.testing.assert_array_equal(rows, np.ones([2, ENCODING]))
    np.testing.assert_array_equal(table, np.ones([TOKENS, ENCODING]))


@pytest.mark.parametrize("clip", [True, False])
def test_lookup_of_a_user_variable_and_index_clipping(tf1_graph, clip):
    configure()
    with tf.device("cpu"):
        table = tf.compat.v1.get_variable("table", initializer=TABLE)
    embedding = embedding_ops.HostEmbedding("table", table)
    indices = np.array([[0, 6], [-3, 9]], np.int32) if clip else np.array([[0, 6], [2, 5]])

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = ipu.ipu_compiler.compile(
            lambda i: embedding.lookup(i, clip_indices=clip), [tf.constant(indices)]
        )
    with tf.compat.v1.Session(graph=tf1_graph) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        with embedding.register(session):
            (rows,) = session.run(result)
    assert rows.shape == (2, 2, ENCODING)
    np.testing.assert_array_equal(rows, TABLE[np.clip(indices, 0, TOKENS - 1)])
    assert embedding.get_embedding_tensor() is table


def test_lookup_outside_the_registration_is_an_error(tf1_graph):
    configure()
    embedding = embedding_ops.create_host_embedding(
        "embedding", [TOKENS, ENCODING], np.float32, initializer=TABLE
    )
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = ipu.ipu_compiler.compile(embedding.lookup, [tf.constant([1, 2])])
    with tf.compat.v1.Session(graph=tf1_graph) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        with pytest.raises(
            tf.errors.InvalidArgumentError, match="HostEmbedding embedding is not registered"
        ):
            session.run(result)
        with embedding.register(session):
            (rows,) = session.run(result)
        np.testing.assert_array_equal(rows, TABLE[[1, 2]])
        with pytest.raises(tf.errors.InvalidArgumentError, match="is not registered"):
            session.run(result)


def test_register_needs_a_session_in_graph_mode_and_call_is_the_old_form(tf1_graph):
    embedding = embedding_ops.create_host_embedding("embedding", [TOKENS, ENCODING], np.float32)
    with pytest.raises(ValueError, match="requires a session"):
        embedding.register()
    with pytest.raises(NotImplementedError, match="use the context manager"):
        embedding()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"embedding_tensor": np.zeros([2, 2])}, "not a tensorflow tensor"),
        ({"optimizer_spec": 0.1}, "not a HostEmbeddingOptimizerSpec or None"),
        ({"partition_strategy": "ROWS"}, "Unknown partition strategy ROWS"),
    ],
)
def test_bad_host_embedding_arguments(tf1_graph, kwargs, match):
    arguments = {"name": "e", "embedding_tensor": tf.zeros([2, 2]), **kwargs}
    with pytest.raises(ValueError, match=match):
        embedding_ops.HostEmbedding(**arguments)


def test_optimizer_specs():
    sgd = embedding_ops.HostEmbeddingOptimizerSpec(0.5)
    assert sgd.get_learning_rate() == 0.5 and sgd.create_slot_variables(None, "e") == []
    accumulating = embedding_ops.HostEmbeddingSGDGAOptimizerSpec(0.25, 4)
    assert accumulating.get_learning_rate() == 0.25
    assert accumulating.get_accumulation_factor() == 4
    assert accumulating._optimizer_name == "SGD+GA"
    # A factor of one accumulates nothing: plain SGD, as in the original.
    assert embedding_ops.HostEmbeddingSGDGAOptimizerSpec(0.25, 1)._optimizer_name == "SGD"


def test_replicas_share_the_host_table(tf1_graph):
    """Two replicas (a 2-IPU device): step i of replica r looks up INDICES[2 i + r], and both
    replicas' updates of a step land in the one host table, after both looked up."""
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 2
    config.configure_ipu_system()
    embedding = embedding_ops.create_host_embedding(
        "embedding",
        [TOKENS, ENCODING],
        np.float32,
        optimizer_spec=embedding_ops.HostEmbeddingOptimizerSpec(0.1),
        initializer=TABLE,
    )
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(123.0)
    table, total = run_training(tf1_graph, embedding, optimizer, steps=2)
    expected, weights, expected_total = TABLE.astype(np.float64), np.arange(1, ENCODING + 1), 0.0
    for step in range(2):
        update = np.zeros_like(expected)
        for replica in range(2):
            rows = expected[INDICES[2 * step + replica]]
            if replica == 0:  # the program returns replica 0's loss
                expected_total += np.sum(rows**2 * weights)
            np.add.at(update, INDICES[2 * step + replica], -0.1 * 2 * rows * weights)
        expected = expected + update
    np.testing.assert_allclose(table, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(total, expected_total, rtol=1e-5)


def test_lookups_in_a_tf2_program_registered_eagerly():
    # The original's register() takes no session when executing eagerly (embedding_ops.py);
    # its table is a TF1 RefVariable, so its host embeddings train in TF1 graphs only.
    configure()
    try:
        embedding = embedding_ops.create_host_embedding(
            "embedding", [TOKENS, ENCODING], np.float32, initializer=TABLE
        )
        strategy = ipu.ipu_strategy.IPUStrategy()
        with strategy.scope():

            @tf.function(jit_compile=True)
            def lookup(indices):
                return embedding.lookup(indices)

            with embedding.register():
                rows = strategy.run(lookup, args=(INDICES[0],))
        np.testing.assert_array_equal(rows.numpy(), TABLE[INDICES[0]])
    finally:
        ipu.config.reset_ipu_configuration()
