"""v1 PopnnLSTM / PopnnDynamicLSTM against tf.compat.v1.nn.rnn_cell.LSTMCell (same weights).

LSTMCell's kernel is `[F + u, 4u]` over `concat([x, h])` with the gates in the
order i, c (its `j`), f, o; Popnn's is the same stacked kernel with the gates
i, f, c, o. `forget_bias=0` because Popnn adds no constant to the forget gate.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from v1_rnn_programs import BATCH, FEATURES, TIME, UNITS, on_ipu, run, uniform, weighted_sum

from ipu_tensorflow_addons.v1 import layers

pytestmark = pytest.mark.filterwarnings("ignore:`tf.nn.rnn_cell.LSTMCell` is deprecated")

LSTMStateTuple = tf.compat.v1.nn.rnn_cell.LSTMStateTuple

# Column blocks of LSTMCell's kernel (i, j, f, o) in Popnn's order (i, f, c=j, o).
CELL_TO_POPNN_GATES = [0, 2, 1, 3]


def popnn_from_cell(kernel: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    gates = np.split(kernel, 4, axis=1)
    popnn_kernel = np.concatenate([gates[g] for g in CELL_TO_POPNN_GATES], axis=1)
    popnn_biases = np.stack([np.split(bias, 4)[g] for g in CELL_TO_POPNN_GATES])
    return popnn_kernel, popnn_biases


def cell_weights() -> tuple[np.ndarray, np.ndarray]:
    return uniform(1, [FEATURES + UNITS, 4 * UNITS]), uniform(2, [4 * UNITS])


def data():
    return (
        uniform(3, [TIME, BATCH, FEATURES], scale=1.0),
        uniform(4, [BATCH, UNITS], scale=1.0),
        uniform(5, [BATCH, UNITS], scale=1.0),
    )


def run_pair(tf1_graph, dynamic: bool, seq_len=None):
    """Outputs, (c, h) and gradients (x, c0, h0, kernel, bias) of Popnn and of LSTMCell."""
    kernel, bias = cell_weights()
    popnn_kernel, popnn_biases = popnn_from_cell(kernel, bias)
    x, c0, h0 = data()
    px = tf.compat.v1.placeholder(tf.float32, x.shape)
    pc = tf.compat.v1.placeholder(tf.float32, c0.shape)
    ph = tf.compat.v1.placeholder(tf.float32, h0.shape)
    ps = tf.compat.v1.placeholder(tf.int32, [BATCH])
    feeds = {px: x, pc: c0, ph: h0, ps: seq_len if seq_len is not None else [TIME] * BATCH}

    def popnn_program(x, c0, h0, seq_len):
        cls = layers.PopnnDynamicLSTM if dynamic else layers.PopnnLSTM
        layer = cls(
            UNITS,
            weights_initializer=tf.compat.v1.constant_initializer(popnn_kernel),
            bias_initializer=tf.compat.v1.constant_initializer(popnn_biases),
        )
        state = LSTMStateTuple(c0, h0)
        if dynamic:
            outputs, final = layer(x, seq_len, initial_state=state, training=True)
        else:
            outputs, final = layer(x, initial_state=state, training=True)
        loss = weighted_sum(outputs, [final.c, final.h])
        grads = tf.gradients(loss, [x, c0, h0, layer.kernel, layer.biases])
        return [outputs, final.c, final.h, *grads]

    popnn = on_ipu(popnn_program, [px, pc, ph, ps])

    with tf.device("cpu"):
        cell = tf.compat.v1.nn.rnn_cell.LSTMCell(UNITS, forget_bias=0.0, name="reference")
        outputs, final = tf.compat.v1.nn.dynamic_rnn(
            cell,
            px,
            sequence_length=ps if dynamic else None,
            initial_state=LSTMStateTuple(pc, ph),
            time_major=True,
        )
        loss = weighted_sum(outputs, [final.c, final.h])
        cell_kernel, cell_bias = cell.weights
        grads = tf.gradients(loss, [px, pc, ph, cell_kernel, cell_bias])
        reference = [outputs, final.c, final.h, *grads]

    got, expected = run(
        tf1_graph, [popnn, reference], feeds, {cell_kernel: kernel, cell_bias: bias}
    )
    # The reference's weight gradients in Popnn's layout.
    expected[-2:] = popnn_from_cell(expected[-2], expected[-1])
    return got, expected


NAMES = ["outputs", "c", "h", "d_x", "d_c0", "d_h0", "d_kernel", "d_biases"]


def test_lstm_matches_lstm_cell_forward_and_gradients(ipu_system, tf1_graph):
    got, expected = run_pair(tf1_graph, dynamic=False)
    for name, g, e in zip(NAMES, got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5, err_msg=name)


def test_dynamic_lstm_matches_dynamic_rnn_with_sequence_lengths(ipu_system, tf1_graph):
    seq_len = np.array([2, 5, 0], np.int32)
    got, expected = run_pair(tf1_graph, dynamic=True, seq_len=seq_len)
    for name, g, e in zip(NAMES, got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5, err_msg=name)
    outputs = got[0]
    assert np.all(outputs[2:, 0] == 0) and np.all(outputs[:, 2] == 0)
    assert np.all(outputs[:2, 0] != 0)


def test_training_in_a_device_loop_matches_lstm_cell_training(ipu_system, tf1_graph):
    """Ten SGD steps in `loops.repeat` over an infeed equal ten steps of the CPU reference."""
    steps, learning_rate = 10, 0.5
    kernel, bias = cell_weights()
    popnn_kernel, popnn_biases = popnn_from_cell(kernel, bias)
    rng = np.random.RandomState(6)
    xs = rng.uniform(-1, 1, [steps, TIME, BATCH, FEATURES]).astype(np.float32)
    ys = rng.uniform(-1, 1, [steps, BATCH, UNITS]).astype(np.float32)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices((xs, ys)))

    def step(total, x, y):
        layer = layers.PopnnLSTM(
            UNITS,
            weights_initializer=tf.compat.v1.constant_initializer(popnn_kernel),
            bias_initializer=tf.compat.v1.constant_initializer(popnn_biases),
            name="popnn",
        )
        outputs, _ = layer(x)
        loss = tf.reduce_mean(tf.square(outputs[-1] - y))
        train = tf.compat.v1.train.GradientDescentOptimizer(learning_rate).minimize(loss)
        with tf.control_dependencies([train]):
            return total + loss

    trained = on_ipu(lambda: ipu.loops.repeat(steps, step, [0.0], infeed), [])

    px = tf.compat.v1.placeholder(tf.float32, [TIME, BATCH, FEATURES])
    py = tf.compat.v1.placeholder(tf.float32, [BATCH, UNITS])
    with tf.device("cpu"):
        cell = tf.compat.v1.nn.rnn_cell.LSTMCell(UNITS, forget_bias=0.0, name="reference")
        outputs, _ = tf.compat.v1.nn.dynamic_rnn(cell, px, dtype=tf.float32, time_major=True)
        reference_loss = tf.reduce_mean(tf.square(outputs[-1] - py))
        cell_kernel, cell_bias = cell.weights
        reference_train = tf.compat.v1.train.GradientDescentOptimizer(learning_rate).minimize(
            reference_loss, var_list=[cell_kernel, cell_bias]
        )

    popnn_kernel_var, popnn_biases_var = (
        v for v in tf.compat.v1.global_variables() if v.name.startswith("popnn/")
    )
    with tf.compat.v1.Session(graph=tf1_graph) as session:
        session.run(infeed.initializer)
        session.run(tf.compat.v1.global_variables_initializer())
        cell_kernel.load(kernel, session)
        cell_bias.load(bias, session)
        (total,) = session.run(trained)
        reference_total = sum(
            session.run([reference_loss, reference_train], {px: x, py: y})[0]
            for x, y in zip(xs, ys, strict=True)
        )
        got = session.run([popnn_kernel_var, popnn_biases_var])
        expected = popnn_from_cell(*session.run([cell_kernel, cell_bias]))
    np.testing.assert_allclose(total, reference_total, rtol=1e-5)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-4, atol=1e-5)
    assert not np.allclose(got[0], popnn_kernel)


def test_half_precision_with_float_partials_is_close_to_float(ipu_system, tf1_graph):
    kernel, bias = cell_weights()
    popnn_kernel, popnn_biases = popnn_from_cell(kernel, bias)
    x = data()[0]

    def program(dtype):
        def build(x):
            layer = layers.PopnnLSTM(
                UNITS,
                dtype=dtype,
                weights_initializer=tf.compat.v1.constant_initializer(popnn_kernel),
                bias_initializer=tf.compat.v1.constant_initializer(popnn_biases),
            )
            outputs, state = layer(tf.cast(x, dtype))
            assert outputs.dtype == dtype and state.c.dtype == dtype
            return outputs

        return on_ipu(build, [tf.constant(x)])

    half, single = run(tf1_graph, [program(tf.float16), program(tf.float32)], {})
    np.testing.assert_allclose(half[0], single[0], atol=5e-3)


def test_zero_initial_state_and_layout(ipu_system, tf1_graph):
    """No initial state means zeros; variables have Popnn's canonical shapes."""
    kernel, bias = cell_weights()
    popnn_kernel, popnn_biases = popnn_from_cell(kernel, bias)
    x = data()[0]
    layer = layers.PopnnLSTM(
        UNITS,
        weights_initializer=tf.compat.v1.constant_initializer(popnn_kernel),
        bias_initializer=tf.compat.v1.constant_initializer(popnn_biases),
    )
    zeros = np.zeros([BATCH, UNITS], np.float32)
    result = on_ipu(
        lambda x: [
            layer(x)[0],
            layer(x, initial_state=LSTMStateTuple(zeros, zeros))[0],
        ],
        [tf.constant(x)],
    )
    assert layer.kernel.shape == (FEATURES + UNITS, 4 * UNITS)
    assert layer.biases.shape == (4, UNITS)
    assert layer.canonical_weight_shape == [FEATURES + UNITS, 4 * UNITS]
    assert layer.state_shape(BATCH) == ([BATCH, UNITS], [BATCH, UNITS])
    assert len(tf.compat.v1.trainable_variables()) == 2  # the second call reuses them
    without, with_zeros = run(tf1_graph, result, {})
    np.testing.assert_array_equal(without, with_zeros)


