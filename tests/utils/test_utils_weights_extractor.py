"""`ipu.utils.export_variables_from_live_*` / `import_data_in_live_*`: round trips of variables."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

X = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)


def _tf1_graph(seed):
    """A TF1 graph of two dense layers with random initial weights; returns (graph, x, out)."""
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(seed)
        x = tf.compat.v1.placeholder(tf.float32, [None, 4])
        with tf.compat.v1.variable_scope("net"):
            w1 = tf.compat.v1.get_variable("w1", [4, 5])
            b1 = tf.compat.v1.get_variable(
                "b1", [5], initializer=tf.compat.v1.random_normal_initializer()
            )
            w2 = tf.compat.v1.get_variable("w2", [5, 2])
        out = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2)
        init = tf.compat.v1.global_variables_initializer()
    return graph, x, out, init


def test_tf1_session_round_trip(tmp_path):
    weights = str(tmp_path / "weights" / "weights.bin")
    graph, x, out, init = _tf1_graph(seed=1)
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(init)
        expected = session.run(out, {x: X})
        with graph.as_default():
            variables = session.run(tf.compat.v1.global_variables())
        ipu.utils.export_variables_from_live_session(session, weights)

    graph, x, out, init = _tf1_graph(seed=2)
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(init)
        assert not np.allclose(session.run(out, {x: X}), expected)
        ipu.utils.import_data_in_live_session(session, [weights], str(tmp_path / "ckpt" / "model"))
        np.testing.assert_array_equal(session.run(out, {x: X}), expected)
        with graph.as_default():
            for before, after in zip(
                variables, session.run(tf.compat.v1.global_variables()), strict=True
            ):
                np.testing.assert_array_equal(before, after)
    # The saved checkpoint holds the imported values.
    reader = tf.train.load_checkpoint(str(tmp_path / "ckpt" / "model"))
    np.testing.assert_array_equal(reader.get_tensor("net/w2"), variables[2])


def _keras_model(seed):
    tf.keras.utils.set_random_seed(seed)
    return tf.keras.Sequential(
        [
            tf.keras.Input([4]),
            tf.keras.layers.Dense(5, activation="relu", name="hidden"),
            tf.keras.layers.Dense(2, name="logits"),
        ]
    )


def test_keras_model_round_trip_in_an_ipu_strategy(tmp_path):
    weights = str(tmp_path / "model.bin")
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        source = _keras_model(1)
        expected = source.predict(X, batch_size=3)
        ipu.utils.export_variables_from_live_model(source, weights)
        target = _keras_model(2)
        assert not np.allclose(target.predict(X, batch_size=3), expected)
        ipu.utils.import_data_in_live_model(target, [weights])
        np.testing.assert_allclose(target.predict(X, batch_size=3), expected, rtol=1e-6)


def test_session_export_imports_into_a_graph_mode_keras_model(tmp_path):
    weights = str(tmp_path / "weights.bin")
    graph = tf.Graph()
    with graph.as_default():
        session = tf.compat.v1.Session(graph=graph)
        tf.compat.v1.keras.backend.set_session(session)
        model = _keras_model(3)
        session.run(tf.compat.v1.global_variables_initializer())
        expected = model.predict(X)
        ipu.utils.export_variables_from_live_session(session, weights)
        for variable in model.variables:
            variable.load(np.zeros(variable.shape, np.float32), session)
        assert not np.allclose(model.predict(X), expected)
        ipu.utils.import_data_in_live_model(model, weights)
        np.testing.assert_array_equal(model.predict(X), expected)
        session.close()


def test_a_value_of_another_shape_is_refused(tmp_path):
    weights = str(tmp_path / "w.bin")
    graph = tf.Graph()
    with graph.as_default(), tf.compat.v1.Session() as session:
        tf.compat.v1.get_variable("v", initializer=np.ones([2, 3], np.float32))
        session.run(tf.compat.v1.global_variables_initializer())
        ipu.utils.export_variables_from_live_session(session, weights)
    graph = tf.Graph()
    with graph.as_default(), tf.compat.v1.Session() as session:
        tf.compat.v1.get_variable("v", initializer=np.ones([3, 2], np.float32))
        session.run(tf.compat.v1.global_variables_initializer())
        with pytest.raises(
            tf.errors.InvalidArgumentError, match="For tensor v the tensorflow info"
        ):
            ipu.utils.import_data_in_live_session(session, [weights])
        not_weights = tmp_path / "other.bin"
        not_weights.write_bytes(b"not a weights file")
        with pytest.raises(tf.errors.InvalidArgumentError, match="other.bin"):
            ipu.utils.import_data_in_live_session(session, [str(not_weights)])
