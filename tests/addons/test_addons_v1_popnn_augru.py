"""v1 PopnnAUGRU against a numpy AUGRU; gradients against numpy central differences.

The numpy cell is the original's reference `AUGRUCell` (graphcore/tensorflow,
compiler/plugin/poplar/tests/gru_test.py) in Popnn's gate order z, r, c: a
GRU whose update gate becomes `(1 - a_t) * z`. Past its length a sequence's
outputs are zeros and its state stays.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from v1_rnn_programs import BATCH, FEATURES, TIME, UNITS, on_ipu, run, uniform

from ipu_tensorflow_addons.v1 import layers

SEQ_LEN = np.array([5, 2, 4], np.int32)
OUTPUT_WEIGHTS = uniform(20, [TIME, BATCH, UNITS], scale=1.0)
STATE_WEIGHTS = uniform(21, [BATCH, UNITS], scale=1.0)


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def numpy_augru(x, h, attention, seq_len, kernel, biases, reset_after):
    """Outputs `[T, B, u]` and the final state, in float64."""
    features = x.shape[2]
    w, u = kernel[:features], kernel[features:]
    input_bias = biases[:, 0] if reset_after else biases
    outputs = np.zeros(x.shape[:2] + (UNITS,))
    for t in range(x.shape[0]):
        x_z, x_r, x_c = np.split(x[t] @ w + input_bias.reshape(-1), 3, axis=1)
        if reset_after:
            h_z, h_r, h_c = np.split(h @ u + biases[:, 1].reshape(-1), 3, axis=1)
            z, r = sigmoid(x_z + h_z), sigmoid(x_r + h_r)
            c = np.tanh(x_c + r * h_c)
        else:
            h_z, h_r = np.split(h @ u[:, : 2 * UNITS], 2, axis=1)
            z, r = sigmoid(x_z + h_z), sigmoid(x_r + h_r)
            c = np.tanh(x_c + (r * h) @ u[:, 2 * UNITS :])
        z = (1 - attention[t][:, None]) * z
        valid = (t < seq_len)[:, None]
        h = np.where(valid, z * h + (1 - z) * c, h)
        outputs[t] = np.where(valid, h, 0)
    return outputs, h


def numpy_loss(*args):
    outputs, state = numpy_augru(*args)
    return np.sum(outputs * OUTPUT_WEIGHTS) + np.sum(state * STATE_WEIGHTS)


def central_differences(args, index, epsilon=1e-6):
    """d numpy_loss / d args[index], one element at a time, in float64."""
    args = [np.array(a, np.float64) if isinstance(a, np.ndarray) else a for a in args]
    gradient = np.zeros_like(args[index])
    for position in np.ndindex(gradient.shape):
        saved = args[index][position]
        args[index][position] = saved + epsilon
        up = numpy_loss(*args)
        args[index][position] = saved - epsilon
        down = numpy_loss(*args)
        args[index][position] = saved
        gradient[position] = (up - down) / (2 * epsilon)
    return gradient


def data():
    return (
        uniform(10, [TIME, BATCH, FEATURES], scale=1.0),
        uniform(11, [BATCH, UNITS], scale=1.0),
        np.random.RandomState(12).uniform(0, 1, [TIME, BATCH]).astype(np.float32),
        uniform(13, [FEATURES + UNITS, 3 * UNITS]),
    )


def run_augru(tf1_graph, reset_after, time_major=True):
    x, h0, attention, kernel = data()

    def program(x, h0, attention):
        layer = layers.PopnnAUGRU(
            UNITS,
            weights_initializer=tf.compat.v1.constant_initializer(kernel),
            reset_after=reset_after,
        )
        if time_major:
            outputs, state = layer(x, SEQ_LEN, attention, initial_state=h0)
        else:
            outputs, state = layer(
                tf.transpose(x, [1, 0, 2]),
                SEQ_LEN,
                tf.transpose(attention),
                initial_state=h0,
                time_major=False,
            )
        loss = tf.reduce_sum(outputs * OUTPUT_WEIGHTS) + tf.reduce_sum(state * STATE_WEIGHTS)
        bias_r_u, bias_c = (
            v for v in tf.compat.v1.global_variables() if "bias_r_u" in v.name or "bias_c" in v.name
        )
        wrt = [x, h0, attention, layer.kernel, bias_r_u, bias_c]
        return [outputs, state, bias_r_u, bias_c, *tf.gradients(loss, wrt)]

    result = on_ipu(program, [tf.constant(x), tf.constant(h0), tf.constant(attention)])
    return run(tf1_graph, result, {}), (x, h0, attention, kernel)


@pytest.mark.parametrize("reset_after", [False, True])
def test_augru_matches_numpy_forward_and_gradients(ipu_system, tf1_graph, reset_after):
    got, (x, h0, attention, kernel) = run_augru(tf1_graph, reset_after)
    outputs, state, bias_r_u, bias_c, d_x, d_h0, d_attention, d_kernel, d_r_u, d_c = got
    # The original's own bias variables: r and u start at one, the candidate at zero.
    np.testing.assert_array_equal(bias_r_u, np.ones([2, UNITS]))
    np.testing.assert_array_equal(bias_c, np.zeros([1, UNITS]))
    biases = np.array([[1.0] * UNITS, [1.0] * UNITS, [0.0] * UNITS])
    if reset_after:
        biases = np.stack([biases, biases], axis=1)
    args = [x, h0, attention, SEQ_LEN, kernel, biases, reset_after]
    expected_outputs, expected_state = numpy_augru(*args)
    np.testing.assert_allclose(outputs, expected_outputs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state, expected_state, rtol=1e-5, atol=1e-5)
    assert np.all(outputs[2:, 1] == 0) and np.all(outputs[4:, 2] == 0)
    for name, value, index in [("x", d_x, 0), ("h0", d_h0, 1), ("attention", d_attention, 2)]:
        np.testing.assert_allclose(
            value, central_differences(args, index), rtol=1e-4, atol=1e-4, err_msg=name
        )
    np.testing.assert_allclose(d_kernel, central_differences(args, 4), rtol=1e-4, atol=1e-4)
    d_biases = central_differences(args, 5)
    if reset_after:  # one variable feeds both the input and the recurrent bias
        d_biases = d_biases.sum(axis=1)
    np.testing.assert_allclose(d_r_u, d_biases[:2], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(d_c, d_biases[2:], rtol=1e-4, atol=1e-4)


def test_batch_major_inputs_and_scores_give_the_same_numbers(ipu_system, tf1_graph):
    time_major, _ = run_augru(tf1_graph, reset_after=False)
    with tf.Graph().as_default() as other:
        batch_major, _ = run_augru(other, reset_after=False, time_major=False)
    for a, b in zip(time_major, batch_major, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_zero_attention_is_a_dynamic_gru(ipu_system, tf1_graph):
    x, h0, _, kernel = data()
    zeros = np.zeros([TIME, BATCH], np.float32)

    def program(x, h0):
        init = tf.compat.v1.constant_initializer(kernel)
        gru_biases = tf.compat.v1.constant_initializer(
            np.array([[1.0], [1.0], [0.0]]) * np.ones(UNITS)
        )
        augru = layers.PopnnAUGRU(UNITS, weights_initializer=init)
        gru = layers.PopnnDynamicGRU(UNITS, weights_initializer=init, bias_initializer=gru_biases)
        return [augru(x, SEQ_LEN, zeros, initial_state=h0), gru(x, SEQ_LEN, initial_state=h0)]

    (a_out, a_state), (g_out, g_state) = run(
        tf1_graph, on_ipu(program, [tf.constant(x), tf.constant(h0)]), {}
    )
    np.testing.assert_allclose(a_out, g_out, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(a_state, g_state, rtol=1e-6, atol=1e-6)


def test_attention_score_of_the_wrong_shape_is_refused(tf1_graph):
    layer = layers.PopnnAUGRU(UNITS)
    with pytest.raises(
        ValueError, match=r"attention_score must have shape \[time_len, batch_size\]"
    ):
        layer(tf.zeros([TIME, BATCH, FEATURES]), SEQ_LEN, tf.zeros([BATCH, TIME]))
