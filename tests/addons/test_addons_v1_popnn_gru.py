"""v1 PopnnGRU / PopnnDynamicGRU against stock GRUs with the same weights.

`reset_after=False` (the v1 default) is `tf.compat.v1.nn.rnn_cell.GRUCell`'s
convention. GRUCell keeps the gates in a `gates/kernel [F + u, 2u]` ordered
r, z and the candidate in `candidate/kernel [F + u, u]`; Popnn stacks them in
one kernel ordered z, r, candidate. `reset_after=True` has no TF1 cell: the
reference is `tf_keras.layers.GRU(reset_after=True)`, whose bias rows (input,
recurrent) are Popnn's `biases[:, 0]` and `biases[:, 1]`.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from v1_rnn_programs import BATCH, FEATURES, TIME, UNITS, on_ipu, run, uniform, weighted_sum

from ipu_tensorflow_addons.v1 import layers

pytestmark = pytest.mark.filterwarnings("ignore:`tf.nn.rnn_cell.GRUCell` is deprecated")


def popnn_from_gru_cell(gates_kernel, gates_bias, candidate_kernel, candidate_bias):
    r_kernel, z_kernel = np.split(gates_kernel, 2, axis=1)
    r_bias, z_bias = np.split(gates_bias, 2)
    kernel = np.concatenate([z_kernel, r_kernel, candidate_kernel], axis=1)
    return kernel, np.stack([z_bias, r_bias, candidate_bias])


def gru_cell_weights():
    return (
        uniform(1, [FEATURES + UNITS, 2 * UNITS]),
        uniform(2, [2 * UNITS]),
        uniform(3, [FEATURES + UNITS, UNITS]),
        uniform(4, [UNITS]),
    )


def data():
    return uniform(5, [TIME, BATCH, FEATURES], scale=1.0), uniform(6, [BATCH, UNITS], scale=1.0)


NAMES = ["outputs", "state", "d_x", "d_h0", "d_kernel", "d_biases"]


def popnn_program(cls, kernel, biases, dynamic: bool, time_major: bool = True, **kwargs):
    def program(x, h0, seq_len):
        layer = cls(
            UNITS,
            weights_initializer=tf.compat.v1.constant_initializer(kernel),
            bias_initializer=tf.compat.v1.constant_initializer(biases),
            **kwargs,
        )
        if not dynamic:
            outputs, state = layer(x, initial_state=h0)
        elif time_major:
            outputs, state = layer(x, seq_len, initial_state=h0)
        else:
            outputs, state = layer(
                tf.transpose(x, [1, 0, 2]), seq_len, initial_state=h0, time_major=False
            )
        loss = weighted_sum(outputs, [state])
        return [outputs, state, *tf.gradients(loss, [x, h0, layer.kernel, layer.biases])]

    return program


def placeholders(seq_len):
    x, h0 = data()
    px = tf.compat.v1.placeholder(tf.float32, x.shape)
    ph = tf.compat.v1.placeholder(tf.float32, h0.shape)
    ps = tf.compat.v1.placeholder(tf.int32, [BATCH])
    return px, ph, ps, {px: x, ph: h0, ps: [TIME] * BATCH if seq_len is None else seq_len}


def run_against_gru_cell(tf1_graph, cls, dynamic, seq_len=None, time_major=True):
    weights = gru_cell_weights()
    kernel, biases = popnn_from_gru_cell(*weights)
    px, ph, ps, feeds = placeholders(seq_len)
    popnn = on_ipu(popnn_program(cls, kernel, biases, dynamic, time_major), [px, ph, ps])
    with tf.device("cpu"):
        cell = tf.compat.v1.nn.rnn_cell.GRUCell(UNITS, name="reference")
        outputs, state = tf.compat.v1.nn.dynamic_rnn(
            cell, px, sequence_length=ps if dynamic else None, initial_state=ph, time_major=True
        )
        loss = weighted_sum(outputs, [state])
        cell_weights = cell.weights
        reference = [outputs, state, *tf.gradients(loss, [px, ph, *cell_weights])]
    got, expected = run(
        tf1_graph, [popnn, reference], feeds, dict(zip(cell_weights, weights, strict=True))
    )
    expected[4:] = popnn_from_gru_cell(*expected[4:])
    return got, expected


def assert_all_close(got, expected):
    for name, g, e in zip(NAMES, got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5, err_msg=name)


def test_gru_matches_gru_cell_forward_and_gradients(ipu_system, tf1_graph):
    assert_all_close(*run_against_gru_cell(tf1_graph, layers.PopnnGRU, dynamic=False))


@pytest.mark.parametrize("time_major", [True, False])
def test_dynamic_gru_matches_dynamic_rnn_with_sequence_lengths(ipu_system, tf1_graph, time_major):
    seq_len = np.array([3, 0, 5], np.int32)
    got, expected = run_against_gru_cell(
        tf1_graph, layers.PopnnDynamicGRU, dynamic=True, seq_len=seq_len, time_major=time_major
    )
    assert_all_close(got, expected)
    # The output stays time-major whatever the input's layout (as the original).
    assert got[0].shape == (TIME, BATCH, UNITS)
    assert np.all(got[0][3:, 0] == 0) and np.all(got[0][:, 1] == 0)


@pytest.mark.parametrize("cls", [layers.PopnnGRU, layers.PopnnDynamicGRU])
def test_reset_after_matches_keras_gru(ipu_system, tf1_graph, cls):
    keras_kernel = uniform(7, [FEATURES, 3 * UNITS])
    keras_recurrent = uniform(8, [UNITS, 3 * UNITS])
    keras_bias = uniform(9, [2, 3 * UNITS])
    kernel = np.concatenate([keras_kernel, keras_recurrent], axis=0)
    biases = np.stack(np.split(keras_bias, 3, axis=1))  # [3, 2, u]
    dynamic = cls is layers.PopnnDynamicGRU
    px, ph, ps, feeds = placeholders(None)
    popnn = on_ipu(popnn_program(cls, kernel, biases, dynamic, reset_after=True), [px, ph, ps])
    with tf.device("cpu"):
        gru = tf_keras.layers.GRU(
            UNITS, time_major=True, return_sequences=True, return_state=True, reset_after=True
        )
        outputs, state = gru(px, initial_state=ph)
        loss = weighted_sum(outputs, [state])
        reference = [outputs, state, *tf.gradients(loss, [px, ph, *gru.weights])]
    got, expected = run(
        tf1_graph,
        [popnn, reference],
        feeds,
        dict(zip(gru.weights, [keras_kernel, keras_recurrent, keras_bias], strict=True)),
    )
    d_kernel, d_recurrent, d_bias = expected[4:]
    expected[4:] = [
        np.concatenate([d_kernel, d_recurrent], axis=0),
        np.stack(np.split(d_bias, 3, axis=1)),
    ]
    assert_all_close(got, expected)


def test_bias_layout(tf1_graph):
    x = tf.zeros([TIME, BATCH, FEATURES])
    plain, after = layers.PopnnGRU(UNITS), layers.PopnnGRU(UNITS, reset_after=True)
    (_, state), _ = plain(x), after(x)
    assert plain.biases.shape == (3, UNITS) and after.biases.shape == (3, 2, UNITS)
    assert plain.kernel.shape == (FEATURES + UNITS, 3 * UNITS)
    assert state.shape == (BATCH, UNITS) and plain.state_shape(BATCH) == [BATCH, UNITS]


def test_return_state_false_returns_the_outputs_alone(ipu_system, tf1_graph):
    x, h0 = data()
    layer = layers.PopnnDynamicGRU(UNITS, return_state=False)
    result = on_ipu(lambda x: layer(x, [5, 1, 2]), [tf.constant(x)])
    (outputs,) = run(tf1_graph, result, {})
    assert outputs.shape == (TIME, BATCH, UNITS)
    assert np.all(outputs[1:, 1] == 0)


def test_seq_len_must_be_integers(tf1_graph):
    with pytest.raises(TypeError, match="seq_len must be integers"):
        layers.PopnnDynamicGRU(UNITS)(tf.zeros([TIME, BATCH, FEATURES]), [1.0, 2.0, 3.0])
