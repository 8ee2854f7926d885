"""The generated host-embedding operations (`gen_pop_datastream_ops`) in TF1 programs:
SGD updates reach the table at once, SGD+GA updates only with the notification."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.compiler.plugin.poplar.ops import gen_pop_datastream_ops as datastream
from tensorflow.python import ipu

v1 = tf.compat.v1
SHAPE = [6, 3]


def _table_after(tf1_graph, optimizer, notify, embedding_id="e"):
    def program(i):
        rows = datastream.ipu_device_embedding_lookup(
            i, embedding_id=embedding_id, embedding_shape=SHAPE, dtype=np.float32
        )
        update = datastream.ipu_device_embedding_update_add(
            rows, tf.ones_like(rows), i, embedding_id=embedding_id, embedding_shape=SHAPE
        )
        if notify:
            with tf.control_dependencies([update]):
                datastream.ipu_device_embedding_notify(embedding_id=embedding_id)
        return rows

    with tf.device("cpu"):
        i = v1.placeholder(np.int32, [2])
        table = v1.get_variable(
            "table", initializer=np.arange(18, dtype=np.float32).reshape(SHAPE), use_resource=False
        )
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        compiled = ipu.ipu_compiler.compile(program, inputs=[i])
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    try:
        with v1.Session(graph=tf1_graph) as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(
                datastream.ipu_host_embedding_register(table, embedding_id, optimizer=optimizer)
            )
            (rows,) = sess.run(compiled, {i: [1, 4]})
            final = sess.run(datastream.ipu_host_embedding_deregister(table, embedding_id))
            written_back = sess.run(table)
    finally:
        ipu.config.reset_ipu_configuration()
    initial = np.arange(18, dtype=np.float32).reshape(SHAPE)
    np.testing.assert_array_equal(rows, initial[[1, 4]])
    np.testing.assert_array_equal(written_back, final)
    return final - initial


@pytest.mark.parametrize(
    "optimizer,notify,updated",
    [("SGD", False, True), ("SGD+GA", False, False), ("SGD+GA", True, True)],
)
def test_updates_reach_the_table(tf1_graph, optimizer, notify, updated):
    added = _table_after(tf1_graph, optimizer, notify)
    expected = np.zeros(SHAPE, np.float32)
    if updated:
        expected[[1, 4]] = 1.0
    np.testing.assert_array_equal(added, expected)


def test_any_string_names_an_embedding(tf1_graph):
    # embedding_id is a string attribute of the original's operations: "" is a name too.
    added = _table_after(tf1_graph, "SGD+GA", True, embedding_id="")
    expected = np.zeros(SHAPE, np.float32)
    expected[[1, 4]] = 1.0
    np.testing.assert_array_equal(added, expected)
    with pytest.raises(TypeError, match="embedding_id must be a str, got 3"):
        datastream.ipu_device_embedding_notify(embedding_id=3)


def test_update_shapes_are_checked(tf1_graph):
    rows = tf.zeros([2, 3])
    with pytest.raises(ValueError, match="Dimension 0 of the indices and updates do not match"):
        datastream.ipu_device_embedding_update_add(
            rows, rows, tf.constant([0, 1, 2]), embedding_id="e", embedding_shape=SHAPE
        )
    with pytest.raises(ValueError, match="partition_strategy must be one of"):
        datastream.ipu_device_embedding_lookup(
            tf.constant([0]), "e", SHAPE, np.float32, partition_strategy="ROWS"
        )
