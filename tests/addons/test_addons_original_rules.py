"""User programs the original ipu_tensorflow_addons accepts (or refuses with a given error),
run against openipu: checks it has no rule the original lacks."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from ipu_tensorflow_addons.keras.layers import PopnnGRU, PopnnLSTM
from ipu_tensorflow_addons.keras.optimizers import (
    AdamIpuOptimizer,
    LAMBIpuOptimizer,
    SGDIpuOptimizer,
)

BATCH, TIME, FEATURES, UNITS = 2, 3, 4, 5
SHAPE = (BATCH, TIME, FEATURES)


def _inputs() -> np.ndarray:
    return np.random.RandomState(0).uniform(-1, 1, SHAPE).astype(np.float32)


def _lstm_pair(stock_kwargs: dict, popnn_kwargs: dict):
    """A stock LSTM with random weights, and a PopnnLSTM holding the same weights."""
    stock = tf_keras.layers.LSTM(UNITS, **stock_kwargs)
    stock.build(SHAPE)
    rng = np.random.RandomState(1)
    stock.set_weights([rng.uniform(-0.5, 0.5, w.shape).astype(np.float32) for w in stock.weights])
    popnn = PopnnLSTM(UNITS, **popnn_kwargs)
    popnn.build(SHAPE)
    popnn.set_weights(stock.get_weights())
    return stock, popnn


def test_lstm_takes_activation_functions():
    # op_util.get_activation_name: Keras/TensorFlow functions count by their name.
    stock, popnn = _lstm_pair(
        {"activation": "relu", "recurrent_activation": "hard_sigmoid"},
        {"activation": tf.nn.relu, "recurrent_activation": tf_keras.activations.hard_sigmoid},
    )
    x = _inputs()
    np.testing.assert_allclose(popnn(x), stock(x), rtol=1e-5, atol=1e-6)
    assert popnn.get_config()["activation"] == "relu"


def test_lstm_activation_errors_are_the_originals():
    with pytest.raises(TypeError, match="unrecognized function"):
        PopnnLSTM(UNITS, activation=lambda x: x)
    with pytest.raises(TypeError, match="could not interpret activation"):
        PopnnLSTM(UNITS, activation=5)
    with pytest.raises(ValueError, match="activation must be one of"):
        PopnnLSTM(UNITS, activation="elu")


def test_lstm_flags_count_by_truth_value():
    stock, popnn = _lstm_pair(
        {},
        {
            "unroll": None,
            "go_backwards": 0,
            "kernel_regularizer": None,
            "use_bias": 1,
            "seed": 1.5,  # kept: the default initializers do not use it
            "dropout_seed": 42,  # unused without dropout
            "dropout": -0.5,  # the original drops only for a rate > 0
        },
    )
    x = _inputs()
    np.testing.assert_allclose(popnn(x, training=True), stock(x), rtol=1e-5, atol=1e-6)
    assert popnn.get_config()["dropout_seed"] == 42


@pytest.mark.parametrize(("flag", "stock_flag"), [(1, True), (0, False), (None, False)])
def test_lstm_unit_forget_bias_by_truth_value(flag, stock_flag):
    stock = tf_keras.layers.LSTM(UNITS, unit_forget_bias=stock_flag)
    stock.build(SHAPE)
    popnn = PopnnLSTM(UNITS, unit_forget_bias=flag)
    popnn.build(SHAPE)
    np.testing.assert_array_equal(popnn.get_weights()[2], stock.get_weights()[2])


def test_lstm_dropout_seed_is_checked_when_dropping_out():
    layer = PopnnLSTM(UNITS, dropout=0.5, dropout_seed=42)
    x = _inputs()
    assert layer(x, training=False).shape == (BATCH, UNITS)
    with pytest.raises(ValueError, match=r"Expected the seed to have a shape \[2\]"):
        layer(x, training=True)


def test_recurrent_options_as_pairs():
    layer = PopnnLSTM(UNITS, options=[("partialsType", "half")])
    assert layer.get_config()["options"] == {"partialsType": "half"}


def test_gru_reset_after_must_be_a_bool_as_the_op_attribute():
    with pytest.raises(TypeError, match="Expected bool for argument 'reset_after'"):
        PopnnGRU(UNITS, reset_after=1)


# -- optimizers -------------------------------------------------------------------------------


def _train(optimizer, steps=3):
    variable = tf.Variable([0.5, -1.0, 2.0])
    for step in range(steps):
        grad = tf.constant([0.1, -0.2, 0.3]) * (step + 1)
        optimizer.apply_gradients([(grad, variable)])
    return variable.numpy()


def _numpy_sgd(momentum, nesterov, lr=0.1, steps=3):
    var = np.array([0.5, -1.0, 2.0])
    accum = np.zeros(3)
    for step in range(steps):
        g = np.array([0.1, -0.2, 0.3]) * (step + 1)
        accum = momentum * accum - lr * g
        var = var + (momentum * accum - lr * g if nesterov else accum)
    return var


def test_sgd_nesterov_by_truth_value():
    result = _train(SGDIpuOptimizer(0.1, momentum=0.9, nesterov=1))
    np.testing.assert_allclose(result, _numpy_sgd(0.9, True), rtol=1e-5)


def test_sgd_momentum_error_is_keras():
    with pytest.raises(ValueError, match=r"^`momentum` must be between \[0, 1\]\.$"):
        SGDIpuOptimizer(momentum=1.5)


@pytest.mark.parametrize("flag", [1, None, "no"])
def test_outline_apply_gradients_by_truth_value(flag):
    optimizer = SGDIpuOptimizer(0.1, outline_apply_gradients=flag)
    np.testing.assert_allclose(_train(optimizer), _numpy_sgd(0.0, False), rtol=1e-5)
    assert optimizer.get_config()["outline_apply_gradients"] == flag


def test_outline_kwargs_are_only_unpacked_when_outlining():
    optimizer = SGDIpuOptimizer(0.1, outline_apply_gradients_kwargs=[1])
    np.testing.assert_allclose(_train(optimizer), _numpy_sgd(0.0, False), rtol=1e-5)
    outlined = AdamIpuOptimizer(outline_apply_gradients=True, outline_apply_gradients_kwargs=[1])
    with pytest.raises(TypeError, match=r"argument after \*\* must be a mapping, not list"):
        _train(outlined)


@pytest.mark.parametrize("optimizer_class", [SGDIpuOptimizer, AdamIpuOptimizer])
def test_one_stage_optimizers_read_the_first_precision(optimizer_class):
    longer = _train(optimizer_class(0.1, optimizer_compute_precisions=(tf.float32, tf.float16)))
    np.testing.assert_array_equal(longer, _train(optimizer_class(0.1)))


def _lamb(**kwargs):
    return LAMBIpuOptimizer(0.1, weight_decay_rate=0.5, **kwargs)


def _train_named(optimizer):
    variables = [tf.Variable([0.5, -1.0], name="kernel"), tf.Variable([2.0, 1.0], name="dense")]
    for _ in range(2):
        optimizer.apply_gradients(
            [(tf.constant([0.1, -0.2]), variables[0]), (tf.constant([0.3, 0.1]), variables[1])]
        )
    return [v.numpy() for v in variables]


def test_lamb_patterns_as_the_original_searches_them():
    # A str is searched character by character, as the original's loop does: "ne" matches
    # "kernel" and "dense" ("n", "e"); "xq" neither.
    for given, equivalent in (("ne", ["n", "e"]), ("xq", None)):
        results = _train_named(_lamb(exclude_from_weight_decay=given))
        expected = _train_named(_lamb(exclude_from_weight_decay=equivalent))
        for result, reference in zip(results, expected, strict=True):
            np.testing.assert_array_equal(result, reference)
    assert not np.array_equal(
        _train_named(_lamb(exclude_from_weight_decay="ne"))[0], _train_named(_lamb())[0]
    )


def test_lamb_bad_patterns_fail_when_gradients_are_applied():
    optimizer = _lamb(exclude_from_weight_decay=["(bias"])
    with pytest.raises(re.error):
        _train_named(optimizer)
    optimizer = _lamb(exclude_from_layer_adaptation=[1])
    with pytest.raises(TypeError):
        _train_named(optimizer)
