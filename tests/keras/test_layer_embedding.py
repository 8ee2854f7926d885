"""The IPU Embedding layer against tf.gather and the stock Keras Embedding."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from openipu._src.keras.layers import Embedding

IDS = np.random.default_rng(1).integers(0, 12, size=(4, 6)).astype(np.int32)


@pytest.mark.parametrize("serialization_factor", [1, 3])
def test_lookup_matches_tf_gather(serialization_factor):
    layer = Embedding(12, 5, serialization_factor=serialization_factor)
    out = layer(IDS)
    assert out.shape == (4, 6, 5) and out.dtype == tf.float32
    np.testing.assert_array_equal(out, tf.gather(layer.embeddings, IDS))
    jitted = tf.function(layer, jit_compile=True)(IDS)
    np.testing.assert_array_equal(jitted, out)


def test_matches_keras_embedding_with_the_same_weights():
    ours, stock = Embedding(12, 3), tf_keras.layers.Embedding(12, 3)
    ours.build((None, 6))
    stock.build((None, 6))
    stock.set_weights(ours.get_weights())
    np.testing.assert_array_equal(ours(IDS), stock(IDS))


def test_gradients_reach_the_looked_up_rows():
    layer = Embedding(12, 2, embeddings_initializer="ones")
    with tf.GradientTape() as tape:
        total = tf.reduce_sum(layer(IDS))
    gradient = tf.convert_to_tensor(tape.gradient(total, layer.embeddings))
    counts = np.bincount(IDS.ravel(), minlength=12).astype(np.float32)
    np.testing.assert_array_equal(gradient, np.repeat(counts[:, None], 2, axis=1))


def test_trains_in_a_model():
    model = tf_keras.Sequential(
        [
            tf_keras.Input((6,), dtype=tf.int32),
            Embedding(12, 4),
            tf_keras.layers.GlobalAveragePooling1D(),
            tf_keras.layers.Dense(1),
        ]
    )
    model.compile(optimizer="sgd", loss="mse")
    before = model.layers[0].get_weights()[0].copy()
    model.fit(IDS, np.ones((4, 1)), epochs=1, verbose=0)
    assert not np.array_equal(model.layers[0].get_weights()[0], before)


def test_compute_output_shape_and_config():
    layer = Embedding(12, 5, embeddings_initializer="zeros", serialization_factor=2)
    assert layer.compute_output_shape((None, 6)) == (None, 6, 5)
    config = layer.get_config()
    assert (
        config["input_dim"] == 12
        and config["output_dim"] == 5
        and config["serialization_factor"] == 2
    )
    assert Embedding.from_config(config).get_config() == config


@pytest.mark.parametrize(
    "argument",
    [
        "embeddings_regularizer",
        "activity_regularizer",
        "embeddings_constraint",
        "mask_zero",
        "input_length",
    ],
)
def test_unsupported_keras_arguments(argument):
    value = {"mask_zero": True, "input_length": 6}.get(
        argument, "l2" if "regularizer" in argument else "non_neg"
    )
    with pytest.raises(
        NotImplementedError,
        match=f"^ipu_tensorflow_addons.keras.layers.Embedding does not support __init__ "
        f"argument {argument}",
    ):
        Embedding(12, 5, **{argument: value})


def test_inputs_must_be_rank_2():
    with pytest.raises(
        ValueError,
        match=r"The input shape should be a tensor of shape \[batch, input_length\], got shape \(4,\)",
    ):
        Embedding(12, 5)(np.zeros(4, np.int32))


def test_serialization_factor_must_divide_the_vocabulary_when_looking_up():
    # As the original: the layer keeps the factor; the lookup (embedding_ops.py) refuses it.
    layer = Embedding(12, 5, serialization_factor=5)
    with pytest.raises(
        ValueError,
        match=r"The serialization_factor \(5\) must divide the size of the 0th dimension of "
        r"params \(12\)",
    ):
        layer(np.zeros([2, 3], np.int32))
