import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from openipu._src.addons.keras.layers.serial_dense import SerialDense

DIMENSIONS = ["input_columns", "input_rows_kernel_columns", "kernel_rows"]


def _pair(dimension, input_shape=(4, 6), units=8, factor=2, activation="relu"):
    """A SerialDense and a stock Dense sharing the same weights."""
    serial = SerialDense(units, factor, dimension, activation=activation)
    dense = tf_keras.layers.Dense(int(units), activation=activation)
    serial.build(input_shape)
    dense.build(input_shape)
    rng = np.random.default_rng(0)
    kernel = rng.normal(size=(input_shape[-1], int(units))).astype(np.float32)
    bias = rng.normal(size=(int(units),)).astype(np.float32)
    serial.set_weights([kernel, bias])
    dense.set_weights([kernel, bias])
    return serial, dense


@pytest.mark.parametrize("dimension", DIMENSIONS)
@pytest.mark.parametrize("input_shape", [(4, 6), (3, 4, 6)])
def test_forward_matches_dense_eager_and_compiled(dimension, input_shape):
    serial, dense = _pair(dimension, input_shape)
    x = tf.constant(np.random.default_rng(1).normal(size=input_shape), tf.float32)
    expected = dense(x).numpy()
    np.testing.assert_allclose(serial(x).numpy(), expected, rtol=1e-5, atol=1e-5)
    compiled = tf.function(serial, jit_compile=True)
    np.testing.assert_allclose(compiled(x).numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dimension", DIMENSIONS)
@pytest.mark.parametrize("input_shape", [(4, 6), (3, 4, 6)])
def test_gradients_match_dense(dimension, input_shape):
    serial, dense = _pair(dimension, input_shape, activation="tanh")
    x = tf.constant(np.random.default_rng(2).normal(size=input_shape), tf.float32)
    upstream = tf.constant(
        np.random.default_rng(3).normal(size=input_shape[:-1] + (8,)), tf.float32
    )

    def grads(layer):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x) * upstream)
        return tape.gradient(loss, [x] + layer.trainable_weights)

    expected = grads(dense)
    for got in (grads(serial), tf.function(lambda: grads(serial), jit_compile=True)()):
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-5)


def test_worked_numbers_without_bias():
    layer = SerialDense(2, 2, "input_rows_kernel_columns", use_bias=False)
    layer.build((1, 2))
    layer.set_weights([np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)])
    np.testing.assert_allclose(layer(tf.constant([[1.0, 1.0]])).numpy(), [[4.0, 6.0]])


def test_config_round_trip_and_input_dim():
    layer = SerialDense(
        3, 3, "kernel_rows", activation="sigmoid", kernel_regularizer="l2", input_dim=5
    )
    config = layer.get_config()
    clone = SerialDense.from_config(config)
    assert clone.get_config() == config
    assert config["batch_input_shape"] == (None, 5)
    assert layer.compute_output_shape((7, 5)).as_list() == [7, 3]


def test_fit_and_predict_in_a_model():
    model = tf_keras.Sequential(
        [
            SerialDense(4, 2, "input_rows_kernel_columns", input_shape=(6,)),
            SerialDense(2, 2, "kernel_rows"),
        ]
    )
    model.compile(optimizer=tf_keras.optimizers.SGD(0.1), loss="mse")
    x = np.random.default_rng(4).normal(size=(8, 6)).astype(np.float32)
    y = np.zeros((8, 2), np.float32)
    before = model.evaluate(x, y, verbose=0)
    model.fit(x, y, batch_size=4, epochs=3, verbose=0)
    assert model.evaluate(x, y, verbose=0) < before
    kernel1, bias1, kernel2, bias2 = model.get_weights()
    expected = (x @ kernel1 + bias1) @ kernel2 + bias2
    np.testing.assert_allclose(model.predict(x, verbose=0), expected, rtol=1e-5, atol=1e-5)


def test_non_float_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="floating point"):
        SerialDense(2, 1, "kernel_rows", dtype="int32").build((2, 2))


def test_sparse_input_is_a_type_error():
    layer = SerialDense(2, 1, "kernel_rows")
    layer.build((2, 2))
    sparse = tf.sparse.from_dense(tf.constant([[1.0, 0.0], [0.0, 1.0]]))
    with pytest.raises(TypeError, match="sparse"):
        layer.call(sparse)


def test_undefined_last_dimension_is_a_value_error():
    with pytest.raises(ValueError, match="last dimension"):
        SerialDense(2, 1, "kernel_rows").build((2, None))


@pytest.mark.parametrize("factor", [0, -1, 0.5, "none"])
def test_bad_serialization_factor(factor):
    with pytest.raises(ValueError, match="serialization_factor"):
        SerialDense(2, factor, "kernel_rows")


def test_bad_serialization_dimension():
    with pytest.raises(ValueError, match="Invalid serialization_dimension='columns'"):
        SerialDense(2, 1, "columns")


@pytest.mark.parametrize(
    "dimension, shape, units, what",
    [
        ("input_columns", (3, 4), 4, "\\(m\\)"),
        ("input_rows_kernel_columns", (4, 3), 4, "\\(k\\)"),
        ("kernel_rows", (4, 4), 3, "\\(n\\)"),
    ],
)
def test_factor_must_divide_the_split_dimension(dimension, shape, units, what):
    layer = SerialDense(units, 2, dimension)
    with pytest.raises(ValueError, match=f"must divide .*{what}.*got 3"):
        layer(tf.zeros(shape))


def test_rank_one_input_is_rejected():
    with pytest.raises(ValueError, match="min_ndim=2"):
        SerialDense(2, 1, "kernel_rows")(tf.zeros((4,)))


@pytest.mark.parametrize("units", [0, -3, 0.5, "none"])
def test_units_must_be_a_positive_integer(units):
    with pytest.raises(ValueError, match="units must be a"):
        SerialDense(units, 1, "kernel_rows")


def test_units_and_factor_are_converted_with_int_as_in_the_original():
    # The original takes int() of both: "8" is 8 units, 2.5 a factor of 2.
    serial, dense = _pair("kernel_rows", units="8", factor=2.5)
    assert serial.units == 8 and serial.serialization_factor == 2
    x = tf.constant(np.random.default_rng(3).normal(size=(4, 6)), tf.float32)
    np.testing.assert_allclose(serial(x).numpy(), dense(x).numpy(), rtol=1e-5, atol=1e-5)