def test_return_state_false_returns_the_outputs_alone(ipu_system, tf1_graph):
    layer = layers.PopnnLSTM(UNITS, return_state=False, seed=1)
    result = on_ipu(lambda x: layer(x), [tf.constant(data()[0])])
    (outputs,) = run(tf1_graph, result, {})
    assert outputs.shape == (TIME, BATCH, UNITS)


def test_seed_makes_the_default_initializer_repeatable(tf1_graph):
    first = layers.PopnnLSTM(UNITS, seed=3, name="first")
    second = layers.PopnnLSTM(UNITS, seed=3, name="second")
    x = tf.zeros([TIME, BATCH, FEATURES])
    first(x), second(x)
    a, b = run(tf1_graph, [first.kernel, second.kernel], {})
    np.testing.assert_array_equal(a, b)
    limit = np.sqrt(6.0 / (FEATURES + UNITS + 4 * UNITS))
    assert np.abs(a).max() <= limit and np.abs(a).max() > limit / 2


def test_initial_state_must_be_an_lstm_state_tuple(tf1_graph):
    layer = layers.PopnnLSTM(UNITS)
    zeros = tf.zeros([BATCH, UNITS])
    with pytest.raises(ValueError, match="Invalid initial_state type.*LSTMStateTuple"):
        layer(tf.zeros([TIME, BATCH, FEATURES]), initial_state=(zeros, zeros))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"dtype": tf.float64}, ValueError, "dtype must be float16 or float32"),
        # The original's Popnn op refuses it as a type attribute outside {float16, float32}.
        ({"partials_dtype": tf.int32}, TypeError, "partials_dtype must be float16 or float32"),
        ({"activation": "gelu"}, ValueError, "activation must be one of"),
        ({"recurrent_activation": "relu"}, ValueError, "recurrent_activation must be one of"),
        ({"activation": lambda x: x}, TypeError, "unrecognized function"),
        ({"activation": None}, TypeError, "could not interpret activation"),
        ({"available_memory_proportion_fwd": 1.5}, ValueError, "available_memory_proportion"),
        ({"num_units": 0}, ValueError, "num_units must be a positive int"),
        ({"num_units": "8"}, TypeError, "num_units must be an int, got '8'"),
        ({"num_units": 8.5}, ValueError, "num_units must be a whole number"),
    ],
)
def test_bad_constructor_arguments(kwargs, error, match):
    kwargs = {"num_units": UNITS, **kwargs}
    with pytest.raises(error, match=match):
        layers.PopnnLSTM(**kwargs)


