"""Conformance: graphcore/ipu_tensorflow_addons `ipu_tensorflow_addons/v1/layers/rnn_final_state_test.py`.

The TF1 `PopnnLSTM`, `PopnnGRU` and their dynamic forms (sequence lengths), placed on the
IPU in a session, give stock Keras's time-major LSTM/GRU outputs and final states
(zeros past each sequence's end for the dynamic forms, whose final state is that at the
sequence's last step); `PopnnAUGRU` gives non-zero outputs exactly within each sequence
and a non-zero final state.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.compat import v1
from tensorflow.python import ipu

from ipu_tensorflow_addons.v1.layers import rnn_ops

BATCH, MAX_TIME, INPUTS, UNITS = 6, 5, 2, 3


@pytest.fixture
def session(tf1_graph):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()

    def run(result):
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            value = sess.run(result)
        return list(value) if isinstance(value, (list, tuple)) else [value]

    yield run
    ipu.config.reset_ipu_configuration()


def _inputs(seed):
    rng = np.random.RandomState(seed)
    inputs = rng.normal(0, 1, (MAX_TIME, BATCH, INPUTS)).astype(np.float32)
    seq_lens = np.arange(BATCH) % MAX_TIME + 1
    rng.shuffle(seq_lens)
    mask = np.arange(MAX_TIME)[:, None] < seq_lens[None, :]
    return inputs, seq_lens.astype(np.int32), mask


def _ipu(session, cls, return_state, *args):
    layer = cls(
        UNITS,
        weights_initializer=v1.keras.initializers.Ones(),
        bias_initializer=v1.keras.initializers.Ones(),
        return_state=return_state,
    )
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = layer(*args)
    return session(result)


def _cpu(session, cls, inputs, mask, return_state, **kwargs):
    layer = cls(
        UNITS,
        return_sequences=True,
        return_state=return_state,
        kernel_initializer="ones",
        recurrent_initializer="ones",
        bias_initializer="ones",
        time_major=True,
        **kwargs,
    )
    with tf.device("cpu"):
        result = layer(tf.constant(inputs), mask=None if mask is None else tf.constant(mask))
    return session(result)


def _assert_close(ours, theirs):
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _lstm_states(result, return_state):
    # PopNN's LSTM state is (c, h); Keras returns output, h, c.
    return [result[0], result[1][1], result[1][0]] if return_state else result


STATES = pytest.mark.parametrize("return_state", [True, False])


@pytest.mark.follows("test_lstm")
@STATES
def test_lstm(session, return_state):
    inputs, _, _ = _inputs(1)
    expected = _cpu(session, keras.layers.LSTM, inputs, None, return_state)
    got = _ipu(session, rnn_ops.PopnnLSTM, return_state, inputs)
    _assert_close(_lstm_states(got, return_state), expected)


@pytest.mark.follows("test_dynamic_lstm")
@STATES
def test_dynamic_lstm(session, return_state):
    inputs, seq_lens, mask = _inputs(2)
    expected = _cpu(session, keras.layers.LSTM, inputs, mask, return_state)
    # Keras repeats the last valid output past a sequence's end; PopNN gives zeros there.
    expected[0] = np.where(mask[..., None], expected[0], 0)
    got = _lstm_states(
        _ipu(session, rnn_ops.PopnnDynamicLSTM, return_state, inputs, seq_lens), return_state
    )
    np.testing.assert_array_equal(got[0] != 0, np.broadcast_to(mask[..., None], got[0].shape))
    _assert_close(got, expected)


@pytest.mark.follows("test_gru")
@STATES
def test_gru(session, return_state):
    inputs, _, _ = _inputs(3)
    expected = _cpu(session, keras.layers.GRU, inputs, None, return_state, reset_after=False)
    _assert_close(_ipu(session, rnn_ops.PopnnGRU, return_state, inputs), expected)


@pytest.mark.follows("test_dynamic_gru")
@STATES
def test_dynamic_gru(session, return_state):
    inputs, seq_lens, mask = _inputs(4)
    expected = _cpu(session, keras.layers.GRU, inputs, mask, return_state, reset_after=False)
    expected[0] = np.where(mask[..., None], expected[0], 0)
    got = _ipu(session, rnn_ops.PopnnDynamicGRU, return_state, inputs, seq_lens)
    np.testing.assert_array_equal(got[0] != 0, np.broadcast_to(mask[..., None], got[0].shape))
    _assert_close(got, expected)


@pytest.mark.follows("test_augru")
@STATES
def test_augru(session, return_state):
    inputs, seq_lens, mask = _inputs(5)
    score = np.random.RandomState(6).normal(0, 1, (MAX_TIME, BATCH)).astype(np.float32)
    got = _ipu(session, rnn_ops.PopnnAUGRU, return_state, inputs, seq_lens, score)
    np.testing.assert_array_equal(got[0] != 0, np.broadcast_to(mask[..., None], got[0].shape))
    if return_state:
        assert np.any(got[1] != 0)
