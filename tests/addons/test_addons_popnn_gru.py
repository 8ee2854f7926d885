"""PopnnGRU against stock tf_keras.layers.GRU with the same weights."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from openipu._src.addons.keras.layers.popnn_gru import PopnnGRU

BATCH, TIME, FEATURES, UNITS = 2, 3, 4, 5


def _inputs(seed: int = 0, shape=(BATCH, TIME, FEATURES)) -> np.ndarray:
    return np.random.RandomState(seed).uniform(-1, 1, shape).astype(np.float32)


def _pair(**kwargs):
    """A built stock GRU with random weights and a PopnnGRU holding the same weights."""
    time_major = kwargs.get("time_major", False)
    shape = (TIME, BATCH, FEATURES) if time_major else (BATCH, TIME, FEATURES)
    keras_layer = tf_keras.layers.GRU(UNITS, **kwargs)
    keras_layer.build(shape)
    rng = np.random.RandomState(1)
    keras_layer.set_weights(
        [rng.uniform(-0.5, 0.5, w.shape).astype(np.float32) for w in keras_layer.weights]
    )
    popnn_layer = PopnnGRU(UNITS, **kwargs)
    popnn_layer.build(shape)
    popnn_layer.set_weights(keras_layer.get_weights())
    return keras_layer, popnn_layer, _inputs(shape=shape)


def _as_list(result):
    return list(result) if isinstance(result, (list, tuple)) else [result]


def test_default_is_reset_after():
    layer = PopnnGRU(UNITS)
    assert layer.reset_after is True
    layer.build((BATCH, TIME, FEATURES))
    assert layer.biases.shape == (2, 3 * UNITS)
    assert layer.kernel.shape == (FEATURES, 3 * UNITS)
    assert layer.recurrent_kernel.shape == (UNITS, 3 * UNITS)
    layer = PopnnGRU(UNITS, reset_after=False)
    layer.build((BATCH, TIME, FEATURES))
    assert layer.biases.shape == (3 * UNITS,)


@pytest.mark.parametrize(
    ("reset_after", "return_sequences", "return_state", "time_major"),
    list(itertools.product([False, True], [False, True], [False, True], [False, True])),
)
def test_outputs_match_keras(reset_after, return_sequences, return_state, time_major):
    keras_layer, popnn_layer, x = _pair(
        reset_after=reset_after,
        return_sequences=return_sequences,
        return_state=return_state,
        time_major=time_major,
    )
    expected = _as_list(keras_layer(x))
    actual = _as_list(popnn_layer(x))
    assert len(actual) == len(expected) == (2 if return_state else 1)
    for got, want in zip(actual, expected, strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reset_after", [False, True])
def test_compiled_matches_keras(reset_after):
    keras_layer, popnn_layer, x = _pair(
        reset_after=reset_after, return_sequences=True, return_state=True
    )
    expected = keras_layer(x)
    actual = tf.function(lambda inputs: popnn_layer(inputs), jit_compile=True)(x)
    for got, want in zip(actual, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reset_after", [False, True])
def test_initial_state(reset_after):
    keras_layer, popnn_layer, x = _pair(reset_after=reset_after, return_state=True)
    h0 = tf.constant(np.random.RandomState(7).uniform(-1, 1, (BATCH, UNITS)), tf.float32)
    expected = keras_layer(x, initial_state=h0)
    for initial_state in (h0, [h0], h0.numpy()):
        actual = popnn_layer(x, initial_state=initial_state)
        for got, want in zip(actual, expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
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


def test_stateful_needs_a_static_batch_size():
    with pytest.raises(ValueError, match="stateful"):
        PopnnGRU(UNITS, stateful=True).build((None, TIME, FEATURES))


@pytest.mark.parametrize(
    ("reset_after", "jit_compile"), list(itertools.product([False, True], [False, True]))
)
def test_gradients_match_keras(reset_after, jit_compile):
    keras_layer, popnn_layer, x = _pair(reset_after=reset_after, return_sequences=True)
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


@pytest.mark.parametrize(
    ("reset_after", "partials_dtype"),
    [(True, tf.float16), (True, tf.float32), (False, tf.float32)],
)
def test_float16(reset_after, partials_dtype):
    keras_layer, _, x = _pair(reset_after=reset_after, return_sequences=True)
    layer = PopnnGRU(
        UNITS,
        reset_after=reset_after,
        return_sequences=True,
        dtype="float16",
        partials_dtype=partials_dtype,
    )
    layer.build(x.shape)
    layer.set_weights([w.astype(np.float16) for w in keras_layer.get_weights()])
    assert all(w.dtype == tf.float16 for w in layer.weights)
    result = layer(x.astype(np.float16))
    assert result.dtype == tf.float16
    keras_layer.set_weights([w.astype(np.float32) for w in layer.get_weights()])
    expected = keras_layer(x.astype(np.float16).astype(np.float32))
    np.testing.assert_allclose(np.float32(result), expected, atol=1e-2)
    compiled = tf.function(lambda inputs: layer(inputs), jit_compile=True)(x.astype(np.float16))
    np.testing.assert_allclose(np.float32(compiled), expected, atol=1e-2)


def test_dropout_one_mask_per_sequence():
    rate = 0.5
    keras_layer, _, x = _pair()
    layer = PopnnGRU(UNITS, dropout=rate, dropout_seed=[5, 8])
    layer.build(x.shape)
    layer.set_weights(keras_layer.get_weights())
    output = layer(x, training=True)
    # For each sequence exactly one feature mask, shared by all time steps, reproduces it.
    scale = 1.0 / (1.0 - rate)
    for b in range(BATCH):
        matches = [
            bits
            for bits in itertools.product([0.0, scale], repeat=FEATURES)
            if np.allclose(
                keras_layer(x[b : b + 1] * np.array(bits, np.float32)),
                output[b : b + 1],
                rtol=1e-5,
                atol=1e-6,
            )
        ]
        assert len(matches) == 1, matches
    assert not np.allclose(output, keras_layer(x), atol=1e-4)
    np.testing.assert_allclose(layer(x, training=True), output, rtol=1e-6)
    compiled = tf.function(lambda inputs: layer(inputs, training=True), jit_compile=True)(x)
    np.testing.assert_allclose(compiled, output, rtol=1e-5, atol=1e-6)


def test_dropout_only_in_training():
    keras_layer, _, x = _pair()
    layer = PopnnGRU(UNITS, dropout=0.5)
    layer.build(x.shape)
    layer.set_weights(keras_layer.get_weights())
    expected = keras_layer(x)
    np.testing.assert_allclose(layer(x, training=False), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer(x), expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(layer(x, training=True), expected, atol=1e-4)


def test_seed_makes_the_initial_weights_reproducible():
    def kernels(seed):
        layer = PopnnGRU(UNITS, seed=seed)
        layer.build((BATCH, TIME, FEATURES))
        return layer.kernel.numpy(), layer.recurrent_kernel.numpy()

    for a, b, c in zip(kernels(3), kernels(3), kernels(4), strict=True):
        np.testing.assert_array_equal(a, b)
        assert not np.allclose(a, c)


def test_state_shape():
    assert PopnnGRU(UNITS).state_shape(7) == [7, UNITS]


def test_config_round_trip():
    layer = PopnnGRU(
        UNITS,
        activation=None,
        recurrent_activation="tanh",
        dropout=0.25,
        dropout_seed=(3, 4),
        return_sequences=True,
        return_state=True,
        reset_after=False,
        partials_dtype="float16",
        seed=5,
        time_major=True,
        available_memory_proportion_fwd=0.3,
        name="gru_under_test",
    )
    config = layer.get_config()
    assert config["reset_after"] is False
    assert config["activation"] is None
    assert config["available_memory_proportion_bwd"] == 0.3
    rebuilt = PopnnGRU.from_config(config)
    assert rebuilt.get_config() == config
    by_name = tf_keras.layers.deserialize(tf_keras.layers.serialize(layer))
    assert isinstance(by_name, PopnnGRU)
    assert by_name.get_config() == config


@pytest.mark.parametrize("reset_after", [False, True])
def test_fit_and_predict_match_keras(reset_after):
    x = _inputs(seed=2, shape=(8, TIME, FEATURES))
    y = np.random.RandomState(4).uniform(-1, 1, (8, 1)).astype(np.float32)

    def model(layer):
        return tf_keras.Sequential(
            [tf_keras.Input(shape=(TIME, FEATURES)), layer, tf_keras.layers.Dense(1)]
        )

    keras_model = model(tf_keras.layers.GRU(UNITS, reset_after=reset_after))
    popnn_model = model(PopnnGRU(UNITS, reset_after=reset_after))
    popnn_model.set_weights(keras_model.get_weights())
    keras_model.compile(optimizer=tf_keras.optimizers.SGD(0.1), loss="mse")
    popnn_model.compile(optimizer=tf_keras.optimizers.SGD(0.1), loss="mse", jit_compile=True)
    fit = {"batch_size": 4, "epochs": 3, "shuffle": False, "verbose": 0}
    expected = keras_model.fit(x, y, **fit).history["loss"]
    actual = popnn_model.fit(x, y, **fit).history["loss"]
    np.testing.assert_allclose(actual, expected, rtol=1e-5)
    assert expected[-1] < expected[0]
    np.testing.assert_allclose(
        popnn_model.predict(x, verbose=0), keras_model.predict(x, verbose=0), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize(
    ("activation", "recurrent_activation"),
    [(None, None), ("relu", "hard_sigmoid"), ("sigmoid", "tanh"), ("hard_sigmoid", "softmax")],
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
        ({"dtype": "int32"}, "float16 or float32"),
        ({"use_bias": False}, "use_bias"),
        ({"kernel_regularizer": "l2"}, "kernel_regularizer"),
        ({"recurrent_regularizer": "l2"}, "recurrent_regularizer"),
        ({"bias_regularizer": "l2"}, "bias_regularizer"),
        ({"activity_regularizer": "l2"}, "activity_regularizer"),
        ({"kernel_constraint": "non_neg"}, "kernel_constraint"),
        ({"recurrent_constraint": "non_neg"}, "recurrent_constraint"),
        ({"bias_constraint": "non_neg"}, "bias_constraint"),
        ({"recurrent_dropout": 0.5}, "recurrent_dropout"),
        ({"implementation": 0}, "implementation"),
        ({"go_backwards": True}, "go_backwards"),
        ({"unroll": True}, "unroll"),
        ({"available_memory_proportion_fwd": -0.5}, "available_memory_proportion_fwd"),
        ({"available_memory_proportion_bwd": 2}, "available_memory_proportion_bwd"),
        ({"units": 0}, "units"),
    ],
)
def test_constructor_errors(kwargs, message):
    kwargs = {"units": UNITS, **kwargs}
    with pytest.raises(ValueError, match=message):
        PopnnGRU(**kwargs)


def test_mask_is_not_supported():
    with pytest.raises(NotImplementedError, match="mask"):
        PopnnGRU(UNITS)(_inputs(), mask=np.ones((BATCH, TIME), bool))


def test_input_shape_errors():
    with pytest.raises(ValueError, match="rank 3"):
        PopnnGRU(UNITS).build((BATCH, TIME, FEATURES, 1))
    with pytest.raises(ValueError, match="last dimension"):
        PopnnGRU(UNITS).build((BATCH, TIME, None))
    with pytest.raises(ValueError):
        PopnnGRU(UNITS)(np.ones((BATCH, FEATURES), np.float32))


def test_initial_state_errors():
    layer = PopnnGRU(UNITS)
    h0 = np.zeros((BATCH, UNITS), np.float32)
    with pytest.raises(ValueError, match="initial_state must be 1"):
        layer(_inputs(), initial_state=[h0, h0])
    with pytest.raises(ValueError, match="initial state must have shape"):
        layer(_inputs(), initial_state=np.zeros((BATCH, UNITS + 2), np.float32))


def test_unknown_sequence_length():
    keras_layer, popnn_layer, _ = _pair()
    inputs = tf_keras.Input(shape=(None, FEATURES))
    model = tf_keras.Model(inputs, popnn_layer(inputs))
    for time_steps in (2, 5):
        x = _inputs(seed=time_steps, shape=(BATCH, time_steps, FEATURES))
        np.testing.assert_allclose(
            model.predict(x, verbose=0), keras_layer(x), rtol=1e-5, atol=1e-6
        )


def test_partials_dtype_other_than_half_or_float_is_a_type_error():
    # The original hands it to its Popnn op's type attribute ({float16, float32}).
    with pytest.raises(TypeError, match="partials_dtype must be float16 or float32"):
        PopnnGRU(UNITS, partials_dtype="bfloat16")
