"""PopnnLSTM against stock tf_keras.layers.LSTM with the same weights."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from openipu._src.addons.keras.layers.popnn_lstm import PopnnLSTM

BATCH, TIME, FEATURES, UNITS = 2, 3, 4, 5


def _inputs(seed: int = 0, shape=(BATCH, TIME, FEATURES)) -> np.ndarray:
    return np.random.RandomState(seed).uniform(-1, 1, shape).astype(np.float32)


def _random_weights(layer, seed: int = 1) -> None:
    """Non-trivial weights (random biases too) for a built stock layer."""
    rng = np.random.RandomState(seed)
    layer.set_weights([rng.uniform(-0.5, 0.5, w.shape).astype(np.float32) for w in layer.weights])


def _pair(**kwargs):
    """A built stock LSTM with random weights and a PopnnLSTM holding the same weights."""
    time_major = kwargs.get("time_major", False)
    shape = (TIME, BATCH, FEATURES) if time_major else (BATCH, TIME, FEATURES)
    keras_layer = tf_keras.layers.LSTM(UNITS, **kwargs)
    keras_layer.build(shape)
    _random_weights(keras_layer)
    popnn_layer = PopnnLSTM(UNITS, **kwargs)
    popnn_layer.build(shape)
    popnn_layer.set_weights(keras_layer.get_weights())
    return keras_layer, popnn_layer, _inputs(shape=shape)


def _as_list(result):
    return list(result) if isinstance(result, (list, tuple)) else [result]


@pytest.mark.parametrize(
    ("return_sequences", "return_state", "time_major"),
    list(itertools.product([False, True], [False, True], [False, True])),
)
def test_outputs_match_keras(return_sequences, return_state, time_major):
    keras_layer, popnn_layer, x = _pair(
        return_sequences=return_sequences, return_state=return_state, time_major=time_major
    )
    expected = _as_list(keras_layer(x))
    actual = _as_list(popnn_layer(x))
    assert len(actual) == len(expected) == (3 if return_state else 1)
    for got, want in zip(actual, expected, strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_compiled_matches_keras():
    keras_layer, popnn_layer, x = _pair(return_sequences=True, return_state=True)
    expected = keras_layer(x)
    actual = tf.function(lambda inputs: popnn_layer(inputs), jit_compile=True)(x)
    for got, want in zip(actual, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_initial_state_is_h_then_c():
    keras_layer, popnn_layer, x = _pair(return_state=True)
    rng = np.random.RandomState(7)
    h0, c0 = (tf.constant(rng.uniform(-1, 1, (BATCH, UNITS)), tf.float32) for _ in range(2))
    expected = keras_layer(x, initial_state=[h0, c0])
    for initial_state in ([h0, c0], (h0.numpy(), c0.numpy())):
        actual = popnn_layer(x, initial_state=initial_state)
        for got, want in zip(actual, expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # Different from the zero state, so the argument was used.
    assert not np.allclose(popnn_layer(x)[0], expected[0], atol=1e-3)


def test_stateful_carries_state_between_calls():
    keras_layer, popnn_layer, x = _pair(stateful=True)
    assert len(popnn_layer.get_weights()) == 3
    x2 = _inputs(seed=3)
    for batch in (x, x2):
        np.testing.assert_allclose(popnn_layer(batch), keras_layer(batch), rtol=1e-5, atol=1e-6)
    keras_layer.reset_states()
    popnn_layer.reset_states()
    np.testing.assert_allclose(popnn_layer(x2), keras_layer(x2), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(popnn_layer.states[0], keras_layer.states[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(popnn_layer.states[1], keras_layer.states[1], rtol=1e-5, atol=1e-6)


def test_stateful_needs_a_static_batch_size():
    with pytest.raises(ValueError, match="stateful"):
        PopnnLSTM(UNITS, stateful=True).build((None, TIME, FEATURES))


@pytest.mark.parametrize("jit_compile", [False, True])
def test_gradients_match_keras(jit_compile):
    keras_layer, popnn_layer, x = _pair(return_sequences=True)
    x = tf.constant(x)
    upstream = tf.constant(_inputs(seed=5, shape=(BATCH, TIME, UNITS)))

    def gradients(layer):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x) * upstream)
        return tape.gradient(loss, [x, *layer.trainable_weights])

    expected = gradients(keras_layer)
    actual = tf.function(lambda: gradients(popnn_layer), jit_compile=jit_compile)()
    assert len(actual) == 4
    for got, want in zip(actual, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("partials_dtype", [tf.float16, tf.float32])
def test_float16(partials_dtype):
    keras_layer, _, x = _pair(return_sequences=True)
    layer = PopnnLSTM(UNITS, return_sequences=True, dtype="float16", partials_dtype=partials_dtype)
    layer.build(x.shape)
    layer.set_weights([w.astype(np.float16) for w in keras_layer.get_weights()])
    assert all(w.dtype == tf.float16 for w in layer.weights)
    result = layer(x.astype(np.float16))
    assert result.dtype == tf.float16
    # The fp32 reference with the fp16-rounded weights and inputs.
    keras_layer.set_weights([w.astype(np.float16).astype(np.float32) for w in layer.get_weights()])
    expected = keras_layer(x.astype(np.float16).astype(np.float32))
    np.testing.assert_allclose(np.float32(result), expected, atol=1e-2)
    compiled = tf.function(lambda inputs: layer(inputs), jit_compile=True)(x.astype(np.float16))
    np.testing.assert_allclose(np.float32(compiled), expected, atol=1e-2)


def _matching_shared_masks(popnn_output, keras_layer, x, rate):
    """For each sequence, the feature masks (shared by all time steps) reproducing the output."""
    scale = 1.0 / (1.0 - rate)
    found = []
    for b in range(x.shape[0]):
        matches = []
        for bits in itertools.product([0.0, scale], repeat=x.shape[-1]):
            candidate = keras_layer(x[b : b + 1] * np.array(bits, np.float32))
            if np.allclose(candidate, popnn_output[b : b + 1], rtol=1e-5, atol=1e-6):
                matches.append(bits)
        found.append(matches)
    return found


def test_dropout_one_mask_per_sequence():
    rate = 0.5
    keras_layer, _, x = _pair()
    layer = PopnnLSTM(UNITS, dropout=rate, dropout_seed=[11, 3])
    layer.build(x.shape)
    layer.set_weights(keras_layer.get_weights())
    output = layer(x, training=True)
    masks = _matching_shared_masks(output, keras_layer, x, rate)
    assert all(len(m) == 1 for m in masks), masks
    assert not np.allclose(output, keras_layer(x), atol=1e-4)
    # A seeded mask is the same on every call, compiled or not.
    np.testing.assert_allclose(layer(x, training=True), output, rtol=1e-6)
    compiled = tf.function(lambda inputs: layer(inputs, training=True), jit_compile=True)(x)
    np.testing.assert_allclose(compiled, output, rtol=1e-5, atol=1e-6)


def test_dropout_only_in_training():
    keras_layer, _, x = _pair()
    layer = PopnnLSTM(UNITS, dropout=0.5)
    layer.build(x.shape)
    layer.set_weights(keras_layer.get_weights())
    expected = keras_layer(x)
    np.testing.assert_allclose(layer(x, training=False), expected, rtol=1e-5, atol=1e-6)
    # training=None follows the learning phase, which is inference by default.
    np.testing.assert_allclose(layer(x), expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(layer(x, training=True), expected, atol=1e-4)


def test_dropout_rate_is_checked_only_when_training():
    # As the original: the rate reaches rand_ops.dropout (and its range check) in training only.
    keras_layer, _, x = _pair()
    layer = PopnnLSTM(UNITS, dropout=1.0)
    layer.build(x.shape)
    layer.set_weights(keras_layer.get_weights())
    np.testing.assert_allclose(layer(x, training=False), keras_layer(x), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"The rate must be in the range \[0, 1\)"):
        layer(x, training=True)


def test_unit_forget_bias_initialisation():
    layer = PopnnLSTM(UNITS, bias_initializer="ones", unit_forget_bias=False)
    layer.build((BATCH, TIME, FEATURES))
    np.testing.assert_array_equal(layer.biases, np.ones(4 * UNITS))
    layer = PopnnLSTM(UNITS, bias_initializer=tf_keras.initializers.Constant(0.5))
    layer.build((BATCH, TIME, FEATURES))
    expected = np.concatenate([np.full(UNITS, 0.5), np.ones(UNITS), np.full(2 * UNITS, 0.5)])
    np.testing.assert_array_equal(layer.biases, expected)


def test_seed_makes_the_initial_weights_reproducible():
    def kernels(**kwargs):
        layer = PopnnLSTM(UNITS, **kwargs)
        layer.build((BATCH, TIME, FEATURES))
        return layer.kernel.numpy(), layer.recurrent_kernel.numpy()

    first, again, other = kernels(seed=3), kernels(seed=3), kernels(seed=4)
    for a, b, c in zip(first, again, other, strict=True):
        np.testing.assert_array_equal(a, b)
        assert not np.allclose(a, c)
    # The layer's seed does not override an initializer's own seed.
    own = tf_keras.initializers.GlorotUniform(seed=9)
    np.testing.assert_array_equal(
        kernels(seed=3, kernel_initializer=own)[0],
        kernels(seed=4, kernel_initializer=tf_keras.initializers.GlorotUniform(seed=9))[0],
    )


def test_state_shape():
    assert PopnnLSTM(UNITS).state_shape(7) == ([7, UNITS], [7, UNITS])


def test_config_round_trip():
    layer = PopnnLSTM(
        UNITS,
        activation="relu",
        recurrent_activation="hard_sigmoid",
        unit_forget_bias=False,
        dropout=0.25,
        dropout_seed=[1, 2],
        return_sequences=True,
        return_state=True,
        stateful=True,
        partials_dtype=tf.float16,
        seed=5,
        time_major=True,
        available_memory_proportion_fwd=0.3,
        available_memory_proportion_bwd=0.6,
        name="lstm_under_test",
    )
    config = layer.get_config()
    assert config["partials_dtype"] == "float16"
    assert config["available_memory_proportion_fwd"] == 0.3
    assert config["available_memory_proportion_bwd"] == 0.6
    assert config["dropout_seed"] == [1, 2]
    assert config["unit_forget_bias"] is False
    rebuilt = PopnnLSTM.from_config(config)
    assert rebuilt.get_config() == config
    assert rebuilt.partials_dtype == tf.float16
    by_name = tf_keras.layers.deserialize(tf_keras.layers.serialize(layer))
    assert isinstance(by_name, PopnnLSTM)
    assert by_name.get_config() == config


def test_memory_proportions():
    layer = PopnnLSTM(UNITS, available_memory_proportion_fwd=0.4)
    assert layer.available_memory_proportion_bwd == 0.4
    layer = PopnnLSTM(UNITS, available_memory_proportion_fwd=-1.0)
    assert layer.available_memory_proportion_fwd is None


def _model(layer, seed_weights):
    model = tf_keras.Sequential(
        [tf_keras.Input(shape=(TIME, FEATURES)), layer, tf_keras.layers.Dense(1)]
    )
    if seed_weights is not None:
        model.set_weights(seed_weights)
    model.compile(optimizer=tf_keras.optimizers.SGD(0.1), loss="mse")
    return model


@pytest.mark.parametrize("jit_compile", [False, True])
def test_fit_and_predict_match_keras(jit_compile):
    x = _inputs(seed=2, shape=(8, TIME, FEATURES))
    y = np.random.RandomState(4).uniform(-1, 1, (8, 1)).astype(np.float32)
    keras_model = tf_keras.Sequential(
        [
            tf_keras.Input(shape=(TIME, FEATURES)),
            tf_keras.layers.LSTM(UNITS),
            tf_keras.layers.Dense(1),
        ]
    )
    weights = keras_model.get_weights()
    keras_model = _model(keras_model.layers[0], weights)
    popnn_model = _model(PopnnLSTM(UNITS), weights)
    popnn_model.compile(optimizer=tf_keras.optimizers.SGD(0.1), loss="mse", jit_compile=jit_compile)
    fit = {"batch_size": 4, "epochs": 3, "shuffle": False, "verbose": 0}
    expected = keras_model.fit(x, y, **fit).history["loss"]
    actual = popnn_model.fit(x, y, **fit).history["loss"]
    np.testing.assert_allclose(actual, expected, rtol=1e-5)
    assert expected[-1] < expected[0]
    np.testing.assert_allclose(
        popnn_model.predict(x, verbose=0), keras_model.predict(x, verbose=0), rtol=1e-5, atol=1e-6
    )


def test_activation_none_is_linear():
    keras_layer, popnn_layer, x = _pair(activation=None, recurrent_activation=None)
    np.testing.assert_allclose(popnn_layer(x), keras_layer(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("activation", "recurrent_activation"),
    [("tanh", "hard_sigmoid"), ("relu", "tanh"), ("sigmoid", "sigmoid")],
)
def test_other_activations_match_keras(activation, recurrent_activation):
    keras_layer, popnn_layer, x = _pair(
        activation=activation, recurrent_activation=recurrent_activation
    )
    np.testing.assert_allclose(popnn_layer(x), keras_layer(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"activation": "elu"}, "activation must be one of"),
        ({"recurrent_activation": "relu"}, "recurrent_activation must be one of"),
        ({"dtype": "float64"}, "float16 or float32"),
        ({"use_bias": False}, "use_bias"),
        ({"kernel_regularizer": "l2"}, "kernel_regularizer"),
        ({"recurrent_regularizer": "l2"}, "recurrent_regularizer"),
        ({"bias_regularizer": "l2"}, "bias_regularizer"),
        ({"activity_regularizer": "l2"}, "activity_regularizer"),
        ({"kernel_constraint": "non_neg"}, "kernel_constraint"),
        ({"recurrent_constraint": "non_neg"}, "recurrent_constraint"),
        ({"bias_constraint": "non_neg"}, "bias_constraint"),
        ({"recurrent_dropout": 0.1}, "recurrent_dropout"),
        ({"implementation": 3}, "implementation"),
        ({"go_backwards": True}, "go_backwards"),
        ({"unroll": True}, "unroll"),
        ({"available_memory_proportion_fwd": 1.5}, "available_memory_proportion_fwd"),
        ({"available_memory_proportion_bwd": "half"}, "available_memory_proportion_bwd"),
    ],
)
def test_constructor_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PopnnLSTM(UNITS, **kwargs)


@pytest.mark.parametrize("units", [0, -2, 2.5, True])
def test_units_must_be_a_positive_int(units):
    with pytest.raises(ValueError, match="units"):
        PopnnLSTM(units)


def test_mask_is_not_supported():
    x = _inputs()
    with pytest.raises(NotImplementedError, match="mask"):
        PopnnLSTM(UNITS)(x, mask=np.ones((BATCH, TIME), bool))


def test_input_shape_errors():
    with pytest.raises(ValueError, match="rank 3"):
        PopnnLSTM(UNITS).build((BATCH, FEATURES))
    with pytest.raises(ValueError, match="last dimension"):
        PopnnLSTM(UNITS).build((BATCH, TIME, None))
    with pytest.raises(ValueError):
        PopnnLSTM(UNITS)(np.ones((BATCH, FEATURES), np.float32))


def test_initial_state_errors():
    layer = PopnnLSTM(UNITS)
    x = _inputs()
    h0 = np.zeros((BATCH, UNITS), np.float32)
    with pytest.raises(ValueError, match="initial_state must be 2"):
        layer(x, initial_state=[h0])
    with pytest.raises(ValueError, match="initial state must have shape"):
        layer(x, initial_state=[h0, np.zeros((BATCH, UNITS + 1), np.float32)])


def test_dropout_in_fit_but_not_in_predict():
    x = _inputs(seed=2, shape=(8, TIME, FEATURES))
    y = np.random.RandomState(4).uniform(-1, 1, (8, 1)).astype(np.float32)
    plain = _model(PopnnLSTM(UNITS), _model(PopnnLSTM(UNITS), None).get_weights())
    dropped = _model(PopnnLSTM(UNITS, dropout=0.5, dropout_seed=[1, 2]), plain.get_weights())
    np.testing.assert_allclose(
        dropped.predict(x, verbose=0), plain.predict(x, verbose=0), rtol=1e-6
    )
    dropped.compile(optimizer=tf_keras.optimizers.SGD(0.1), loss="mse", jit_compile=True)
    fit = {"batch_size": 8, "epochs": 1, "shuffle": False, "verbose": 0}
    # The first step's loss is computed before any update: it differs only by dropout.
    assert not np.allclose(
        dropped.fit(x, y, **fit).history["loss"], plain.evaluate(x, y, verbose=0)
    )


def test_mixed_precision_policy():
    keras_layer, _, x = _pair()
    layer = PopnnLSTM(UNITS, dtype="mixed_float16")
    layer.build(x.shape)
    layer.set_weights(keras_layer.get_weights())
    assert layer.kernel.dtype == tf.float32
    result = layer(x)
    assert result.dtype == tf.float16
    np.testing.assert_allclose(np.float32(result), keras_layer(x), atol=1e-2)


def test_saved_keras_model_predicts_the_same(tmp_path):
    model = tf_keras.Sequential(
        [tf_keras.Input(shape=(TIME, FEATURES)), PopnnLSTM(UNITS, seed=1), tf_keras.layers.Dense(1)]
    )
    path = str(tmp_path / "popnn_lstm.keras")
    model.save(path)
    loaded = tf_keras.models.load_model(path)
    assert isinstance(loaded.layers[0], PopnnLSTM)
    x = _inputs()
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0))


def test_partials_dtype_other_than_half_or_float_is_a_type_error():
    # The original hands it to its Popnn op's type attribute ({float16, float32}).
    with pytest.raises(TypeError, match="partials_dtype must be float16 or float32"):
        PopnnLSTM(UNITS, partials_dtype=tf.float64)