def test_num_units_as_the_original_s_int_attribute_takes_it(tf1_graph):
    """The original hands num_units to its Popnn op's int attribute (int()): 8.0 and a numpy
    integer build the same layer as 8."""
    shapes = []
    for units in (UNITS, float(UNITS), np.int64(UNITS)):
        layer = layers.PopnnLSTM(units)
        layer.build([TIME, BATCH, FEATURES])
        shapes.append((layer.num_units, layer.kernel.shape.as_list()))
    assert shapes == [(UNITS, [FEATURES + UNITS, 4 * UNITS])] * 3


def test_input_of_wrong_rank_is_refused(tf1_graph):
    with pytest.raises(ValueError, match="3 dims"):
        layers.PopnnLSTM(UNITS)(tf.zeros([BATCH, FEATURES]))


def test_activation_functions_and_memory_options_are_kept():
    layer = layers.PopnnLSTM(
        UNITS,
        activation=tf.nn.relu,
        recurrent_activation=tf.sigmoid,
        available_memory_proportion_fwd=0.3,
        options_bwd={"availableMemoryProportion": 0.2, "partialsType": "half"},
    )
    assert (layer._activation, layer._recurrent_activation) == ("relu", "sigmoid")
    # An unset backward proportion takes the forward one; `options` values win.
    assert layer.forward_options == {"availableMemoryProportion": 0.3}
    assert layer.backward_options == {"availableMemoryProportion": 0.2, "partialsType": "half"}
    assert layer.saveable is False
